#!/usr/bin/env python3
"""fusedconv_scaling end to end on simulated devices (--cpu-replicas), and its usage errors.

Usage: test_scaling_cli.py PATH_TO_fusedconv_scaling
Tiny shapes, 1/2/3 replicas on the CPU and an uneven batch (7 over 2 and 3): the tool must pass
its bit-identity check, print its table, and write records that bench/scaling_table.py reads;
bad --devices values and GPU counts on a machine without a GPU must fail with exit 2 and a
message naming the value.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_table  # noqa: E402

TOOL = None
TINY = ["--shape", "p24=1,3,4,6,7", "--shape", "p25=1,16,9,11", "--shape", "p32=1,64,8,10",
        "--shape", "p83=1,3,4,6,5"]


def run(*args):
    return subprocess.run([TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300)


class CpuReplicas(unittest.TestCase):
    def test_uneven_batch_over_two_and_three_replicas(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scaling.json")
            p = run("--cpu-replicas", "--devices", "2,3", "--batch", "7", *TINY, "-r", "2",
                    "-w", "1", "--commit", "abc1234", "--results", path)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("bit-identical to x1", p.stdout)
            self.assertNotIn("MISMATCH", p.stdout)
            with open(path, encoding="utf-8") as f:
                records = json.load(f)
            self.assertEqual(len(records), 12)  # 4 models x 3 counts
            for r in records:
                self.assertEqual(r["system"], "halide-sharded")
                self.assertEqual(r["batch"], 7)
                self.assertEqual(r["shape"][0], 7)
                self.assertTrue(r["bit_identical_to_1"])
                self.assertEqual(r["commit"], "abc1234")
                self.assertEqual(r["device"], "cpu-replicas")
                self.assertEqual(r["gpu_count"], 0)
                self.assertGreater(r["samples_per_s"], 0)
                self.assertAlmostEqual(r["samples_per_s"], 7 / r["median_s"], delta=1e-6 * r["samples_per_s"])
                for key in ("date", "data", "median_ms", "efficiency", "devices"):
                    self.assertIn(key, r)
            by = {(r["problem"], r["devices"]): r for r in records}
            self.assertEqual(sorted({n for _, n in by}), [1, 2, 3])
            for (prob, n), r in by.items():
                one = by[(prob, 1)]["samples_per_s"]
                self.assertAlmostEqual(r["efficiency"], r["samples_per_s"] / (n * one), places=9)
            # The table renders from the tool's own file.
            text = scaling_table.render(records)
            self.assertIn("| p83 | halide-sharded | 3 |", text)

            # A rerun of one count replaces its records only.
            p = run("--cpu-replicas", "--devices", "2", "-p", "p24", "--shape", "p24=1,3,4,6,7",
                    "--batch", "7", "-r", "1", "-w", "0", "--results", path)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(path, encoding="utf-8") as f:
                self.assertEqual(len(json.load(f)), 12)

    def test_batch_multiplier_scales_the_shape_batch(self):
        p = run("--cpu-replicas", "-p", "p25", "--shape", "p25=1,16,9,11", "--batch-multiplier",
                "3", "-r", "1", "-w", "0", "--results", "-")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("input (3, 16, 9, 11)", p.stdout)
        self.assertIn("p25 x2:", p.stdout)  # default counts on the CPU: 1, 2


class UsageErrors(unittest.TestCase):
    def check(self, args, *parts):
        p = run(*args)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for part in parts:
            self.assertIn(part, p.stderr)

    def test_bad_device_counts(self):
        self.check(["--cpu-replicas", "--devices", "0"], "--devices", ">= 1, got 0")
        self.check(["--cpu-replicas", "--devices", "2,two"], "'two'", "not a device count")
        self.check(["--cpu-replicas", "--devices", ""], "names no device count")

    def test_gpu_counts_without_a_gpu(self):
        gpu = run("--devices", "1", "-p", "p24", "--results", "-", "-r", "1")
        if gpu.returncode != 2 or "none is usable" not in gpu.stderr:
            self.skipTest("a CUDA device is usable here: the no-GPU errors are not reachable")
        self.check(["--devices", "4"], "--devices 4 asks for 4 GPUs", "none is usable",
                   "--cpu-replicas")
        self.check([], "needs CUDA GPUs", "none is usable")

    def test_other_arguments(self):
        self.check(["--cpu-replicas", "-p", "p99"], "unknown problem 'p99'")
        self.check(["--cpu-replicas", "-p", "p24", "--shape", "p25=1,16,9,11"], "p25 is not in -p")
        self.check(["--cpu-replicas", "--batch", "x"], "--batch", "'x'")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_scaling_cli.py PATH_TO_fusedconv_scaling")
    TOOL = sys.argv.pop(1)
    unittest.main()
