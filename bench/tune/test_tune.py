#!/usr/bin/env python3
"""GPU-free tests of bench/tune/tune.py and its package tuner/: constraints, candidate generation,
rounds, state, the tuned file and its CMake side (generators/tuned_params.cmake through `cmake -P`).

Run: python3 bench/tune/test_tune.py   (ctest runs it as tune_py)
"""

import contextlib
import io
import json
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tuner as tune  # noqa: E402  (tune.py's package: the tests call its functions and main)

REPO = Path(__file__).resolve().parents[2]


def small_spec(**over):
    spec = {
        "model": "p24", "generator": "p24_conv3d_min_softmax", "header": "",
        "shape": [2, 3, 24, 32, 32],
        "constants": {"cout": 24},
        "params": {
            "gpu_tile_x": {"range": [8, 32], "scale": "pow2", "default": 16},
            "gpu_tile_y": {"values": [1, 2, 4, 8, 16, 32], "default": 8},
            "gpu_channel_block": {"values": [1, 2, 4, 8, 12, 24], "default": 8},
        },
        "constraints": [
            {"expr": "gpu_tile_x * gpu_tile_y <= 1024", "kind": "hard", "why": "threads"},
            {"expr": "gpu_tile_x * gpu_tile_y * cout * 4 <= 49152", "kind": "hard", "why": "smem"},
            {"expr": "gpu_tile_x * gpu_tile_y >= 32", "kind": "prune", "why": "warp"},
        ],
    }
    spec.update(over)
    return spec


def write_space(path, libs):
    path.write_text(json.dumps({"libraries": libs}, indent=1))


class ExprTest(unittest.TestCase):
    def test_arithmetic_and_comparisons(self):
        env = {"a": 32, "b": 8, "c": 3}
        cases = {
            "a * b <= 1024": True, "a * b * 24 * 4 <= 49152": True, "a * b * 64 * 4 <= 49152": False,
            "a // c == 10": True, "a % c == 2": True, "a / b == 4": True, "-a < 0": True,
            "1 <= c <= 4": True, "1 <= c <= 2": False, "a > 1 and b > 100": False,
            "a > 1 or b > 100": True, "not a == 32": False, "min(a, b) == 8": True,
            "max(a, b, c) == 32": True, "abs(c - a) == 29": True, "(a + b) * 2 == 80": True,
        }
        for text, want in cases.items():
            with self.subTest(text=text):
                self.assertEqual(bool(tune.Expr(text).evaluate(env)), want)

    def test_names(self):
        self.assertEqual(tune.Expr("gpu_tile_x * gpu_tile_y * cout <= 1").names,
                         {"gpu_tile_x", "gpu_tile_y", "cout"})

    def test_rejects_anything_else(self):
        for text in ["__import__('os').system('true')", "a.b", "a[0]", "'x' == 'x'", "lambda: 1",
                     "pow(a, 2)", "a ** 2", "a if b else c", "a <= ", "True", "[a]"]:
            with self.subTest(text=text):
                with self.assertRaises(tune.TuneError):
                    tune.Expr(text)

    def test_unknown_name_at_evaluation(self):
        with self.assertRaises(tune.TuneError):
            tune.Expr("x < 1").evaluate({})


class RunCmdTest(unittest.TestCase):
    def test_a_missing_program_is_a_tune_error(self):
        for capture in (False, True):
            with self.subTest(capture=capture), contextlib.redirect_stdout(io.StringIO()), \
                    self.assertRaisesRegex(tune.TuneError, "the probe: cannot run /nonexistent/prog"):
                tune.run_cmd(["/nonexistent/prog", "x"], "the probe", capture=capture)


class SpaceTest(unittest.TestCase):
    def test_expand_values(self):
        self.assertEqual(tune.expand_values("a", {"values": [3, 1, 2]}), [3, 1, 2])
        self.assertEqual(tune.expand_values("a", {"range": [2, 9], "step": 3}), [2, 5, 8])
        self.assertEqual(tune.expand_values("a", {"range": [1, 4]}), [1, 2, 3, 4])
        self.assertEqual(tune.expand_values("a", {"range": [6, 64], "scale": "pow2"}), [8, 16, 32, 64])
        for bad in [{}, {"values": []}, {"values": [1, 1]}, {"range": [4, 1]},
                    {"range": [1, 8], "scale": "log"}]:
            with self.assertRaises(tune.TuneError):
                tune.expand_values("a", bad)

    def test_constraints_filter_points(self):
        s = tune.LibSpace("p24_cuda", small_spec())
        pts = s.all_points()
        self.assertEqual(s.product_size(), 3 * 6 * 6)
        for p in pts:
            self.assertTrue(s.valid(p))
            self.assertLessEqual(p["gpu_tile_x"] * p["gpu_tile_y"] * 24 * 4, 49152)
            self.assertGreaterEqual(p["gpu_tile_x"] * p["gpu_tile_y"], 32)
        # tile 32 x 32 breaks threads (1024 is fine) but not shared memory: 32*32*96 > 49152.
        bad = {"gpu_tile_x": 32, "gpu_tile_y": 32, "gpu_channel_block": 8}
        self.assertFalse(s.valid(bad))
        self.assertEqual([v[0] for v in s.violations(bad)], ["gpu_tile_x * gpu_tile_y * cout * 4 <= 49152"])
        self.assertEqual(len(pts), 6 * sum(1 for x in (8, 16, 32) for y in (1, 2, 4, 8, 16, 32)
                                           if 32 <= x * y <= 512))

    def test_unknown_names_and_kinds_rejected(self):
        spec = small_spec(constraints=[{"expr": "gpu_tile_z < 4"}])
        with self.assertRaises(tune.TuneError):
            tune.LibSpace("p24_cuda", spec)
        spec = small_spec(constraints=[{"expr": "gpu_tile_x < 4", "kind": "soft"}])
        with self.assertRaises(tune.TuneError):
            tune.LibSpace("p24_cuda", spec)

    def test_repository_space_loads_and_defaults_are_valid(self):
        space = tune.load_space()
        self.assertEqual(set(space), {"p24_cuda", "p25_cuda", "p25_xy_cuda", "p25_tc_cuda",
                                      "p32_cuda", "p32_xy_cuda", "p32_tc_cuda", "p83_cuda",
                                      "p83_xy_cuda"})
        # The tensor-core libraries: their own signatures, CUDA only, no Li2018.
        for lib in ("p25_tc_cuda", "p32_tc_cuda"):
            self.assertEqual(space[lib].entry, lib[:3] + "_tc")
            self.assertTrue(space[lib].cuda_only)
            self.assertFalse(space[lib].li2018)
        self.assertEqual(space["p25_cuda"].entry, "p25")
        self.assertFalse(space["p25_cuda"].cuda_only)
        for lib, s in space.items():
            with self.subTest(lib=lib):
                self.assertTrue(all(n.startswith("gpu_") for n in s.names))
                # A default may be pruned (p32_xy_cuda's limit of 16 channels runs its direct
                # form at p32's 64), never impossible.
                hard = [v for v in s.violations(s.default) if v[1] == "hard"]
                self.assertEqual(hard, [])
                self.assertGreater(len(s.all_points()), 1)
        errors, _ = tune.check_space_against_headers(space)
        self.assertEqual(errors, [])

    def test_header_check(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "schedules").mkdir()
            (root / "schedules" / "x.h").write_text(
                'struct P {\n  Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 32};\n'
                '  Halide::GeneratorParam<int> gpu_new{"gpu_new", 4};\n'
                '  Halide::GeneratorParam<bool> gpu_flag{"gpu_flag", true};\n'
                '  Halide::GeneratorParam<std::string> gpu_form{"gpu_form", "auto"};\n'
                '  Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};\n};\n')
            self.assertEqual(tune.header_params(root / "schedules" / "x.h"),
                             {"gpu_tile_x": 32, "gpu_new": 4, "gpu_flag": True, "gpu_form": "auto",
                              "cpu_vector": 8})
            spec = small_spec(header="schedules/x.h")
            space = {"p24_cuda": tune.LibSpace("p24_cuda", spec)}
            errors, warnings = tune.check_space_against_headers(space, repo=root)
            self.assertEqual(len(errors), 2)  # gpu_tile_y, gpu_channel_block are not declared
            self.assertTrue(any("gpu_new" in w for w in warnings))
            self.assertTrue(any("gpu_flag" in w for w in warnings))
            self.assertTrue(any("gpu_form" in w for w in warnings))
            self.assertTrue(any("default is 16" in w for w in warnings))
            self.assertFalse(any("cpu_vector" in w for w in warnings))
            self.assertEqual(tune.reference_point(space["p24_cuda"], repo=root)["gpu_tile_x"], 32)

    def test_neighbors(self):
        s = tune.LibSpace("p24_cuda", small_spec())
        p = {"gpu_tile_x": 8, "gpu_tile_y": 8, "gpu_channel_block": 24}
        n1 = s.neighbors(p, 1)
        self.assertEqual(sorted(tuple(sorted(q.items())) for q in n1), sorted([
            tuple(sorted({**p, "gpu_tile_x": 16}.items())),
            tuple(sorted({**p, "gpu_tile_y": 4}.items())),
            tuple(sorted({**p, "gpu_tile_y": 16}.items())),
            tuple(sorted({**p, "gpu_channel_block": 12}.items())),
        ]))
        n2 = s.neighbors(p, 2)
        for q in n2:
            self.assertEqual(sum(q[k] != p[k] for k in p), 2)
        self.assertIn({"gpu_tile_x": 16, "gpu_tile_y": 4, "gpu_channel_block": 24}, n2)

    def alias_spec(self, **taps):
        params = dict(small_spec()["params"])
        params["gpu_taps"] = {"values": ["channels", "points"], "aliases": {"auto": "points"},
                              "default": "auto", **taps}
        return small_spec(params=params)

    def test_aliases_are_one_point(self):
        s = tune.LibSpace("p24_cuda", self.alias_spec())
        auto = dict(s.default)
        points = {**auto, "gpu_taps": "points"}
        self.assertEqual(s.key(auto), s.key(points))
        self.assertNotEqual(s.key(auto), s.key({**auto, "gpu_taps": "channels"}))
        self.assertEqual(s.canonical(auto), points)
        # Refinement steps from the default start at the value its alias stands for.
        self.assertIn({**auto, "gpu_taps": "channels"}, s.neighbors(auto, 1))
        # The default is measured anyway: its alias's point is never picked as a candidate.
        got = tune.select_candidates(s, fresh_ls(), 10**6, random.Random(0), auto, grid_max=0)
        keys = [s.key(q) for q, _, _ in got]
        self.assertEqual(len(got), len(s.all_points()) - 1)
        self.assertNotIn(s.key(points), keys)
        self.assertEqual(len(set(keys)), len(keys))

    def test_bad_aliases_rejected(self):
        for taps in ({"aliases": {"points": "channels"}},  # an alias that is also a candidate
                     {"aliases": {"auto": "rows"}},        # a target that is not a candidate
                     {"aliases": {}},                      # the default "auto" is then nothing
                     {"default": "rows"}):
            with self.subTest(taps=taps), self.assertRaises(tune.TuneError):
                tune.LibSpace("p24_cuda", self.alias_spec(**taps))
        # An integer param's alias keys must read as integers (JSON keys are strings).
        params = dict(small_spec()["params"])
        params["gpu_tile_y"] = {"values": [1, 2, 4], "aliases": {"auto": 2}, "default": 2}
        with self.assertRaises(tune.TuneError):
            tune.LibSpace("p24_cuda", small_spec(params=params))

    def test_integer_aliases_stand_for_their_value_in_keys_and_constraints(self):
        params = dict(small_spec()["params"])
        params["gpu_tile_y"] = {"values": [1, 2, 4], "aliases": {"0": 4}, "default": 0}
        spec = small_spec(params=params)
        spec["constraints"] = [{"expr": "gpu_tile_y >= 2", "kind": "prune", "why": "test"}]
        s = tune.LibSpace("p24_cuda", spec)
        zero = dict(s.default)
        self.assertEqual(s.canonical_value("gpu_tile_y", 0), 4)
        self.assertEqual(s.key(zero), s.key({**zero, "gpu_tile_y": 4}))
        self.assertTrue(s.valid(zero))  # 0 stands for 4, which the constraint allows
        self.assertFalse(s.valid({**zero, "gpu_tile_y": 1}))

    def test_repository_aliases_resolve_as_the_schedule_does(self):
        # schedules/conv2d_min_schedule.cpp: "auto" is points innermost for p25, channels for p32
        # (ctest tune_aliases checks the same against the generator's output).
        space = tune.load_space()
        self.assertEqual(space["p25_cuda"].canonical_value("gpu_winograd_taps", "auto"), "points")
        self.assertEqual(space["p32_cuda"].canonical_value("gpu_winograd_taps", "auto"), "channels")
        # gpu_wino2d_max_cin / _tiles_x 0: kP25Winograd2D and kP32Winograd2D.
        for lib, max_cin, tiles_x in (("p25_xy_cuda", 16, 8), ("p32_xy_cuda", 64, 4)):
            self.assertEqual(space[lib].canonical_value("gpu_wino2d_max_cin", 0), max_cin)
            self.assertEqual(space[lib].canonical_value("gpu_wino2d_tiles_x", 0), tiles_x)


def fresh_ls(shape=(2, 3, 24, 32, 32)):
    return {"shape": list(shape), "next_id": 0, "candidates": {}, "defaults": [], "li2018": {}}


class SelectionTest(unittest.TestCase):
    def setUp(self):
        self.s = tune.LibSpace("p24_cuda", small_spec())
        self.ref = dict(self.s.default)

    def pick(self, ls, n, seed, grid_max=8, **kw):
        rng = random.Random(f"{seed}/p24_cuda/1")
        return tune.select_candidates(self.s, ls, n, rng, self.ref, grid_max=grid_max, **kw)

    def test_random_is_deterministic_per_seed(self):
        a = self.pick(fresh_ls(), 10, 0)
        b = self.pick(fresh_ls(), 10, 0)
        c = self.pick(fresh_ls(), 10, 1)
        self.assertEqual(a, b)
        self.assertNotEqual([p for p, _, _ in a], [p for p, _, _ in c])
        self.assertEqual({m for _, m, _ in a}, {"random"})
        keys = [self.s.key(p) for p, _, _ in a]
        self.assertEqual(len(set(keys)), 10)
        self.assertNotIn(self.s.key(self.ref), keys)  # the default is measured anyway
        for p, _, _ in a:
            self.assertTrue(self.s.valid(p))

    def test_grid_when_small(self):
        spec = small_spec(params={
            "gpu_tile_x": {"values": [16, 32], "default": 16},
            "gpu_tile_y": {"values": [4, 8], "default": 8},
            "gpu_channel_block": {"values": [4, 8], "default": 8}})
        s = tune.LibSpace("p24_cuda", spec)
        self.assertEqual(len(s.all_points()), 8)
        rng = random.Random(0)
        got = tune.select_candidates(s, fresh_ls(), 24, rng, dict(s.default), grid_max=8)
        self.assertEqual({m for _, m, _ in got}, {"grid"})
        self.assertEqual(len(got), 7)  # every point but the default, in canonical order
        self.assertEqual([p for p, _, _ in got], [p for p in s.all_points() if p != s.default])
        # Over the grid limit: random instead.
        got = tune.select_candidates(s, fresh_ls(), 3, random.Random(0), dict(s.default), grid_max=7)
        self.assertEqual({m for _, m, _ in got}, {"random"})

    def test_grid_continues_over_rounds(self):
        spec = small_spec(params={
            "gpu_tile_x": {"values": [16, 32], "default": 16},
            "gpu_tile_y": {"values": [4, 8], "default": 8},
            "gpu_channel_block": {"values": [4, 8], "default": 8}})
        s = tune.LibSpace("p24_cuda", spec)
        ls = fresh_ls()
        first = tune.select_candidates(s, ls, 4, random.Random(0), dict(s.default), grid_max=8)
        for i, (p, _, _) in enumerate(first):
            ls["candidates"][f"c{i:03d}"] = {"params": p, "status": "ok", "median_ms": 1.0, "round": 1}
        second = tune.select_candidates(s, ls, 4, random.Random(0), dict(s.default), grid_max=8)
        self.assertEqual(len(second), 3)
        self.assertFalse({s.key(p) for p, _, _ in first} & {s.key(p) for p, _, _ in second})
        ls["candidates"].update({f"d{i}": {"params": p, "status": "failed", "round": 2}
                                 for i, (p, _, _) in enumerate(second)})
        self.assertEqual(tune.select_candidates(s, ls, 4, random.Random(0), dict(s.default), 8), [])

    def test_refinement_around_best(self):
        ls = fresh_ls()
        best = {"gpu_tile_x": 8, "gpu_tile_y": 16, "gpu_channel_block": 4}
        other = {"gpu_tile_x": 32, "gpu_tile_y": 4, "gpu_channel_block": 24}
        ls["candidates"]["c000"] = {"params": best, "status": "ok", "median_ms": 1.0, "round": 1}
        ls["candidates"]["c001"] = {"params": other, "status": "ok", "median_ms": 5.0, "round": 1}
        ls["candidates"]["c002"] = {"params": {**best, "gpu_channel_block": 8}, "status": "failed",
                                    "round": 1}
        ls["defaults"].append({"session": "s", "median_ms": 3.0})
        got = self.pick(ls, 8, 0, top=1, explore=0.25)
        modes = [m for _, m, _ in got]
        self.assertEqual(modes.count("refine"), 6)
        self.assertEqual(modes.count("random"), 2)
        refined = [p for p, m, _ in got if m == "refine"]
        # First the one-step neighbours of the best (the failed one excluded), then two-step ones.
        one = [q for q in self.s.neighbors(best, 1) if self.s.valid(q) and q != ls["candidates"]["c002"]["params"]]
        self.assertEqual(refined[:len(one)], one)
        for q in refined[len(one):]:
            self.assertEqual(sum(q[k] != best[k] for k in best), 2)
        self.assertTrue(all(parent == "c000" for _, m, parent in got if m == "refine"))
        keys = [self.s.key(p) for p, _, _ in got]
        self.assertEqual(len(keys), len(set(keys)))
        self.assertEqual(got, self.pick(ls, 8, 0, top=1, explore=0.25))  # deterministic

    def test_refinement_includes_default_when_it_is_best(self):
        ls = fresh_ls()
        ls["candidates"]["c000"] = {"params": {"gpu_tile_x": 32, "gpu_tile_y": 4, "gpu_channel_block": 24},
                                    "status": "ok", "median_ms": 9.0, "round": 1}
        ls["defaults"].append({"session": "s", "median_ms": 1.0})
        got = self.pick(ls, 4, 0, top=1, explore=0.0)
        self.assertTrue(all(m == "refine" and parent == "default" for _, m, parent in got))
        for p, _, _ in got:
            self.assertEqual(sum(p[k] != self.ref[k] for k in p), 1)


def fake_log(path, st, space, device="Test GPU", ms=None, fail=(), session="s1", round_no=None):
    """A log as fusedconv_tune writes it, for the latest round's pending candidates."""
    rnd = st["rounds"][-1]
    recs = [{"type": "session", "session": session, "device": device, "date": "2026-11-21",
             "round": round_no or rnd["round"], "token": rnd["token"], "commit": "abc"}]
    for lib, ids in rnd["candidates"].items():
        ls = st["libs"][lib]
        base = {"type": "measurement", "session": session, "lib": lib, "shape": ls["shape"],
                "round": rnd["round"]}
        recs.append({**base, "system": "default", "id": "default", "status": "ok", "median_ms": 10.0,
                     "min_ms": 9.5, "params": tune.reference_point(space[lib])})
        for cid in ids:
            c = ls["candidates"][cid]
            if cid in fail:
                recs.append({**base, "system": "candidate", "id": cid, "params": c["params"],
                             "status": "error", "error": "too much shared memory"})
            else:
                v = ms(c["params"]) if ms else 5.0
                recs.append({**base, "system": "candidate", "id": cid, "params": c["params"],
                             "status": "ok", "median_ms": v, "min_ms": v, "default_median_ms": 10.0})
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
        f.write('{"type": "measurement", "lib": "p2')  # an interrupted last write


class RoundsTest(unittest.TestCase):
    """The command-line flow without building: round -> (fake) log -> ingest -> round."""

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        self.space_path = self.dir / "space.json"
        write_space(self.space_path, {"p24_cuda": small_spec(),
                                      "p25_cuda": small_spec(model="p25", generator="p25_conv2d_min_tanh_tanh",
                                                             shape=[2, 16, 64, 64])})
        self.work = self.dir / "work"

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_tune(self, *args):
        rc = tune.main(["--work", str(self.work), "--space", str(self.space_path), *args])
        return rc

    def state(self):
        return json.loads((self.work / "state.json").read_text())

    def test_two_libraries_of_one_model(self):
        # p25_cuda and p25_xy_cuda: each its own reference (the main project's library of that
        # name) and candidates, one shape line for the model, the fixed param in every build.
        xy = small_spec(model="p25", generator="p25_conv2d_min_tanh_tanh", shape=[2, 16, 64, 64],
                        fixed={"gpu_winograd_dims": "xy"})
        write_space(self.space_path, {"p25_cuda": small_spec(model="p25", generator="p25_conv2d_min_tanh_tanh",
                                                             shape=[2, 16, 64, 64]),
                                      "p25_xy_cuda": xy})
        self.assertEqual(self.run_tune("round", "--no-build", "--cap", "2", "--grid-max", "1"), 0)
        gen = (self.work / "gen" / "CMakeLists.txt").read_text()
        table = (self.work / "gen" / "tune_table.cpp").read_text()
        self.assertIn('p25_entry("p25_cuda", "default", "default", "fusedconv_p25_cuda"', table)
        self.assertIn('p25_entry("p25_xy_cuda", "default", "default", "fusedconv_p25_xy_cuda"', table)
        self.assertIn('#include "p25_xy_cuda.h"', table)
        self.assertEqual(table.count('{"p25", {2, 16, 64, 64}}'), 1)
        xy_lines = [l for l in gen.splitlines() if l.startswith("fusedconv_tune_candidate(p25_xy_cuda")]
        x_lines = [l for l in gen.splitlines() if l.startswith("fusedconv_tune_candidate(p25_cuda")]
        self.assertEqual((len(xy_lines), len(x_lines)), (2, 2))
        self.assertTrue(all(l.endswith(';gpu_winograd_dims=xy")') for l in xy_lines))
        self.assertFalse(any("gpu_winograd_dims" in l for l in x_lines))

    def test_a_library_with_its_own_entry(self):
        # A tensor-core library: its table lines take its signature's helper (p25_tc_entry), no
        # Li2018 library is built for it, and a CPU smoke round leaves it out.
        tc = small_spec(model="p25", generator="p25_tensor_core", shape=[2, 16, 64, 64],
                        entry="p25_tc", cuda_only=True, li2018=False)
        write_space(self.space_path, {"p24_cuda": small_spec(), "p25_tc_cuda": tc})
        self.assertEqual(self.run_tune("round", "--no-build", "--cap", "2", "--grid-max", "1"), 0)
        table = (self.work / "gen" / "tune_table.cpp").read_text()
        gen = (self.work / "gen" / "CMakeLists.txt").read_text()
        self.assertIn('p25_tc_entry("p25_tc_cuda", "default", "default", "fusedconv_p25_tc_cuda"', table)
        self.assertIn('p25_tc_entry("p25_tc_cuda", "candidate", "c000"', table)
        self.assertNotIn("fusedconv_tune_li2018(p25_tc_cuda", gen)
        self.assertNotIn('p25_entry(', table)
        smoke = self.dir / "smoke"
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            rc = tune.main(["--work", str(smoke), "--space", str(self.space_path), "round",
                            "--no-build", "--smoke-cpu", "--cap", "2", "--grid-max", "1"])
        self.assertEqual(rc, 0)
        self.assertIn("leaving out p25_tc_cuda", err.getvalue())
        smoke_table = (smoke / "gen" / "tune_table.cpp").read_text()
        self.assertNotIn("p25_tc", smoke_table)
        self.assertIn('p24_entry("p24_cuda", "default", "default", "fusedconv_p24_cpu"', smoke_table)
        # Only CUDA-only libraries selected: an error, not an empty round.
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            rc = tune.main(["--work", str(self.dir / "smoke2"), "--space", str(self.space_path),
                            "round", "--no-build", "--smoke-cpu", "--models", "p25"])
        self.assertNotEqual(rc, 0)

    def test_fixed_params_are_not_searched(self):
        with self.assertRaises(tune.TuneError):
            tune.LibSpace("p24_cuda", small_spec(fixed={"gpu_tile_x": 8}))

    def test_resume_across_rounds(self):
        space = tune.load_space(self.space_path)
        self.assertEqual(self.run_tune("round", "--no-build", "--cap", "6", "--grid-max", "4"), 0)
        st = self.state()
        self.assertEqual(st["rounds"][-1]["round"], 1)
        r1 = {lib: list(ids) for lib, ids in st["rounds"][-1]["candidates"].items()}
        self.assertEqual({len(v) for v in r1.values()}, {6})
        gen = (self.work / "gen" / "CMakeLists.txt").read_text()
        self.assertIn("fusedconv_tune_candidate(p24_cuda c000 p24_conv3d_min_softmax", gen)
        self.assertIn("fusedconv_tune_executable()", gen)
        table = (self.work / "gen" / "tune_table.cpp").read_text()
        self.assertIn("&fusedconv_tune_p24_cuda_c005", table)
        self.assertIn('p24_entry("p24_cuda", "default", "default", "fusedconv_p24_cuda"', table)
        self.assertIn('p25_entry("p25_cuda", "candidate", "c000"', table)

        # Regenerating before anything was measured keeps the round and its candidates.
        self.assertEqual(self.run_tune("round", "--no-build", "--cap", "6", "--grid-max", "4"), 0)
        st = self.state()
        self.assertEqual(len(st["rounds"]), 1)
        self.assertEqual(st["rounds"][-1]["candidates"], r1)

        # Measure all but one candidate of p24 (as if the GPU run was interrupted).
        log = self.dir / "r1.jsonl"
        fake_log(log, st, space, fail=("c001",),
                 ms=lambda p: p["gpu_tile_x"] / 8 + abs(p["gpu_channel_block"] - 4))
        lines = log.read_text().splitlines()
        cut = [l for l in lines if '"c005"' not in l or '"p25_cuda"' in l]
        log.write_text("\n".join(cut) + "\n")
        tuned = self.dir / "tuned.json"
        self.assertEqual(self.run_tune("ingest", str(log), "--tuned", str(tuned)), 0)
        st = self.state()
        ls = st["libs"]["p24_cuda"]
        self.assertEqual(st["device"], "Test GPU")
        self.assertEqual(ls["candidates"]["c001"]["status"], "failed")
        self.assertEqual(ls["candidates"]["c005"]["status"], "pending")
        self.assertEqual(sum(c["status"] == "ok" for c in ls["candidates"].values()), 4)
        self.assertEqual(len(ls["defaults"]), 1)
        # Ingesting the same log again changes nothing.
        before = self.state()
        self.assertEqual(self.run_tune("ingest", str(log), "--no-tuned"), 0)
        self.assertEqual(self.state(), before)

        # Round 2: the pending one is carried over, nothing measured comes back.
        self.assertEqual(self.run_tune("round", "--no-build", "--cap", "6", "--grid-max", "4"), 0)
        st = self.state()
        self.assertEqual(st["rounds"][-1]["round"], 2)
        r2 = st["rounds"][-1]["candidates"]["p24_cuda"]
        self.assertEqual(r2[0], "c005")
        self.assertEqual(len(r2), 6)
        ls = st["libs"]["p24_cuda"]
        keys1 = {tune.LibSpace("p24_cuda", small_spec()).key(ls["candidates"][c]["params"])
                 for c in r1["p24_cuda"] if c != "c005"}
        keys2 = {tune.LibSpace("p24_cuda", small_spec()).key(ls["candidates"][c]["params"]) for c in r2}
        self.assertFalse(keys1 & keys2)
        self.assertIn("refine", {ls["candidates"][c]["mode"] for c in r2})
        table = (self.work / "gen" / "tune_table.cpp").read_text()
        self.assertNotIn("fusedconv_tune_p24_cuda_c000", table)  # measured: not rebuilt
        self.assertIn("fusedconv_tune_p24_cuda_c005", table)

        # A log whose params disagree with the state (another state's binary) is refused.
        bad = self.dir / "bad.jsonl"
        fake_log(bad, st, space, session="s2")
        recs = [json.loads(l) for l in bad.read_text().splitlines()[:-1]]
        for r in recs:
            if r.get("id") == "c005" and r["lib"] == "p24_cuda":
                r["params"]["gpu_tile_x"] += 1
        bad.write_text("".join(json.dumps(r) + "\n" for r in recs))
        self.assertEqual(self.run_tune("ingest", str(bad), "--no-tuned"), 1)
        # ... and so is a log from another GPU.
        other = self.dir / "other.jsonl"
        fake_log(other, st, space, device="Other GPU", session="s3")
        self.assertEqual(self.run_tune("ingest", str(other), "--no-tuned"), 1)

        # A schedule that gained a parameter since makes the state unusable: every command
        # says so instead of failing on the missing name.
        spec = small_spec()
        spec["params"]["gpu_new_param"] = {"values": [1, 2], "default": 1}
        write_space(self.space_path, {"p24_cuda": spec,
                                      "p25_cuda": small_spec(model="p25", generator="p25_conv2d_min_tanh_tanh",
                                                             shape=[2, 16, 64, 64])})
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(self.run_tune("status"), 1)
        self.assertIn("gpu_new_param", err.getvalue())
        self.assertIn("new --work", err.getvalue())

    def test_tuned_file_and_cmake_params(self):
        space = tune.load_space(self.space_path)
        self.run_tune("round", "--no-build", "--cap", "5", "--grid-max", "4")
        st = self.state()
        log = self.dir / "r1.jsonl"
        fake_log(log, st, space, device="NVIDIA H200",
                 ms=lambda p: 2.0 + p["gpu_tile_x"] / 64 + p["gpu_tile_y"] / 64)
        tuned = self.dir / "tuned.json"
        self.assertEqual(self.run_tune("ingest", str(log), "--tuned", str(tuned)), 0)
        doc = json.loads(tuned.read_text())
        self.assertEqual(doc["device"], "NVIDIA H200")
        self.assertEqual(doc["slug"], "nvidia-h200")
        st = self.state()
        for lib in ("p24_cuda", "p25_cuda"):
            e = doc["libraries"][lib]
            ok = [c for c in st["libs"][lib]["candidates"].values() if c["status"] == "ok"]
            best = min(ok, key=lambda c: c["median_ms"])
            self.assertEqual(e["params"], best["params"])
            self.assertEqual(e["median_ms"], best["median_ms"])
            self.assertEqual(e["default_median_ms"], 10.0)
            self.assertAlmostEqual(e["gain"], 10.0 / best["median_ms"], places=3)
            self.assertEqual(e["candidates_measured"], 5)
            self.assertEqual(list(e["params"]), ["gpu_tile_x", "gpu_tile_y", "gpu_channel_block"])
        for key in ("date", "commit", "description"):
            self.assertIn(key, doc)

        params = tune.cmake_params(doc)
        p = doc["libraries"]["p24_cuda"]["params"]
        self.assertEqual(params["p24_cuda"], f"gpu_channel_block={p['gpu_channel_block']};"
                                             f"gpu_tile_x={p['gpu_tile_x']};gpu_tile_y={p['gpu_tile_y']}")
        self.assertEqual(self.cmake_read(tuned), params)

    def test_tuned_file_keeps_other_libraries(self):
        # A library tuned in another work directory keeps its entry; this state's are replaced.
        space = tune.load_space(self.space_path)
        self.run_tune("round", "--no-build", "--cap", "3", "--models", "p24")
        st = self.state()
        log = self.dir / "r1.jsonl"
        fake_log(log, st, space, device="NVIDIA H200", ms=lambda p: 2.0)
        tuned = self.dir / "tuned.json"
        other = {"params": {"gpu_tile_x": 64}, "candidate": "c003", "median_ms": 1.0}
        tuned.write_text(json.dumps({"device": "NVIDIA H200", "libraries": {
            "p32_xy_cuda": other, "p24_cuda": {"params": {"gpu_tile_x": 1}}}}))
        self.assertEqual(self.run_tune("ingest", str(log), "--tuned", str(tuned)), 0)
        libs = json.loads(tuned.read_text())["libraries"]
        self.assertEqual(libs["p32_xy_cuda"], other)
        self.assertNotEqual(libs["p24_cuda"]["params"], {"gpu_tile_x": 1})
        # Another device's file is not mixed with these measurements.
        tuned.write_text(json.dumps({"device": "NVIDIA H100", "libraries": {"p32_xy_cuda": other}}))
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(self.run_tune("tuned", "--tuned", str(tuned)), 1)
        self.assertIn("NVIDIA H100", err.getvalue())

    def test_default_wins_when_nothing_is_faster(self):
        space = tune.load_space(self.space_path)
        self.run_tune("round", "--no-build", "--cap", "3", "--models", "p24")
        st = self.state()
        self.assertEqual(list(st["rounds"][-1]["candidates"]), ["p24_cuda"])
        log = self.dir / "r1.jsonl"
        fake_log(log, st, space, ms=lambda p: 20.0)
        tuned = self.dir / "tuned.json"
        self.run_tune("ingest", str(log), "--tuned", str(tuned))
        e = json.loads(tuned.read_text())["libraries"]["p24_cuda"]
        self.assertEqual(e["candidate"], "default")
        self.assertEqual(e["gain"], 1.0)
        self.assertEqual(e["params"], tune.reference_point(space["p24_cuda"]))

    def test_default_params_come_from_the_log(self):
        """The default library's params as logged (the header may have changed since)."""
        space = tune.load_space(self.space_path)
        self.run_tune("round", "--no-build", "--cap", "2", "--models", "p24")
        st = self.state()
        log = self.dir / "r1.jsonl"
        fake_log(log, st, space, ms=lambda p: 20.0)
        old_default = {"gpu_tile_x": 8, "gpu_tile_y": 4, "gpu_channel_block": 2}
        recs = [json.loads(l) for l in log.read_text().splitlines()[:-1]]
        for r in recs:
            if r.get("system") == "default":
                r["params"] = old_default
        log.write_text("".join(json.dumps(r) + "\n" for r in recs))
        tuned = self.dir / "tuned.json"
        self.run_tune("ingest", str(log), "--tuned", str(tuned))
        e = json.loads(tuned.read_text())["libraries"]["p24_cuda"]
        self.assertEqual(e["params"], old_default)
        self.assertEqual(e["default_params"], old_default)
        # ... and refinement starts from it.
        st = self.state()
        ls = st["libs"]["p24_cuda"]
        s = space["p24_cuda"]
        got = tune.select_candidates(s, ls, 4, random.Random(0), tune.reference_point(s), grid_max=4,
                                     top=1, explore=0)
        self.assertTrue(got)
        for p, mode, parent in got:
            self.assertEqual((mode, parent), ("refine", "default"))
            self.assertEqual(sum(p[k] != old_default[k] for k in p), 1)

    def test_pending_beyond_the_cap_waits(self):
        self.run_tune("round", "--no-build", "--cap", "4", "--models", "p24")
        self.run_tune("round", "--no-build", "--cap", "2", "--models", "p24")  # same round, smaller
        st = self.state()
        self.assertEqual(len(st["rounds"]), 1)
        self.assertEqual(st["rounds"][-1]["candidates"], {"p24_cuda": ["c000", "c001"]})
        self.assertEqual(sum(c["status"] == "pending" for c in st["libs"]["p24_cuda"]["candidates"].values()), 4)
        table = (self.work / "gen" / "tune_table.cpp").read_text()
        self.assertIn("fusedconv_tune_p24_cuda_c001", table)
        self.assertNotIn("fusedconv_tune_p24_cuda_c002", table)
        self.assertNotIn("p25", table)

    def test_simulated_logs_stay_out_of_schedules(self):
        self.run_tune("round", "--no-build", "--cap", "3", "--models", "p24")
        log = self.dir / "sim.jsonl"
        self.assertEqual(self.run_tune("simulate", "--log", str(log)), 0)
        self.assertEqual(self.run_tune("ingest", str(log)), 1)  # needs an explicit --tuned
        tuned = self.dir / "t.json"
        self.assertEqual(self.run_tune("tuned", "--tuned", str(tuned)), 0)
        self.assertTrue(json.loads(tuned.read_text())["simulated"])

    def cmake_read(self, tuned):
        """FUSEDCONV_TUNED_PARAMS_<lib> as generators/tuned_params.cmake reads them."""
        cmake = shutil.which("cmake")
        if not cmake:
            self.skipTest("no cmake")
        script = self.dir / "read.cmake"
        script.write_text(
            f'include("{(REPO / "generators" / "tuned_params.cmake").as_posix()}")\n'
            f'fusedconv_read_tuned("{Path(tuned).as_posix()}")\n'
            'foreach (lib IN LISTS FUSEDCONV_TUNED_LIBRARIES)\n'
            '    message(STATUS "LIB ${lib}=${FUSEDCONV_TUNED_PARAMS_${lib}}")\n'
            'endforeach ()\n')
        r = subprocess.run([cmake, "-P", str(script)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = {}
        for line in (r.stdout + r.stderr).splitlines():
            if line.startswith("-- LIB "):
                lib, _, val = line[len("-- LIB "):].partition("=")
                out[lib] = val
        return out


class CMakeSideTest(unittest.TestCase):
    def test_types_and_errors(self):
        if not shutil.which("cmake"):
            self.skipTest("no cmake")
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "t.json"
            f.write_text(json.dumps({"device": "X", "libraries": {
                "p32_cuda": {"params": {"gpu_tile_x": 64, "gpu_flag": True, "gpu_name": "a"}},
                "p83_cuda": {"params": {}}}}))
            rt = RoundsTest()
            rt.dir = Path(d)
            got = rt.cmake_read(f)
            # CMake lists an object's members sorted by name; tune.py does the same.
            self.assertEqual(got, {"p32_cuda": "gpu_flag=true;gpu_name=a;gpu_tile_x=64", "p83_cuda": ""})
            self.assertEqual(tune.cmake_params(json.loads(f.read_text())), got)
            for bad in ({"libraries": []}, {"nolibraries": {}},
                        {"libraries": {"p32_cuda": {"params": {"gpu_tile_x": [1]}}}}):
                f.write_text(json.dumps(bad))
                script = Path(d) / "read.cmake"
                script.write_text(f'include("{(REPO / "generators" / "tuned_params.cmake").as_posix()}")\n'
                                  f'fusedconv_read_tuned("{f.as_posix()}")\n')
                r = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True)
                self.assertNotEqual(r.returncode, 0, bad)
                self.assertIn("FUSEDCONV_TUNED", r.stderr)


class SlugTest(unittest.TestCase):
    def test_as_results_cpp(self):
        self.assertEqual(tune.slug("NVIDIA H200"), "nvidia-h200")
        self.assertEqual(tune.slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3")
        self.assertEqual(tune.slug("--"), "unknown-device")



class RunCmd(unittest.TestCase):
    """run_cmd is only reached by a real build (round without --no-build): check it here."""

    def test_runs_and_reports_failure(self):
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(tune.run_cmd([sys.executable, "-c", "pass"], "a no-op").returncode, 0)
            with self.assertRaises(tune.TuneError) as e:
                tune.run_cmd([sys.executable, "-c", "raise SystemExit(3)"], "failing step")
        self.assertIn("failing step failed (exit 3)", str(e.exception))

    def test_capture_returns_the_output(self):
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            r = tune.run_cmd([sys.executable, "-c", "print('hello')"], "echo", capture=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn("hello", r.stdout)

if __name__ == "__main__":
    unittest.main()
