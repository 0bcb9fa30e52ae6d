#!/usr/bin/env python3
"""Tests of bench/winograd_error_model.py: each form's transforms compute the exact
convolution in float64, the float32 direct form stays within its worst-case bound (as
tests/test_winograd_accuracy.cpp pins for the built forms), the modelled F(4x4, 3x3)
errors stay within the selection rule at the C++ test's shapes, and the command line
rejects bad arguments. Exits 77 (skipped, with a message) without NumPy."""

import io
import os
import sys
import unittest
from contextlib import redirect_stderr, redirect_stdout

try:
    import numpy as np
except ImportError:
    print("SKIPPED: NumPy is not installed for %s (Debian: apt-get install python3-numpy)"
          % sys.executable)
    sys.exit(77)  # ctest's SKIP_RETURN_CODE for this test

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import winograd_error_model as model  # noqa: E402


class Transforms(unittest.TestCase):
    def test_each_form_is_the_convolution_in_float64(self):
        rng = np.random.default_rng(7)
        # Sizes not multiples of either tile, 2 samples, 3 input channels.
        x = rng.uniform(-1, 1, (2, 3, 13, 11))
        w = rng.uniform(-1, 1, (4, 3, 3, 3))
        b = rng.uniform(-1, 1, 4)
        want = model.direct(x, w, b, np.float64)
        self.assertEqual(want.shape, (2, 4, 11, 9))
        for form in model.FORMS:
            got = model.compute(form, x, w, b, np.float64)
            self.assertEqual(got.shape, want.shape, form)
            self.assertLess(np.max(np.abs(got - want)), 1e-12, form)

    def test_direct_form_reference_values(self):
        # One channel, a 3x3 input: the single output is the dot product plus the bias.
        x = np.arange(9, dtype=float).reshape(1, 1, 3, 3)
        w = np.ones((1, 1, 3, 3))
        got = model.direct(x, w, np.array([0.5]), np.float64)
        self.assertEqual(got.shape, (1, 1, 1, 1))
        self.assertEqual(got[0, 0, 0, 0], 36.5)


class Errors(unittest.TestCase):
    def test_direct_form_within_its_bound(self):
        for (shape, (lo, hi)) in model.SHAPES[:5]:
            err = model.error_in_bounds(shape, lo, hi, 1, ["direct"])["direct"]
            self.assertLessEqual(err, 1.0, shape)

    def test_f4x4_within_the_selection_rule_at_the_cpp_tests_shapes(self):
        for (shape, (lo, hi)) in model.SHAPES[:5]:
            for seed in (1, 2):
                e = model.error_in_bounds(shape, lo, hi, seed, ["direct", "F4x4", "F6x6"])
                self.assertLessEqual(e["F4x4"], 32.0, shape)
                self.assertLessEqual(e["F4x4"], 32.0 * e["direct"], shape)
                # The larger tile amplifies more (more and larger transform coefficients).
                self.assertGreater(e["F6x6"], e["direct"], shape)


class CommandLine(unittest.TestCase):
    def run_main(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = model.main(argv)
            except SystemExit as e:
                rc = e.code
        return rc, out.getvalue(), err.getvalue()

    def test_table(self):
        rc, out, _ = self.run_main(["--seeds", "1", "--forms", "F4x4"])
        self.assertEqual(rc, 0)
        lines = [l for l in out.splitlines() if l.startswith("| (")]
        self.assertEqual(len(lines), len(model.SHAPES))
        self.assertIn("| direct | F4x4 |", out)  # the direct form is always the baseline

    def test_usage_errors_name_the_value(self):
        rc, _, err = self.run_main(["--forms", "F5x5"])
        self.assertEqual(rc, 2)
        self.assertIn("F5x5", err)
        rc, _, err = self.run_main(["--seeds", "0"])
        self.assertEqual(rc, 2)
        self.assertIn("not 0", err)


if __name__ == "__main__":
    unittest.main()
