#!/usr/bin/env python3
"""GPU-free tests of bench/report.py on small hand-written results files.

Run: python3 bench/test_report.py   (ctest runs it as report_py)
"""

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


def record(system, median, err=1e-7):
    return {"problem": "p25", "system": system, "shape": [128, 16, 256, 256],
            "device": "NVIDIA Test GPU", "date": "2026-11-22", "commit": "abc1234",
            "median_ms": median, "min_ms": median, "max_abs_err_vs_fp64": err}


class Report(unittest.TestCase):
    def run_report(self, records, stale_png=None):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        if stale_png is not None:
            with open(os.path.join(d, "nvidia-test-gpu.png"), "wb") as f:
                f.write(stale_png)
        path = os.path.join(d, "nvidia-test-gpu.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(records, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            report.report(path)
        with open(os.path.join(d, "nvidia-test-gpu.md"), encoding="utf-8") as f:
            return f.read(), out.getvalue(), d

    def test_without_matplotlib_the_table_is_still_written(self):
        # None in sys.modules makes `import matplotlib` raise ImportError.
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            md, printed, d = self.run_report(
                [record("halide", 3.0), record("torch-compile", 2.0), record("torch-eager", 6.0)])
        self.assertIn("(no chart: matplotlib is not installed", printed)
        self.assertFalse(os.path.exists(os.path.join(d, "nvidia-test-gpu.png")))
        self.assertNotIn("![", md)
        # The ratio is Halide's median over the fastest torch-* median: 3.0 / 2.0.
        row = next(line for line in md.splitlines() if line.startswith("| p25 |"))
        self.assertIn("1.50 (halide vs torch-compile)", row)

    def test_without_matplotlib_an_earlier_chart_is_kept_and_named_stale(self):
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            md, printed, d = self.run_report([record("halide", 3.0), record("torch-compile", 2.0)],
                                             stale_png=b"earlier chart")
        png = os.path.join(d, "nvidia-test-gpu.png")
        self.assertIn("%s is from an earlier run and does not show these timings" % png, printed)
        with open(png, "rb") as f:
            self.assertEqual(f.read(), b"earlier chart")
        self.assertNotIn("![", md)

    @unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed")
    def test_chart_written_and_linked(self):
        md, printed, d = self.run_report([record("halide", 3.0), record("torch-compile", 2.0)])
        self.assertTrue(os.path.getsize(os.path.join(d, "nvidia-test-gpu.png")) > 0)
        self.assertIn("](nvidia-test-gpu.png)", md)
        self.assertIn("nvidia-test-gpu.png", printed)

    @unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed")
    def test_no_timings_no_chart(self):
        md, printed, d = self.run_report([record("halide-cli-roundtrip", None)])
        self.assertIn("(no chart: no timings)", printed)
        self.assertFalse(os.path.exists(os.path.join(d, "nvidia-test-gpu.png")))
        self.assertNotIn("![", md)

    def test_default_leaves_the_scaling_files_to_their_renderer(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        for name in ("nvidia-test-gpu.json", "scaling-nvidia-test-gpu.json", "notes.txt"):
            open(os.path.join(d, name), "w").close()
        self.assertEqual(report.default_paths(d), [os.path.join(d, "nvidia-test-gpu.json")])


if __name__ == "__main__":
    unittest.main()
