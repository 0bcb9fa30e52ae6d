#!/usr/bin/env python3
"""torch_scaling.py under torchrun on CPUs: 1 and 2 gloo processes, tiny shapes, an uneven batch.

Usage: test_torch_scaling.py [PYTHONPATH_OF_THE_BUILT_PACKAGE]   (e.g. build/python)
Skipped, with a message, where torch is not installed. Checks that every run exits 0, that the
gathered output of 2 processes equals one forward of the whole batch bit for bit (the script's
own check, recorded as bit_identical_to_1; a mismatch exits 1), and the records and efficiency.
Usage errors exit 2 naming the value.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "torch_scaling.py")
PACKAGE_PATH = None
HAVE_TORCH = importlib.util.find_spec("torch") is not None
TINY = ["-p", "p24,p25,p32,p83", "--shape", "p24=1,3,4,6,7", "--shape", "p25=1,16,9,11",
        "--shape", "p32=1,64,8,10", "--shape", "p83=1,3,4,6,5"]


def torchrun(nproc, *args):
    env = dict(os.environ)
    if PACKAGE_PATH:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PATH, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node=%d" % nproc, SCRIPT, "--backend", "gloo", "--device", "cpu", *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=600, env=env)


@unittest.skipUnless(HAVE_TORCH, "torch is not installed: torch_scaling.py is not exercised here")
class GlooCpu(unittest.TestCase):
    def test_two_processes_match_one_forward(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scaling.json")
            common = [*TINY, "--batch", "7", "-r", "2", "-w", "1", "--commit", "abc1234",
                      "--results", path]
            for nproc in (2, 1):  # the 1-process record arrives last: efficiency is recomputed
                p = torchrun(nproc, *common)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertNotIn("MISMATCH", p.stdout)
            with open(path, encoding="utf-8") as f:
                records = json.load(f)
            by = {(r["problem"], r["devices"]): r for r in records}
            self.assertEqual(sorted(by), [(p, n) for p in ("p24", "p25", "p32", "p83") for n in (1, 2)])
            for (prob, n), r in by.items():
                self.assertEqual(r["system"], "torchrun")
                self.assertEqual(r["batch"], 7)
                self.assertEqual(r["device"], "cpu-processes")
                self.assertTrue(r["bit_identical_to_1"], r)
                self.assertAlmostEqual(
                    r["efficiency"], r["samples_per_s"] / (n * by[(prob, 1)]["samples_per_s"]), places=9)

    def test_fewer_samples_than_processes(self):
        p = torchrun(2, "-p", "p25", "--shape", "p25=1,16,9,11", "--batch", "1", "-r", "1", "-w",
                     "0", "--results", "-")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("bit-identical to one forward", p.stdout)

    def test_usage_errors(self):
        p = torchrun(1, "-p", "p99")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("unknown problem 'p99'", p.stdout + p.stderr)
        p = torchrun(1, "-p", "p24", "--shape", "p24=1,2")
        self.assertIn("needs 5 positive sizes", p.stdout + p.stderr)


class WithoutTorchrun(unittest.TestCase):
    def test_plain_python_says_how_to_launch(self):
        if not HAVE_TORCH:
            p = subprocess.run([sys.executable, SCRIPT], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("needs PyTorch", p.stderr)
            return
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        p = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--backend", "gloo"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("launch with torchrun", p.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        PACKAGE_PATH = os.path.abspath(sys.argv.pop(1))
    if not HAVE_TORCH:
        print("test_torch_scaling.py: torch is not installed; the torchrun cases are skipped")
    unittest.main()
