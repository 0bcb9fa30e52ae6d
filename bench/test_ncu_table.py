#!/usr/bin/env python3
"""GPU-free tests of bench/ncu_table.py on hand-written profiles in ncu's CSV form.

Run: python3 bench/test_ncu_table.py   (ctest runs it as ncu_table_py)
"""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_table  # noqa: E402

METRICS = ncu_table.REQUIRED
HEADER = ",".join(f'"{c}"' for c in ["ID", "Process ID", "Process Name", "Kernel Name",
                                      "Block Size", "Grid Size"] + METRICS)


def row(fields):
    return ",".join(f'"{f}"' for f in fields)


def launch(i, name, time, dram, regs=32, ffma=0, fadd=0, fmul=0, pipe=1.0, issue=2.0, warps=3.0):
    return row([i, "77", "fusedconv_bench", name, "(32, 8, 1)", "(2, 1, 128)",
                time, dram, regs, ffma, fadd, fmul, pipe, issue, warps])


UNITS = row(["", "", "", "", "", "", "nsecond", "byte", "register/thread", "inst", "inst",
             "inst", "%", "%", "%"])


class Parse(unittest.TestCase):
    def test_flops_bandwidth_and_units(self):
        text = "\n".join([
            "device NVIDIA H200: 132 SMs",  # the program's own output is skipped
            "# problem: p83",
            "==PROF== Connected to process 77",
            HEADER, UNITS,
            launch(0, "_kernel_conv_global_wrapper__0_s0_n___block_id_z", "1,000,000",
                   "441,000,000", regs=251, ffma="9,000,000,000", fadd=10, fmul=20),
            launch(1, "_kernel_output_s0_c_cn___block_id_z__1", "250000", "864000000"),
            "-- p83 done",
            "# problem: p24",
            HEADER, UNITS,
            launch(0, "_kernel_output_s0_n___block_id_z", "400000", "40000000", ffma=100),
        ])
        ks = ncu_table.parse(text)
        self.assertEqual([k["problem"] for k in ks], ["p83", "p83", "p24"])
        conv = ks[0]
        self.assertAlmostEqual(conv["seconds"], 1e-3)
        self.assertEqual(conv["flop"], 2 * 9e9 + 30)
        self.assertEqual(conv["registers"], 251)
        self.assertEqual(conv["dram_bytes"], 441e6)
        md = ncu_table.table(ks, peak_tflops=36.0, peak_gbps=4410.0)
        lines = md.splitlines()
        self.assertEqual(len(lines), 2 + 3)
        # 18 TFLOP/s in 1 ms: 18000 GFLOP/s, 50% of 36; 441 MB in 1 ms: 441 GB/s, 10%.
        self.assertIn("| `conv_global_wrapper__0_s0_n` |", lines[2])
        self.assertIn("| 1000.0 | 18000 | 50.0 | 441 | 10.0 |", lines[2])
        self.assertIn("| `output_s0_c_cn` |", lines[3])
        self.assertIn("| 250.0 | 0 | 0.0 | 3456 | 78.4 |", lines[3])

    def test_optional_metrics_name_the_busiest_unit_and_the_largest_stalls(self):
        # stalls 1.2 + 1.09 + 0.35 + 0.68 = 3.32: wait 36%, barrier 33%, not_selected 20%
        names = [ncu_table.L1, ncu_table.L2, ncu_table.TENSOR[1], ncu_table.TENSOR[2],
                 ncu_table.STALLS["wait"], ncu_table.STALLS["barrier"],
                 ncu_table.STALLS["long_scoreboard"], ncu_table.STALLS["not_selected"]]
        header = HEADER + "," + ",".join(f'"{n}"' for n in names)
        units = UNITS + "," + ",".join(['"%"'] * 4 + ['"ratio"'] * 4)
        text = "\n".join([
            "# problem: p32", header, units,
            # tensor pipe: the larger of the two (hmma 35, gmma n/a); L2 the busiest unit
            launch(0, "tc", "1000", "0", pipe=5.0, issue=46.0) + ',"54","61","35","n/a",'
            '"1.2","1.09","0.35","0.68"',
            # DRAM (3.6 TB/s of 4.0) beats every other unit
            launch(1, "out", "1000", "3600000", issue=50.0) + ',"40","60","0","0",'
            '"0","0","4.5","0.1"',
        ])
        ks = ncu_table.parse(text)
        self.assertEqual(ks[0]["tensor_pct"], 35.0)
        self.assertEqual(ks[0]["stalls"]["not_selected"], 0.68)
        lines = ncu_table.table(ks, peak_tflops=60.0, peak_gbps=4000.0).splitlines()
        self.assertIn("| 35.0 | 54.0 | 61.0 | L2 61% | wait 36%, barrier 33%, not_selected 20% |",
                      lines[2])
        self.assertIn("| DRAM 90% | long_scoreboard 98%, not_selected 2%, wait 0% |", lines[3])

    def test_profiles_without_the_optional_metrics_leave_their_columns_empty(self):
        ks = ncu_table.parse("\n".join(["# problem: p24", HEADER, UNITS,
                                        launch(0, "k", "1000", "0", pipe=7.0, issue=9.0)]))
        self.assertIsNone(ks[0]["l1_pct"])
        self.assertEqual(ks[0]["stalls"], {})
        line = ncu_table.table(ks, peak_tflops=60.0, peak_gbps=4000.0).splitlines()[2]
        self.assertTrue(line.endswith("| — | — | — | issue 9% | — |"), line)

    def test_each_kernel_once_by_its_last_launch(self):
        ks = ncu_table.parse("\n".join([
            "# problem: p25", HEADER, UNITS,
            launch(0, "a", "9000", "1"), launch(1, "b", "5000", "1"),
            launch(2, "a", "1000", "1"), launch(3, "b", "2000", "1"),
            "# problem: p32", HEADER, UNITS, launch(0, "a", "3000", "1")]))
        last = ncu_table.last_launches(ks)
        self.assertEqual([(k["problem"], k["kernel"], round(k["seconds"] * 1e9)) for k in last],
                         [("p25", "a", 1000), ("p25", "b", 2000), ("p32", "a", 3000)])

    def test_other_units_are_converted(self):
        units = UNITS.replace('"nsecond"', '"usecond"').replace('"byte"', '"Mbyte"')
        ks = ncu_table.parse("\n".join(["# problem: p25", HEADER, units,
                                        launch(0, "k", "2.5", "33.5")]))
        self.assertAlmostEqual(ks[0]["seconds"], 2.5e-6)
        self.assertAlmostEqual(ks[0]["dram_bytes"], 33.5e6)

    def test_errors_name_the_problem(self):
        cases = [
            ("no kernel launches found", "nothing here"),
            ("before any", "\n".join([HEADER, UNITS, launch(0, "k", "1", "1")])),
            ("no column gpu__time_duration.sum",
             "# problem: p24\n" + HEADER.replace("gpu__time_duration.sum", "x") + "\n"
             + launch(0, "k", "1", "1")),
            ("p24, launch 1: 'abc' is not a number",
             "\n".join(["# problem: p24", HEADER, UNITS, launch(0, "k", "abc", "1")])),
            ("duration unit 'fortnight' unknown",
             "\n".join(["# problem: p24", HEADER, UNITS.replace("nsecond", "fortnight"),
                        launch(0, "k", "1", "1")])),
            ("a duration of 0", "\n".join(["# problem: p24", HEADER, UNITS,
                                           launch(0, "k", "0", "1")])),
            ("fields, the header has", "\n".join(["# problem: p24", HEADER, '"0","1"'])),
        ]
        for message, text in cases:
            with self.subTest(message=message):
                with self.assertRaises(ncu_table.ProfileError) as e:
                    ncu_table.parse(text)
                self.assertIn(message, str(e.exception))

    def test_main_writes_the_table_and_rejects_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            prof, out = os.path.join(d, "p.csv"), os.path.join(d, "t.md")
            with open(prof, "w") as f:
                f.write("\n".join(["# problem: p24", HEADER, UNITS, launch(0, "k", "1000", "0")]))
            self.assertEqual(ncu_table.main([prof, "--peak-tflops", "60", "--peak-gbps", "4000",
                                             "--out", out]), 0)
            with open(out) as f:
                self.assertIn("| p24 | `k` |", f.read())
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(ncu_table.main([os.path.join(d, "missing.csv"), "--peak-tflops",
                                                 "60", "--peak-gbps", "4000"]), 2)
            self.assertIn("missing.csv", err.getvalue())
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                ncu_table.main([prof, "--peak-tflops", "0", "--peak-gbps", "4000"])


if __name__ == "__main__":
    unittest.main()
