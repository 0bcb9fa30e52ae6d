#!/usr/bin/env python3
"""scaling_table.py on a synthetic scaling JSON: rows, order, formatting, errors, the CLI."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import results_io  # noqa: E402
import scaling_table  # noqa: E402


def record(problem, system, n, seconds, efficiency, **extra):
    r = {"problem": problem, "system": system, "devices": n, "shape": [64, 3, 4], "batch": 64,
         "median_s": seconds, "samples_per_s": 64 / seconds, "efficiency": efficiency,
         "device": "NVIDIA H200", "gpu_count": 8, "date": "2026-12-01", "commit": "abc1234"}
    r.update(extra)
    return r


RECORDS = [
    record("p25", "torchrun", 2, 0.010, 0.8),
    record("p32", "torchrun", 4, 0.010, None),
    record("p24", "halide-sharded", 2, 0.004, 0.75),
    record("p24", "halide-sharded", 1, 0.006, 1.0),
    record("p24", "torchrun", 1, 0.0002, 1.0),
    record("p83", "halide-sharded", 8, 0.5, 0.5, note="p83 in eval mode", bit_identical_to_1=False),
]


class Render(unittest.TestCase):
    def test_rows_sorted_and_formatted(self):
        text = scaling_table.render(RECORDS)
        rows = [l for l in text.splitlines() if l.startswith("| p")]
        self.assertEqual(rows, [
            "| p24 | halide-sharded | 1 | 64 | 6.000 | 10,667 | 1.00 |",
            "| p24 | halide-sharded | 2 | 64 | 4.000 | 16,000 | 0.75 |",
            "| p24 | torchrun | 1 | 64 | 0.200 | 320,000 | 1.00 |",
            "| p25 | torchrun | 2 | 64 | 10.000 | 6,400 | 0.80 |",
            "| p32 | torchrun | 4 | 64 | 10.000 | 6,400 | n/a |",
            "| p83 | halide-sharded | 8 | 64 | 500.000 | 128.0 | 0.50 (output differs from 1 GPU!) |",
        ])
        self.assertIn("# Data-parallel scaling: NVIDIA H200", text)
        self.assertIn("commit abc1234", text)
        self.assertIn("- `torchrun`: one process per GPU", text)
        self.assertIn("- p83: p83 in eval mode", text)

    def test_missing_key_and_empty_list_are_errors(self):
        bad = dict(RECORDS[0])
        del bad["efficiency"]
        with self.assertRaisesRegex(ValueError, "lacks efficiency"):
            scaling_table.render([bad])
        with self.assertRaisesRegex(ValueError, "no scaling records"):
            scaling_table.render([])

    def test_merge_keeps_one_record_per_device_count(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scaling-x.json")
            results_io.merge_into(path, RECORDS, required=results_io.SCALING_KEYS)
            again = record("p24", "halide-sharded", 2, 0.003, 1.0)
            merged = results_io.merge_into(path, [again], required=results_io.SCALING_KEYS)
            self.assertEqual(len(merged), len(RECORDS))
            self.assertEqual([r["devices"] for r in merged if r["problem"] == "p24"], [1, 2, 1])
            self.assertIn(again, merged)


class Cli(unittest.TestCase):
    def test_writes_markdown_next_to_the_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scaling-nvidia-h200.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(RECORDS, f)
            p = subprocess.run([sys.executable, os.path.join(HERE, "scaling_table.py"), path],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(d, "scaling-nvidia-h200.md"), encoding="utf-8") as f:
                self.assertEqual(f.read(), scaling_table.render(RECORDS))

    def test_missing_file_is_an_error_naming_it(self):
        p = subprocess.run([sys.executable, os.path.join(HERE, "scaling_table.py"), "/nonexistent/s.json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/nonexistent/s.json", p.stderr)


if __name__ == "__main__":
    unittest.main()
