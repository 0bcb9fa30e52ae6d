"""fusedconv's Python package on NumPy arrays (the CPU path): the four models against a float64
NumPy reference on small odd shapes, NaN as PyTorch, p83's dropout, and every error path.

Needs NumPy and the built library (PYTHONPATH=build/python, or FUSEDCONV_LIBRARY); ctest runs
it as `python_numpy`. Run by hand: python3 python/tests/test_numpy_cpu.py -v (or pytest).
"""

import os
import subprocess
import sys
import threading
import unittest

try:
    import numpy as np
except ImportError:
    np = None

SKIP_EXIT = 77  # ctest's SKIP_RETURN_CODE for this test
if np is None:
    if __name__ == "__main__":
        print("SKIPPED: NumPy is not installed for %s (Debian: apt-get install python3-numpy)"
              % sys.executable)
        sys.exit(SKIP_EXIT)
    raise unittest.SkipTest("NumPy is not installed")

import fusedconv  # noqa: E402
import numpy_reference as ref  # noqa: E402

TOL = 1e-4  # the project's bar: |got - float64| / max(1, |float64|)


def rand(rng, shape, lo=0.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def conv_params(rng, cout, cin, k, spatial):
    """PyTorch's default init: U(-b, b), b = 1/sqrt(fan_in), for weight and bias."""
    b = 1.0 / np.sqrt(cin * k ** spatial)
    return (rand(rng, (cout, cin) + (k,) * spatial, -b, b), rand(rng, (cout,), -b, b))


class Models(unittest.TestCase):
    """Each model against float64 at small odd shapes, batch 1 and more, kernels 1, 3 and 5."""

    def check(self, got, want):
        err = ref.max_err(got, want)
        self.assertLess(err, TOL, "max error %g" % err)

    def test_p24(self):
        rng = np.random.default_rng(24)
        for n, cin, cout, k, (d, h, w) in [(1, 3, 5, 3, (5, 7, 9)), (2, 2, 3, 1, (3, 4, 5)),
                                           (1, 1, 7, 5, (6, 9, 8)), (3, 4, 2, 3, (3, 3, 11))]:
            with self.subTest(n=n, cin=cin, cout=cout, k=k, dhw=(d, h, w)):
                x = rand(rng, (n, cin, d, h, w))
                wt, b = conv_params(rng, cout, cin, k, 3)
                y = fusedconv.p24(x, wt, b, dim=2)
                self.assertIsInstance(y, np.ndarray)
                self.assertEqual(y.dtype, np.float32)
                self.assertEqual(y.shape, (n, cout, h - k + 1, w - k + 1))
                self.check(y, ref.p24(x, wt, b))
                np.testing.assert_allclose(y.sum(axis=1), 1.0, atol=1e-5)
                self.check(fusedconv.p24(x, wt, b, dim=-3), ref.p24(x, wt, b))

    def test_p25(self):
        rng = np.random.default_rng(25)
        for n, cin, cout, k, (h, w) in [(1, 3, 5, 3, (7, 9)), (2, 2, 4, 1, (5, 6)),
                                        (1, 5, 3, 5, (9, 11)), (3, 1, 6, 3, (3, 13))]:
            with self.subTest(n=n, cin=cin, cout=cout, k=k, hw=(h, w)):
                x = rand(rng, (n, cin, h, w))
                wt, b = conv_params(rng, cout, cin, k, 2)
                y = fusedconv.p25(x, wt, b)
                self.assertEqual(y.shape, (n, 1, h - k + 1, w - k + 1))
                self.check(y, ref.p25(x, wt, b))

    def test_p32(self):
        rng = np.random.default_rng(32)
        for n, cin, cout, k, (h, w), s in [(1, 3, 5, 3, (7, 9), 2.0), (2, 2, 4, 1, (5, 6), -1.5),
                                           (1, 4, 3, 5, (9, 10), 0.0), (2, 3, 7, 3, (11, 5), 0.37)]:
            with self.subTest(n=n, cin=cin, cout=cout, k=k, hw=(h, w), scale=s):
                x = rand(rng, (n, cin, h, w))
                wt, b = conv_params(rng, cout, cin, k, 2)
                y = fusedconv.p32(x, wt, b, s)
                self.assertEqual(y.shape, (n, 1, h - k + 1, w - k + 1))
                self.check(y, ref.p32(x, wt, b, s))

    def test_p83_groupnorm_reaches_output(self):
        # min_value above every value and a clamp below every value: the output is GroupNorm's.
        rng = np.random.default_rng(83)
        for n, cin, cout, groups, k, (d, h, w) in [(1, 3, 4, 2, 3, (4, 6, 7)), (2, 2, 6, 3, 1, (3, 4, 5)),
                                                   (1, 1, 8, 8, 5, (5, 7, 6)), (2, 3, 4, 1, 3, (3, 5, 9))]:
            with self.subTest(n=n, cin=cin, cout=cout, groups=groups, k=k, dhw=(d, h, w)):
                x = rand(rng, (n, cin, d, h, w))
                wt, b = conv_params(rng, cout, cin, k, 3)
                gamma, beta = rand(rng, (cout,), 0.5, 1.5), rand(rng, (cout,), -0.5, 0.5)
                y = fusedconv.p83(x, wt, b, gamma, beta, groups, eps=1e-5, min_value=10.0,
                                  max_value=10.0, clamp_min=-10.0, dropout_p=0.2, training=False)
                self.assertEqual(y.shape, (n, cout, d - k + 1, h - k + 1, w - k + 1))
                self.check(y, ref.p83_before_dropout(x, wt, b, gamma, beta, groups, 1e-5, 10.0, 10.0,
                                                     clamp_min=-10.0))

    def test_p83_kernelbench_parameters(self):
        # min(x, 0) then clamp(0, 1): every finite value is 0, and so is the output.
        rng = np.random.default_rng(830)
        x = rand(rng, (1, 3, 5, 6, 7))
        wt, b = conv_params(rng, 4, 3, 3, 3)
        gamma, beta = np.ones(4, np.float32), np.zeros(4, np.float32)
        y = fusedconv.p83(x, wt, b, gamma, beta, 2, 1e-5, 0.0, 1.0, 0.2, False, 0)
        self.check(y, ref.p83_before_dropout(x, wt, b, gamma, beta, 2, 1e-5, 0.0, 1.0))

    def test_p83_clamp_min_above_max_gives_max(self):
        rng = np.random.default_rng(831)
        x = rand(rng, (1, 2, 4, 5, 6))
        wt, b = conv_params(rng, 4, 2, 3, 3)
        y = fusedconv.p83(x, wt, b, np.ones(4, np.float32), np.zeros(4, np.float32), 2,
                          min_value=0.75, max_value=0.25, dropout_p=0.0, training=False)
        np.testing.assert_array_equal(y, np.float32(0.25))

    def test_out_is_filled_and_returned(self):
        rng = np.random.default_rng(1)
        x = rand(rng, (2, 3, 8, 9))
        wt, b = conv_params(rng, 4, 3, 3, 2)
        out = np.full((2, 1, 6, 7), np.nan, np.float32)
        y = fusedconv.p25(x, wt, b, out=out)
        self.assertIs(y, out)
        self.check(out, ref.p25(x, wt, b))
        self.assertEqual(fusedconv.output_shape("p25", x.shape, wt.shape, 0), (2, 1, 6, 7))

    def test_two_threads_at_once(self):
        rng = np.random.default_rng(2)
        x = rand(rng, (2, 3, 6, 12, 12))
        wt, b = conv_params(rng, 5, 3, 3, 3)
        want = ref.p24(x, wt, b)
        results, errors = [None] * 4, []

        def work(i):
            try:
                for _ in range(5):
                    results[i] = fusedconv.p24(x, wt, b)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for y in results:
            self.check(y, want)


class NaNLikePyTorch(unittest.TestCase):
    """A NaN in the input lands exactly where PyTorch puts it (PROBLEMS.md)."""

    def test_p24_p25_p32(self):
        rng = np.random.default_rng(5)
        x3 = rand(rng, (2, 2, 5, 7, 8))
        x3[0, 1, 2, 3, 4] = np.nan
        w3, b3 = conv_params(rng, 4, 2, 3, 3)
        y = fusedconv.p24(x3, w3, b3)
        self.assertTrue(np.isnan(y).any())
        self.assertFalse(np.isnan(y[1]).any())
        self.assertLess(ref.max_err(y, ref.p24(x3, w3, b3)), TOL)

        x2 = rand(rng, (3, 3, 9, 10))
        x2[1, 2, 4, 5] = np.nan
        w2, b2 = conv_params(rng, 5, 3, 3, 2)
        for name, got, want in [("p25", fusedconv.p25(x2, w2, b2), ref.p25(x2, w2, b2)),
                                ("p32", fusedconv.p32(x2, w2, b2, -2.0), ref.p32(x2, w2, b2, -2.0))]:
            with self.subTest(model=name):
                self.assertEqual(int(np.isnan(got).sum()), 9)  # the 3x3 window around the NaN
                self.assertLess(ref.max_err(got, want), TOL)

    def test_p83_nan_fills_its_group(self):
        rng = np.random.default_rng(6)
        x = rand(rng, (2, 2, 5, 6, 7))
        x[1, 0, 2, 2, 2] = np.nan
        wt, b = conv_params(rng, 4, 2, 3, 3)
        gamma, beta = np.ones(4, np.float32), np.zeros(4, np.float32)
        want = ref.p83_before_dropout(x, wt, b, gamma, beta, 2, 1e-5, 0.0, 1.0)
        for training in (False, True):  # a dropped NaN stays NaN (NaN * 0), as in PyTorch
            with self.subTest(training=training):
                y = fusedconv.p83(x, wt, b, gamma, beta, 2, 1e-5, 0.0, 1.0, 0.5, training, 7)
                self.assertTrue(np.isnan(y[1]).all())
                self.assertFalse(np.isnan(y[0]).any())
                np.testing.assert_array_equal(np.isnan(y), np.isnan(want))


class Dropout(unittest.TestCase):
    """p83's dropout: the fraction zeroed is close to p, survivors are exactly v / (1 - p) in
    float32, the mask is a function of the seed, eval mode is the identity."""

    def setUp(self):
        rng = np.random.default_rng(7)
        self.x = rand(rng, (2, 3, 8, 22, 22))
        self.w, self.b = conv_params(rng, 8, 3, 3, 3)
        self.gamma, self.beta = np.ones(8, np.float32), np.zeros(8, np.float32)

    def run_p83(self, p, training, seed, value=0.7):
        # min_value = max_value = value: every element before dropout is exactly `value`.
        return fusedconv.p83(self.x, self.w, self.b, self.gamma, self.beta, 4, 1e-5, value, value,
                             p, training, seed)

    def test_statistics(self):
        for p in (0.2, 0.5, 0.9):
            with self.subTest(p=p):
                y = self.run_p83(p, True, 123)
                n = y.size
                zeroed = int((y == 0).sum())
                sigma = np.sqrt(n * p * (1 - p))
                self.assertLess(abs(zeroed - n * p), 5 * sigma, "%d of %d zeroed at p=%g" % (zeroed, n, p))
                survivor = np.float32(0.7) / (np.float32(1) - np.float32(p))  # float32 division
                np.testing.assert_array_equal(y[y != 0], survivor)

    def test_mask_is_a_function_of_the_seed(self):
        a, b, c = self.run_p83(0.5, True, 1), self.run_p83(0.5, True, 1), self.run_p83(0.5, True, 2)
        np.testing.assert_array_equal(a, b)
        self.assertGreater(int(((a == 0) != (c == 0)).sum()), a.size // 4)
        self.assertEqual(self.run_p83(0.5, True, 2**32 - 1).shape, a.shape)

    def test_eval_mode_and_extreme_p(self):
        np.testing.assert_array_equal(self.run_p83(0.5, False, 3), np.float32(0.7))
        np.testing.assert_array_equal(self.run_p83(0.0, True, 3), np.float32(0.7))
        np.testing.assert_array_equal(self.run_p83(1.0, True, 3), np.float32(0.0))

    def test_survivors_of_groupnorm_values(self):
        want = ref.p83_before_dropout(self.x, self.w, self.b, self.gamma, self.beta, 4, 1e-5, 10.0,
                                      10.0, clamp_min=-10.0)
        y = fusedconv.p83(self.x, self.w, self.b, self.gamma, self.beta, 4, 1e-5, 10.0, 10.0, 0.25,
                          True, 9, clamp_min=-10.0)
        kept = y != 0
        self.assertLess(ref.max_err(y[kept], want[kept] / 0.75), TOL)


class Errors(unittest.TestCase):
    """Every bad argument is a TypeError or ValueError naming it, before any work."""

    @classmethod
    def setUpClass(cls):
        rng = np.random.default_rng(8)
        cls.x2 = rand(rng, (1, 3, 8, 8))
        cls.w2, cls.b2 = conv_params(rng, 4, 3, 3, 2)
        cls.x3 = rand(rng, (1, 3, 5, 6, 6))
        cls.w3, cls.b3 = conv_params(rng, 4, 3, 3, 3)
        cls.g, cls.beta = np.ones(4, np.float32), np.zeros(4, np.float32)

    def expect(self, exc, pattern, fn, *args, **kwargs):
        with self.assertRaisesRegex(exc, pattern):
            fn(*args, **kwargs)

    def test_kind_and_dtype(self):
        self.expect(TypeError, "x must be float32, got NumPy dtype float64",
                    fusedconv.p25, self.x2.astype(np.float64), self.w2, self.b2)
        self.expect(TypeError, "weight must be float32, got NumPy dtype int32",
                    fusedconv.p25, self.x2, self.w2.astype(np.int32), self.b2)
        self.expect(TypeError, "x must be float32, got NumPy dtype >f4",
                    fusedconv.p25, self.x2.astype(">f4"), self.w2, self.b2)
        self.expect(TypeError, "bias must be a NumPy array, torch.Tensor or CuPy array, got builtins.list",
                    fusedconv.p25, self.x2, self.w2, [0.0] * 4)
        self.expect(TypeError, "norm_weight must be a NumPy array.*got builtins.NoneType",
                    fusedconv.p83, self.x3, self.w3, self.b3, None, self.beta, 2)

    def test_layout(self):
        self.expect(ValueError, r"x must be C-contiguous; got shape \(1, 3, 8, 4\) with strides",
                    fusedconv.p25, np.zeros((1, 3, 8, 8), np.float32)[..., ::2], self.w2, self.b2)
        self.expect(ValueError, "weight must be C-contiguous",
                    fusedconv.p24, self.x3, self.w3.transpose(0, 1, 4, 3, 2), self.b3)
        unaligned = np.frombuffer(np.zeros(1 + 4 * 192, np.uint8).data, np.uint8)[1:].view(np.float32)
        self.expect(ValueError, "x is not aligned", fusedconv.p25, unaligned.reshape(1, 3, 8, 8),
                    self.w2, self.b2)

    def test_rank_and_shape(self):
        self.expect(ValueError, r"x must have 4 dimensions \(N, C, H, W\), got shape \(3, 8, 8\)",
                    fusedconv.p25, self.x2[0], self.w2, self.b2)
        self.expect(ValueError, r"x must have 5 dimensions \(N, C, D, H, W\), got shape \(1, 3, 8, 8\)",
                    fusedconv.p24, self.x2, self.w3, self.b3)
        self.expect(ValueError, r"weight must have 4 dimensions",
                    fusedconv.p32, self.x2, self.w3, self.b3, 2.0)
        self.expect(ValueError, r"bias must have shape \(4,\) \(weight's out_channels\), got \(5,\)",
                    fusedconv.p25, self.x2, self.w2, np.zeros(5, np.float32))
        self.expect(ValueError, r"norm_bias must have shape \(4,\)",
                    fusedconv.p83, self.x3, self.w3, self.b3, self.g, np.zeros(3, np.float32), 2)
        # Shape errors the library finds (fc_output_shape) come back as ValueError with its message.
        self.expect(ValueError, "fusedconv.p25: .*3",
                    fusedconv.p25, self.x2, np.zeros((4, 2, 3, 3), np.float32), self.b2)
        self.expect(ValueError, "fusedconv.p25: .*9",
                    fusedconv.p25, self.x2, np.zeros((4, 3, 9, 9), np.float32), self.b2)
        self.expect(ValueError, "fusedconv.p83: .*groups|fusedconv.p83: .*3",
                    fusedconv.p83, self.x3, self.w3, self.b3, self.g, self.beta, 3)
        self.expect(ValueError, "fusedconv.output_shape: ",
                    fusedconv.output_shape, "p32", (1, 3, 8, 8), (4, 2, 3, 3), 0)
        self.expect(ValueError, "unknown model 'p99'", fusedconv.output_shape, "p99", (1,), (1,), 0)

    def test_out(self):
        self.expect(ValueError, r"out must have shape \(1, 1, 6, 6\), got \(1, 1, 6, 5\)",
                    fusedconv.p25, self.x2, self.w2, self.b2, out=np.empty((1, 1, 6, 5), np.float32))
        self.expect(TypeError, "out must be float32, got NumPy dtype float64",
                    fusedconv.p25, self.x2, self.w2, self.b2, out=np.empty((1, 1, 6, 6)))
        ro = np.empty((1, 1, 6, 6), np.float32)
        ro.flags.writeable = False
        self.expect(ValueError, "out is read-only", fusedconv.p25, self.x2, self.w2, self.b2, out=ro)
        self.expect(ValueError, "out must be C-contiguous",
                    fusedconv.p25, self.x2, self.w2, self.b2, out=np.empty((1, 1, 6, 12), np.float32)[..., ::2])
        x = np.zeros((1, 1, 3, 3), np.float32)
        self.expect(ValueError, "out shares memory with x", fusedconv.p25, x,
                    np.zeros((1, 1, 1, 1), np.float32), np.zeros(1, np.float32), out=x[:, :1])
        w = np.zeros((1, 1, 1, 1), np.float32)
        self.expect(ValueError, "out shares memory with weight", fusedconv.p25,
                    np.zeros((1, 1, 1, 1), np.float32), w, np.zeros(1, np.float32), out=w)

    def test_scalars(self):
        self.expect(ValueError, r"dim=3 is not supported \(only dim=2",
                    fusedconv.p24, self.x3, self.w3, self.b3, dim=3)
        self.expect(ValueError, "dim=1 is not supported", fusedconv.p24, self.x3, self.w3, self.b3, 1)
        self.expect(TypeError, "dim must be an integer, got '2'", fusedconv.p24, self.x3, self.w3, self.b3, "2")
        self.expect(TypeError, "dim must be an integer, got 2.0", fusedconv.p24, self.x3, self.w3, self.b3, 2.0)
        self.expect(TypeError, "scale_factor must be a real number, got 'big'",
                    fusedconv.p32, self.x2, self.w2, self.b2, "big")
        p83 = fusedconv.p83
        args = (self.x3, self.w3, self.b3, self.g, self.beta)
        self.expect(ValueError, r"groups=0 is outside \[1, ", p83, *args, 0)
        self.expect(TypeError, "groups must be an integer", p83, *args, 2.5)
        self.expect(ValueError, r"dropout_p=1.5 is outside \[0, 1\]", p83, *args, 2, dropout_p=1.5)
        self.expect(ValueError, r"dropout_p=nan is outside", p83, *args, 2, dropout_p=float("nan"))
        self.expect(ValueError, r"seed=-1 is outside \[0, 4294967295\]", p83, *args, 2, seed=-1)
        self.expect(ValueError, r"seed=4294967296 is outside", p83, *args, 2, seed=2**32)
        self.expect(ValueError, r"eps=-1.0 must be finite and > 0", p83, *args, 2, eps=-1.0)
        self.expect(ValueError, r"eps=0.0 must be finite and > 0", p83, *args, 2, eps=0.0)
        self.expect(TypeError, "training must be a bool", p83, *args, 2, training="yes")


class Loading(unittest.TestCase):
    """FUSEDCONV_LIBRARY: a missing file or a file that is not the library is an ImportError
    saying so (in a child process: the package is already loaded in this one)."""

    def import_with(self, value):
        env = dict(os.environ, FUSEDCONV_LIBRARY=value)
        return subprocess.run([sys.executable, "-c", "import fusedconv"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def test_missing_file(self):
        r = self.import_with("/nonexistent/libfusedconv_c.so")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError: fusedconv: FUSEDCONV_LIBRARY='/nonexistent/libfusedconv_c.so' is not a file",
                      r.stdout)

    def test_not_a_library(self):
        r = self.import_with(os.path.abspath(__file__))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError: fusedconv: cannot load", r.stdout)

    def test_explicit_path_loads(self):
        r = self.import_with(fusedconv.library_path)
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_gpu_queries(self):
        self.assertIsInstance(fusedconv.has_gpu_kernels(), bool)
        count = fusedconv.cuda_device_count()
        self.assertGreaterEqual(count, 0)
        if count == 0:
            self.assertNotEqual(fusedconv.gpu_unavailable_reason(), "")


if __name__ == "__main__":
    unittest.main()
