#!/usr/bin/env python3
"""scaling_split.py: the split matches C++ shard_ranges, windows cover each rank's samples, and the
batch cap gives fusedconv_scaling's batches (tests/test_scaling_plan.cpp has the same figures)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_split as s  # noqa: E402


class Split(unittest.TestCase):
    def test_ranges_as_cpp(self):  # the cases of tests/test_sharded.cpp
        self.assertEqual(s.shard_ranges(6, 3), [(0, 2), (2, 4), (4, 6)])
        self.assertEqual(s.shard_ranges(7, 3), [(0, 3), (3, 5), (5, 7)])
        self.assertEqual(s.shard_ranges(7, 5), [(0, 2), (2, 4), (4, 5), (5, 6), (6, 7)])
        self.assertEqual(s.shard_ranges(2, 5), [(0, 1), (1, 2)])
        with self.assertRaisesRegex(ValueError, "batch 0"):
            s.shard_ranges(0, 2)

    def test_windows_hold_each_rank_samples(self):
        for batch in range(1, 20):
            for n in range(1, 9):
                width, ws = s.windows(batch, n)
                self.assertEqual(len(ws), n)
                covered = []
                for start, b, e in ws:
                    self.assertTrue(0 <= start and start + width <= batch, (batch, n, start))
                    self.assertTrue(start <= b <= e <= start + width)
                    covered.extend(range(b, e))
                self.assertEqual(covered, list(range(batch)))
        self.assertEqual(s.windows(7, 3), (3, [(0, 0, 3), (3, 3, 5), (4, 5, 7)]))

    def test_batch_cap_of_the_default_shapes(self):
        def batch(in_ps, out_ps, default):
            return s.choose_batch(8 * default, s.max_batch_for_buffers(in_ps, out_ps), 8)
        self.assertEqual(batch(3 * 24 * 32 * 32, 24 * 30 * 30, 128), (1024, False))  # p24
        self.assertEqual(batch(16 * 256 * 256, 254 * 254, 128), (504, True))          # p25
        self.assertEqual(batch(64 * 256 * 256, 254 * 254, 64), (120, True))           # p32
        self.assertEqual(batch(3 * 16 * 64 * 64, 16 * 14 * 62 * 62, 128), (616, True))  # p83
        self.assertEqual(s.choose_batch(100, 5, 8), (5, True))
        with self.assertRaisesRegex(ValueError, "limit 0"):
            s.choose_batch(4, 0, 8)


if __name__ == "__main__":
    unittest.main()
