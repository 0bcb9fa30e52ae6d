"""fusedconv.torch (custom ops and drop-in modules) against KernelBench's reference modules
(bench/torch_baseline.py) computed in float64; torch.compile(fullgraph=True) with no graph
break; streams and threads; parameters and state_dicts; error paths; CuPy arrays.

Needs PyTorch >= 2.4 (the CPU cases) and a CUDA device (the rest); skipped, with a message,
without them. ctest runs it as `python_torch_gpu`. On the GPU machine:
    PYTHONPATH=build/python python3 -m pytest -v python/tests/test_torch_gpu.py
"""

import os
import sys
import threading
import unittest

SKIP_EXIT = 77  # ctest's SKIP_RETURN_CODE for this test


def _skip(reason):
    if __name__ == "__main__":
        print("SKIPPED: " + reason)
        sys.exit(SKIP_EXIT)
    raise unittest.SkipTest(reason)


try:
    import torch
except ImportError:
    _skip("PyTorch is not installed for %s" % sys.executable)
if not hasattr(torch.library, "custom_op"):
    _skip("fusedconv.torch needs torch.library.custom_op (PyTorch >= 2.4); this is %s"
          % torch.__version__)

import fusedconv  # noqa: E402
import fusedconv.torch as fct  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch_baseline as kb  # noqa: E402  (the reference modules, as KernelBench writes them)

try:
    import cupy
except ImportError:
    cupy = None

HAS_CUDA = torch.cuda.is_available()
CUDA_REASON = "no CUDA device visible to torch %s" % torch.__version__
TOL = 1e-4  # the project's bar: |got - float64| / max(1, |float64|)

# (reference class, fusedconv class, init arguments, input shapes): small odd shapes, batch 1,
# kernels 1, 3, 5, and each problem's default channels at a small batch and size.
CASES = {
    "p24": (kb.Conv3dMinSoftmax, fct.Conv3dMinSoftmax, [
        (dict(in_channels=3, out_channels=5, kernel_size=3, dim=2), (1, 3, 5, 7, 9)),
        (dict(in_channels=2, out_channels=7, kernel_size=1, dim=2), (2, 2, 3, 4, 5)),
        (dict(in_channels=1, out_channels=4, kernel_size=5, dim=2), (1, 1, 6, 9, 8)),
        (dict(in_channels=3, out_channels=24, kernel_size=3, dim=2), (2, 3, 24, 32, 32)),
    ]),
    "p25": (kb.Conv2dMinTanhTanh, fct.Conv2dMinTanhTanh, [
        (dict(in_channels=3, out_channels=5, kernel_size=3), (1, 3, 7, 9)),
        (dict(in_channels=2, out_channels=4, kernel_size=1), (2, 2, 5, 6)),
        (dict(in_channels=5, out_channels=3, kernel_size=5), (1, 5, 9, 11)),
        (dict(in_channels=16, out_channels=64, kernel_size=3), (2, 16, 64, 64)),
    ]),
    "p32": (kb.Conv2dScaleMin, fct.Conv2dScaleMin, [
        (dict(in_channels=3, out_channels=5, kernel_size=3, scale_factor=2.0), (1, 3, 7, 9)),
        (dict(in_channels=2, out_channels=4, kernel_size=1, scale_factor=-1.5), (2, 2, 5, 6)),
        (dict(in_channels=4, out_channels=3, kernel_size=5, scale_factor=0.37), (1, 4, 9, 10)),
        (dict(in_channels=64, out_channels=128, kernel_size=3, scale_factor=2.0), (2, 64, 64, 64)),
    ]),
    "p83": (kb.Conv3dGroupNormMinClampDropout, fct.Conv3dGroupNormMinClampDropout, [
        (dict(in_channels=3, out_channels=4, kernel_size=3, groups=2, min_value=0.0, max_value=1.0,
              dropout_p=0.2), (1, 3, 4, 6, 7)),
        (dict(in_channels=2, out_channels=6, kernel_size=1, groups=3, min_value=0.5, max_value=0.25,
              dropout_p=0.5), (2, 2, 3, 4, 5)),
        (dict(in_channels=1, out_channels=8, kernel_size=5, groups=8, min_value=10.0, max_value=-10.0,
              dropout_p=0.0), (1, 1, 5, 7, 6)),
        (dict(in_channels=3, out_channels=16, kernel_size=3, groups=8, min_value=0.0, max_value=1.0,
              dropout_p=0.2), (2, 3, 16, 32, 32)),
    ]),
}


def max_err(got, ref):
    """max |got - ref| / max(1, |ref|); a NaN where the reference has none is infinite."""
    got = got.detach().to("cpu", torch.float64)
    ref = ref.detach().to("cpu", torch.float64)
    if got.shape != ref.shape:
        raise AssertionError("shape %s differs from the reference's %s" % (tuple(got.shape), tuple(ref.shape)))
    if not torch.equal(torch.isnan(got), torch.isnan(ref)):
        return float("inf")
    ok = ~torch.isnan(ref)
    if not ok.any():
        return 0.0
    return float(((got[ok] - ref[ok]).abs() / ref[ok].abs().clamp(min=1.0)).max())


def make_pair(name, init, device, seed=0):
    """The reference module and fusedconv's, both from torch.manual_seed(seed), eval mode
    (dropout off) so they compute the same function."""
    ref_cls, our_cls, _ = CASES[name]
    torch.manual_seed(seed)
    ref = ref_cls(**init)
    torch.manual_seed(seed)
    ours = our_cls(**init)
    return ref.to(device).eval(), ours.to(device).eval()


def reference64(ref, x):
    with torch.no_grad():
        r = ref.to(torch.float64)
        y = r(x.to(torch.float64))
        ref.to(torch.float32)
        return y


class _Checks(unittest.TestCase):
    device = "cpu"

    def assertClose(self, got, want, what=""):
        err = max_err(got, want)
        self.assertLess(err, TOL, "%s max error %g" % (what, err))

    def input(self, shape, seed=1):
        g = torch.Generator().manual_seed(seed)
        return torch.rand(shape, generator=g).to(self.device)

    def each_case(self):
        for name, (_, _, cases) in CASES.items():
            for init, shape in cases:
                if self.device == "cpu" and shape[0] > 1 and max(shape[2:]) >= 32:
                    continue  # the default channel counts only on the GPU (time)
                yield name, init, shape


class TorchCPU(_Checks):
    """The ops and modules on CPU tensors (no GPU needed)."""

    device = "cpu"

    def test_modules_match_reference_in_float64(self):
        for name, init, shape in self.each_case():
            with self.subTest(problem=name, init=init, shape=shape):
                ref, ours = make_pair(name, init, self.device)
                x = self.input(shape)
                with torch.no_grad():
                    y = ours(x)
                self.assertEqual(y.device, x.device)
                self.assertEqual(y.dtype, torch.float32)
                self.assertClose(y, reference64(ref, x), name)

    def test_same_seed_same_parameters_and_state_dict_interchange(self):
        for name, (ref_cls, our_cls, cases) in CASES.items():
            init = cases[0][0]
            with self.subTest(problem=name):
                ref, ours = make_pair(name, init, "cpu", seed=123)
                rs, os_ = ref.state_dict(), ours.state_dict()
                self.assertEqual(list(rs), list(os_))
                for k in rs:
                    self.assertTrue(torch.equal(rs[k], os_[k]), k)
                torch.manual_seed(7)
                other = our_cls(**init)
                other.load_state_dict(ref.state_dict())  # strict
                for k, v in other.state_dict().items():
                    self.assertTrue(torch.equal(v, rs[k]), k)
                ref.load_state_dict(other.state_dict())  # and back

    def test_errors_name_the_argument(self):
        x = self.input((1, 3, 7, 9))
        w = torch.rand(5, 3, 3, 3, device=self.device)
        b = torch.rand(5, device=self.device)
        cases = [
            (TypeError, "x must be torch.float32, got torch.float64", (x.double(), w, b)),
            (ValueError, "x must be C-contiguous", (x.transpose(2, 3), w.transpose(2, 3), b)),
            (ValueError, "x must have 4 dimensions", (x[0], w, b)),
            (ValueError, r"bias must have shape \(5,\)", (x, w, b[:4])),
            (TypeError, "weight must be torch.float32, got torch.float16", (x, w.half(), b)),
        ]
        for exc, pattern, args in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(exc, pattern):
                    fct.p25(*args)
        with self.assertRaisesRegex(ValueError, "dim=1 is not supported"):
            fct.Conv3dMinSoftmax(3, 4, 3, dim=1)
        x5 = self.input((1, 3, 4, 5, 6))
        w5 = torch.rand(4, 3, 3, 3, 3, device=self.device)
        b4 = torch.rand(4, device=self.device)
        with self.assertRaisesRegex(ValueError, "training=True needs a seed"):
            torch.ops.fusedconv.p83(x5, w5, b4, b4, b4, 2, 1e-5, 0.0, 0.0, 1.0, 0.5, True, None)
        with self.assertRaisesRegex(ValueError, r"seed=4294967296 is outside"):
            fct.p83(x5, w5, b4, b4, b4, 2, seed=2**32)

    def test_p83_dropout_draws_from_torch_rng(self):
        _, ours = make_pair("p83", dict(in_channels=2, out_channels=4, kernel_size=3, groups=2,
                                        min_value=0.5, max_value=0.5, dropout_p=0.3), self.device)
        x = self.input((2, 2, 6, 10, 12))
        ours.train()
        with torch.no_grad():
            torch.manual_seed(5)
            a, b = ours(x), ours(x)
            torch.manual_seed(5)
            a2 = ours(x)
            ours.eval()
            e = ours(x)
        self.assertTrue(torch.equal(a, a2), "torch.manual_seed reproduces the mask")
        self.assertFalse(torch.equal(a, b), "successive calls draw different masks")
        self.assertTrue(torch.equal(e, torch.full_like(e, 0.5)), "eval mode is the identity")
        n = a.numel()
        zeroed = int((a == 0).sum())
        self.assertLess(abs(zeroed - 0.3 * n), 5 * (n * 0.3 * 0.7) ** 0.5)
        survivor = torch.tensor(0.5, dtype=torch.float32) / (1 - torch.tensor(0.3, dtype=torch.float32))
        self.assertTrue(torch.equal(a[a != 0], survivor.expand(n - zeroed).to(a.device)))

    def test_p83_op_groupnorm_reaches_output(self):
        # min_value above every value, clamp_min below: the output is GroupNorm's (float64 check).
        g = torch.Generator().manual_seed(3)
        x = torch.rand(2, 3, 5, 6, 7, generator=g).to(self.device)
        w = (torch.rand(6, 3, 3, 3, 3, generator=g) - 0.5).to(self.device)
        b, gamma, beta = [torch.rand(6, generator=g).to(self.device) for _ in range(3)]
        y = fct.p83(x, w, b, gamma, beta, 3, eps=1e-5, min_value=10.0, max_value=10.0,
                    clamp_min=-10.0, training=False)
        c = torch.nn.functional.conv3d(x.double(), w.double(), b.double())
        want = torch.nn.functional.group_norm(c, 3, gamma.double(), beta.double(), 1e-5).clamp(-10, 10)
        self.assertClose(y, want, "p83 GroupNorm")
        kept = fct.p83(x, w, b, gamma, beta, 3, min_value=10.0, max_value=10.0, clamp_min=-10.0,
                       dropout_p=0.25, training=True, seed=4)
        mask = kept != 0
        self.assertClose(kept[mask], want[mask] / 0.75, "p83 dropout survivors")

    def test_opcheck(self):
        if not hasattr(torch.library, "opcheck"):
            self.skipTest("torch.library.opcheck is missing in torch %s" % torch.__version__)
        x4, x5 = self.input((2, 3, 7, 9)), self.input((1, 3, 4, 6, 7))
        w4, w5 = torch.rand(5, 3, 3, 3, device=self.device), torch.rand(4, 3, 3, 3, 3, device=self.device)
        b5, b4 = torch.rand(5, device=self.device), torch.rand(4, device=self.device)
        seed = torch.tensor(11, dtype=torch.int64)
        calls = [
            (torch.ops.fusedconv.p24.default, (x5, w5, b4, 2)),
            (torch.ops.fusedconv.p25.default, (x4, w4, b5)),
            (torch.ops.fusedconv.p32.default, (x4, w4, b5, -2.0)),
            (torch.ops.fusedconv.p83.default, (x5, w5, b4, b4, b4, 2, 1e-5, 0.0, -1.0, 1.0, 0.25, True, seed)),
        ]
        for op, args in calls:
            with self.subTest(op=str(op)):
                torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor",
                                                             "test_aot_dispatch_dynamic"))


@unittest.skipUnless(HAS_CUDA, CUDA_REASON)
class TorchCUDA(TorchCPU):
    """The same on cuda:0, then what only a GPU has: compile, streams, threads, devices."""

    device = "cuda:0"

    @classmethod
    def setUpClass(cls):
        if not fusedconv.has_gpu_kernels():
            raise unittest.SkipTest("%s was built without GPU kernels" % fusedconv.library_path)

    def test_compile_fullgraph_without_graph_breaks(self):
        for name, init, shape in self.each_case():
            with self.subTest(problem=name, init=init, shape=shape):
                ref, ours = make_pair(name, init, self.device)
                x = self.input(shape)
                torch._dynamo.reset()
                with torch.no_grad():
                    explained = torch._dynamo.explain(ours)(x)
                self.assertEqual(explained.graph_break_count, 0, str(explained.break_reasons))
                self.assertEqual(explained.graph_count, 1)
                compiled = torch.compile(ours, fullgraph=True)
                with torch.no_grad():
                    y = compiled(x)
                    y_eager = ours(x)
                self.assertTrue(torch.equal(y, y_eager), "compiled and eager differ")
                self.assertClose(y, reference64(ref, x), name)
        torch._dynamo.reset()

    def test_compile_p83_training_draws_a_seed_per_call(self):
        _, ours = make_pair("p83", dict(in_channels=2, out_channels=4, kernel_size=3, groups=2,
                                        min_value=0.5, max_value=0.5, dropout_p=0.3), self.device)
        ours.train()
        x = self.input((2, 2, 6, 10, 12))
        torch._dynamo.reset()
        compiled = torch.compile(ours, fullgraph=True)
        with torch.no_grad():
            torch.manual_seed(9)
            a, b = compiled(x), compiled(x)
            torch.manual_seed(9)
            a2 = compiled(x)
        torch._dynamo.reset()
        self.assertFalse(torch.equal(a, b))
        self.assertTrue(torch.equal(a, a2))

    def test_non_default_stream_without_device_sync(self):
        for name, init, shape in self.each_case():
            with self.subTest(problem=name, shape=shape):
                ref, ours = make_pair(name, init, self.device)
                host = self.input(shape).cpu().pin_memory()
                s = torch.cuda.Stream(self.device)
                s.wait_stream(torch.cuda.current_stream(self.device))  # the parameters' upload
                with torch.cuda.stream(s), torch.no_grad():
                    x = host.to(self.device, non_blocking=True) * 1.0  # produced on s
                    y = ours(x)
                    got = y.to("cpu", non_blocking=True)
                s.synchronize()  # that stream only
                self.assertClose(got, reference64(ref, host.to(self.device)), name)

    def test_input_produced_on_another_stream(self):
        for name, init, shape in self.each_case():
            with self.subTest(problem=name, shape=shape):
                ref, ours = make_pair(name, init, self.device)
                base = self.input(shape)
                producer = torch.cuda.Stream(self.device)
                producer.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(producer):
                    x = base
                    for _ in range(20):  # queue some work so a missing wait would show
                        x = x * 1.0
                torch.cuda.current_stream(self.device).wait_stream(producer)
                x.record_stream(torch.cuda.current_stream(self.device))
                with torch.no_grad():
                    y = ours(x)
                self.assertClose(y, reference64(ref, base), name)

    def test_two_threads_at_once(self):
        # Modules and inputs are made first: torch.manual_seed is global to the process.
        work, errors = [], []
        for name, init, shape in self.each_case():
            if shape[0] == 1:
                ref, ours = make_pair(name, init, self.device)
                x = self.input(shape)
                work.append((name, shape, ours, x, reference64(ref, x).cpu()))
        torch.cuda.synchronize()

        def run(thread):
            try:
                s = torch.cuda.Stream(self.device)
                with torch.cuda.stream(s), torch.no_grad():
                    for _ in range(10):
                        for name, shape, ours, x, want in work:
                            err = max_err(ours(x).cpu(), want)
                            if not err < TOL:
                                errors.append("thread %d %s %s: max error %g" % (thread, name, shape, err))
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append("thread %d: %r" % (thread, e))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_other_device(self):
        if torch.cuda.device_count() < 2:
            self.skipTest("one CUDA device")
        name, (_, _, cases) = "p25", CASES["p25"]
        init, shape = cases[0]
        ref, ours = make_pair(name, init, "cuda:1")
        x = self.input(shape).to("cuda:1")
        with torch.no_grad():
            y = ours(x)
        self.assertEqual(y.device, torch.device("cuda:1"))
        self.assertClose(y, reference64(ref, x))
        with self.assertRaisesRegex(ValueError, "weight is on cuda:0 but x is on cuda:1"):
            fct.p25(x, ours.conv.weight.to("cuda:0"), ours.conv.bias.to("cuda:1"))

    def test_mixed_devices(self):
        x = self.input((1, 3, 7, 9))
        with self.assertRaisesRegex(ValueError, "weight is on cpu but x is on cuda:0"):
            fct.p25(x, torch.rand(5, 3, 3, 3), torch.rand(5, device=self.device))

    def test_base_functions_on_torch_tensors_and_out(self):
        ref, ours = make_pair("p32", CASES["p32"][2][0][0], self.device)
        x = self.input(CASES["p32"][2][0][1])
        w, b = ours.conv.weight.detach(), ours.conv.bias.detach()
        y = fusedconv.p32(x, w, b, ours.scale_factor)
        out = torch.full_like(y, float("nan"))
        self.assertIs(fusedconv.p32(x, w, b, ours.scale_factor, out=out), out)
        torch.cuda.current_stream().synchronize()
        self.assertTrue(torch.equal(y, out))
        self.assertClose(y, reference64(ref, x))

    @unittest.skipUnless(cupy is not None, "CuPy is not installed")
    def test_cupy_arrays(self):
        for name, init, shape in self.each_case():
            with self.subTest(problem=name, shape=shape):
                ref, ours = make_pair(name, init, self.device)
                x = self.input(shape)
                want = reference64(ref, x)
                torch.cuda.synchronize()
                cx = cupy.asarray(x)
                params = [cupy.asarray(p.detach()) for p in ours.parameters()]
                if name == "p24":
                    y = fusedconv.p24(cx, *params, dim=2)
                elif name == "p25":
                    y = fusedconv.p25(cx, *params)
                elif name == "p32":
                    y = fusedconv.p32(cx, *params, ours.scale_factor)
                else:
                    y = fusedconv.p83(cx, *params, ours.norm.num_groups, ours.norm.eps, ours.min_value,
                                      ours.max_value, ours.dropout.p, training=False)
                self.assertIsInstance(y, cupy.ndarray)
                cupy.cuda.get_current_stream().synchronize()
                self.assertClose(torch.as_tensor(y, device=self.device), want, name)
        with self.assertRaisesRegex(TypeError, "x must be float32, got CuPy dtype float64"):
            fusedconv.p25(cupy.zeros((1, 1, 3, 3)), cupy.zeros((1, 1, 1, 1), cupy.float32),
                          cupy.zeros(1, cupy.float32))


@unittest.skipUnless(HAS_CUDA, CUDA_REASON)
class CUDAWithoutGPUKernels(unittest.TestCase):
    def test_clear_error(self):
        if fusedconv.has_gpu_kernels():
            self.skipTest("this build has the GPU kernels")
        x = torch.rand(1, 3, 7, 9, device="cuda")
        with self.assertRaisesRegex(RuntimeError, "built without GPU kernels"):
            fct.p25(x, torch.rand(5, 3, 3, 3, device="cuda"), torch.rand(5, device="cuda"))


if __name__ == "__main__":
    unittest.main()
