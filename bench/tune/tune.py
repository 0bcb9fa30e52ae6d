#!/usr/bin/env python3
"""Autotuning of the GPU schedules' GeneratorParams (Python 3 standard library only).

The search spaces are declared in schedules/search_space.json. Tuning runs in rounds:

  here (Halide):   tune.py round      picks round k's candidates per model library, writes a
                                      CMake project listing them and builds ONE tuning binary
                                      (<work>/bin/fusedconv_tune)
  GPU machine:     fusedconv_tune --log LOG     times the default, every candidate and Li2018
  here:            tune.py ingest LOG records the measurements in <work>/state.json and writes
                                      schedules/tuned/<device slug>.json; then `round` again

Round 1 samples the constrained space (exhaustively when it is small); later rounds refine
around the best measured so far. A candidate once measured (or failed) is never rebuilt or
rerun. See bench/README.md, "Autotuning the GPU schedules".
"""

import argparse
import ast
import datetime
import hashlib
import itertools
import json
import operator
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import results_io  # noqa: E402  (bench/results_io.py: standard library only)
SPACE_FILE = REPO / "schedules" / "search_space.json"
TUNED_DIR = REPO / "schedules" / "tuned"
DEFAULT_WORK = REPO / "build-tune"
STATE_VERSION = 1
ENUMERATION_LIMIT = 200000  # larger products are sampled, never enumerated
MODEL_ORDER = ["p24", "p25", "p32", "p83"]


class TuneError(Exception):
    pass


def log(msg):
    print(msg, flush=True)


# --------------------------------------------------------------------------------------------
# Constraint expressions: a small, safe subset of Python expressions over integers.

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_CMPOPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
_FUNCS = {"min": min, "max": max, "abs": abs}


class Expr:
    """A parsed constraint: Expr('a * b <= 1024').names, .evaluate({'a': 32, 'b': 8})."""

    def __init__(self, text):
        self.text = text
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as e:
            raise TuneError(f"constraint '{text}': syntax error: {e.msg}") from None
        self.names = set()
        self._check(tree.body)
        self.tree = tree.body

    def _check(self, node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise TuneError(f"constraint '{self.text}': only numbers are allowed, not {node.value!r}")
        elif isinstance(node, ast.Name):
            self.names.add(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            self._check(node.operand)
        elif isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            self._check(node.left)
            for c in node.comparators:
                self._check(c)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self._check(v)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _FUNCS and not node.keywords and node.args):
            for a in node.args:
                self._check(a)
        else:
            raise TuneError(f"constraint '{self.text}': unsupported syntax "
                            f"'{ast.unparse(node)}' (see expression_syntax in search_space.json)")

    def evaluate(self, env):
        return self._eval(self.tree, env)

    def _eval(self, node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise TuneError(f"constraint '{self.text}': unknown name '{node.id}'")
            return env[node.id]
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, env), self._eval(node.right, env)
            try:
                return _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise TuneError(f"constraint '{self.text}': division by zero at {env}") from None
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not v
            return -v if isinstance(node.op, ast.USub) else +v
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, env)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self._eval(v, env) for v in node.values)
            return any(self._eval(v, env) for v in node.values)
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*[self._eval(a, env) for a in node.args])
        raise TuneError(f"constraint '{self.text}': cannot evaluate")  # unreachable after _check


# --------------------------------------------------------------------------------------------
# Search spaces

def expand_values(name, spec):
    """The ordered candidate values of one param: "values" or "range" (+ "step" or "scale")."""
    if "values" in spec:
        vals = list(spec["values"])
    elif "range" in spec:
        lo, hi = spec["range"]
        if spec.get("scale") == "pow2":
            vals, v = [], 1
            while v <= hi:
                if v >= lo:
                    vals.append(v)
                v *= 2
        elif "scale" in spec:
            raise TuneError(f"param {name}: unknown scale '{spec['scale']}' (only pow2)")
        else:
            step = spec.get("step", 1)
            if step <= 0:
                raise TuneError(f"param {name}: step must be positive")
            vals = list(range(lo, hi + 1, step))
    else:
        raise TuneError(f"param {name}: needs \"values\" or \"range\"")
    if not vals:
        raise TuneError(f"param {name}: no candidate values")
    if len(set(vals)) != len(vals):
        raise TuneError(f"param {name}: repeated values {vals}")
    return vals


class LibSpace:
    """The search space of one library (p32_cuda): ordered params, constants, constraints."""

    def __init__(self, lib, spec):
        self.lib = lib
        self.model = spec.get("model", lib.split("_")[0])
        self.generator = spec["generator"]
        self.header = spec.get("header", "")
        self.shape = list(spec.get("shape", []))
        self.constants = dict(spec.get("constants", {}))
        self.names = list(spec["params"])
        if not self.names:
            raise TuneError(f"{lib}: no params")
        self.values = {n: expand_values(n, spec["params"][n]) for n in self.names}
        self.default = {n: spec["params"][n].get("default") for n in self.names}
        # "aliases": {value: candidate value}: a value that builds the same library as a
        # candidate (gpu_winograd_taps "auto" is one layout or the other), so that a point and
        # its alias are one point: not picked, built and timed twice.
        self.aliases = {n: dict(spec["params"][n].get("aliases", {})) for n in self.names}
        for n in self.names:
            if self.default[n] is None:
                raise TuneError(f"{lib}: param {n} has no default")
            if self.aliases[n] and not all(isinstance(v, str) for v in self.values[n]):
                # JSON object keys are strings: an alias of a number would never match.
                raise TuneError(f"{lib}: param {n}: aliases are for string-valued params only")
            for alias, target in self.aliases[n].items():
                if alias in self.values[n] or target not in self.values[n]:
                    raise TuneError(f"{lib}: param {n}: alias {alias!r} must not be a candidate "
                                    f"value, and its target {target!r} must be one of {self.values[n]}")
            if self.canonical_value(n, self.default[n]) not in self.values[n]:
                raise TuneError(f"{lib}: param {n}: default {self.default[n]!r} is neither a "
                                f"candidate value nor an alias of one")
            if n in self.constants:
                raise TuneError(f"{lib}: {n} is both a param and a constant")
        self.constraints = []
        for c in spec.get("constraints", []):
            e = Expr(c["expr"])
            unknown = e.names - set(self.names) - set(self.constants)
            if unknown:
                raise TuneError(f"{lib}: constraint '{c['expr']}' uses unknown names {sorted(unknown)}")
            kind = c.get("kind", "hard")
            if kind not in ("hard", "prune"):
                raise TuneError(f"{lib}: constraint '{c['expr']}': kind must be hard or prune")
            self.constraints.append((e, kind, c.get("why", "")))
        self._points = None

    def env(self, point):
        env = dict(self.constants)
        env.update(point)
        return env

    def violations(self, point):
        env = self.env(point)
        return [(e.text, kind, why) for e, kind, why in self.constraints if not e.evaluate(env)]

    def valid(self, point):
        env = self.env(point)
        return all(e.evaluate(env) for e, _, _ in self.constraints)

    def product_size(self):
        n = 1
        for name in self.names:
            n *= len(self.values[name])
        return n

    def all_points(self):
        """Every valid point, in the canonical (lexicographic by value index) order."""
        if self._points is None:
            if self.product_size() > ENUMERATION_LIMIT:
                raise TuneError(f"{self.lib}: {self.product_size()} combinations are too many to enumerate")
            pts = []
            for combo in itertools.product(*(self.values[n] for n in self.names)):
                p = dict(zip(self.names, combo))
                if self.valid(p):
                    pts.append(p)
            self._points = pts
        return self._points

    def canonical_value(self, name, value):
        return self.aliases[name].get(value, value)

    def canonical(self, point):
        """The point with every alias replaced by the candidate value it stands for."""
        return {n: self.canonical_value(n, point[n]) for n in self.names}

    def key(self, point):
        """One string per distinct library: aliases map to the value they stand for."""
        return ";".join(f"{n}={self.canonical_value(n, point[n])}" for n in self.names)

    def cmake_params(self, point):
        return ";".join(f"{n}={fmt_value(point[n])}" for n in self.names)

    def neighbors(self, point, steps=1):
        """Points differing from `point` by one index step in `steps` params (valid or not)."""
        point = self.canonical(point)
        idx = {}
        for n in self.names:
            if point[n] not in self.values[n]:
                return []
            idx[n] = self.values[n].index(point[n])
        out = []
        for names in itertools.combinations(self.names, steps):
            for deltas in itertools.product((-1, 1), repeat=steps):
                q = dict(point)
                ok = True
                for n, d in zip(names, deltas):
                    j = idx[n] + d
                    if not 0 <= j < len(self.values[n]):
                        ok = False
                        break
                    q[n] = self.values[n][j]
                if ok:
                    out.append(q)
        return out


def fmt_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def load_space(path=SPACE_FILE):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise TuneError(f"cannot read search space {path}: {e}") from None
    libs = data.get("libraries")
    if not isinstance(libs, dict) or not libs:
        raise TuneError(f"{path}: no \"libraries\"")
    return {lib: LibSpace(lib, spec) for lib, spec in libs.items()}


_PARAM_RE = re.compile(r'GeneratorParam<\s*([\w:]+)\s*>\s+\w+\s*\{\s*"(\w+)"\s*,\s*([^,}]+?)\s*[,}]')


def header_params(path):
    """GeneratorParams declared in a schedules/*_schedule.h: {name: default (int/float/bool/str)}."""
    out = {}
    text = Path(path).read_text()
    for typ, name, default in _PARAM_RE.findall(text):
        d = default.strip()
        try:
            if typ == "bool":
                val = d == "true"
            elif typ in ("std::string", "string"):
                val = d[1:-1] if len(d) >= 2 and d[0] == d[-1] == '"' else d
            elif typ in ("float", "double"):
                val = float(d.rstrip("fF"))
            else:
                val = int(d)
        except ValueError:
            val = d
        out[name] = val
    return out


def check_space_against_headers(space, repo=REPO):
    """Problems (errors) and warnings from comparing the space with the schedules' headers.

    Error: a param in the space that the header does not declare (the build would fail).
    Warning: a gpu_* param of the header missing from the space (it stays at its default), or
    a default that differs from the header's (the header's is what the reference is built with).
    """
    errors, warnings = [], []
    for lib, s in space.items():
        if not s.header:
            warnings.append(f"{lib}: no header named; params not checked")
            continue
        hp = header_params(repo / s.header)
        for n in s.names:
            if n not in hp:
                errors.append(f"{lib}: param {n} is not a GeneratorParam in {s.header}")
            elif hp[n] != s.default[n]:
                warnings.append(f"{lib}: {n} default is {s.default[n]} in search_space.json but "
                                f"{hp[n]} in {s.header}; the reference uses {hp[n]}")
        for n in hp:
            if n.startswith("gpu_") and n not in s.names:
                warnings.append(f"{lib}: {s.header} declares {n}, which search_space.json does not "
                                f"list; it stays at its default")
    return errors, warnings


def reference_point(space_lib, repo=REPO):
    """The params the reference (default) library is built with: the header's defaults."""
    point = dict(space_lib.default)
    if space_lib.header and (repo / space_lib.header).exists():
        hp = header_params(repo / space_lib.header)
        for n in space_lib.names:
            if n in hp:
                point[n] = hp[n]
    return point


# --------------------------------------------------------------------------------------------
# State

def shape_str(shape):
    return "x".join(str(s) for s in shape)


def new_state(seed, target="gpu"):
    return {"version": STATE_VERSION, "seed": seed, "target": target, "device": None, "rounds": [],
            "libs": {}, "sessions": {}}


def load_state(path):
    if not path.exists():
        return None
    with open(path) as f:
        st = json.load(f)
    if st.get("version") != STATE_VERSION:
        raise TuneError(f"{path}: state version {st.get('version')} is not {STATE_VERSION}")
    return st


def save_state(path, st):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w") as f:
        json.dump(st, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def lib_state(st, lib, shape):
    ls = st["libs"].setdefault(lib, {"shape": list(shape), "next_id": 0, "candidates": {},
                                     "defaults": [], "li2018": {}})
    if list(ls["shape"]) != list(shape):
        raise TuneError(f"{lib}: this state tunes input shape {ls['shape']}, not {list(shape)}; "
                        f"use another --work directory for another shape")
    return ls


def known_keys(space_lib, ls):
    return {space_lib.key(c["params"]) for c in ls["candidates"].values()}


def built_point(space_lib, default, ref_point):
    """A measured default's params as its library was built (the log says), the
    reference's where the log has none."""
    return {n: (default.get("params") or {}).get(n, ref_point[n]) for n in space_lib.names}


def measured_points(space_lib, ls, ref_point):
    """(median_ms, params, id) of every candidate measured ok, and of the default."""
    pts = [(c["median_ms"], c["params"], cid) for cid, c in ls["candidates"].items()
           if c["status"] == "ok" and c.get("median_ms") is not None]
    # The default as measured: with the params its library was built with (the log says).
    best_default = {}
    for d in ls.get("defaults", []):
        if d.get("median_ms") is None:
            continue
        point = built_point(space_lib, d, ref_point)
        k = space_lib.key(point)
        if k not in best_default or d["median_ms"] < best_default[k][0]:
            best_default[k] = (d["median_ms"], point, "default")
    pts += best_default.values()
    pts.sort(key=lambda t: (t[0], t[2]))
    return pts


# --------------------------------------------------------------------------------------------
# Candidate selection

def select_candidates(space_lib, ls, n, rng, ref_point, grid_max=32, top=3, explore=0.25):
    """Up to n new points (not the default, not already in the state) as [(params, mode, parent)].

    grid:   the whole constrained space has <= grid_max points: take them in order.
    random: nothing measured yet: a seeded random sample.
    refine: neighbours (one index step in one param, then in two) of the `top` best measured
            points, best first; `explore` of the round stays random.
    """
    if n <= 0:
        return []
    pts = space_lib.all_points()
    taken = known_keys(space_lib, ls) | {space_lib.key(ref_point)} | {
        space_lib.key(built_point(space_lib, d, ref_point)) for d in ls.get("defaults", [])}
    free = [p for p in pts if space_lib.key(p) not in taken]
    if not free:
        return []
    if len(pts) <= grid_max:
        return [(p, "grid", None) for p in free[:n]]
    best = measured_points(space_lib, ls, ref_point)
    if not best:
        return [(p, "random", None) for p in rng.sample(free, min(n, len(free)))]
    n_explore = int(round(n * explore))
    n_refine = n - n_explore
    chosen, keys = [], set()
    for steps in (1, 2):
        for _, seed_point, seed_id in best[:top]:
            for q in space_lib.neighbors(seed_point, steps):
                k = space_lib.key(q)
                if len(chosen) >= n_refine:
                    break
                if k in taken or k in keys or not space_lib.valid(q):
                    continue
                chosen.append((q, "refine", seed_id))
                keys.add(k)
    rest = [p for p in free if space_lib.key(p) not in keys]
    k = min(n - len(chosen), len(rest))
    chosen += [(p, "random", None) for p in rng.sample(rest, k)]
    return chosen


# --------------------------------------------------------------------------------------------
# Source identity

def git(*args, repo=REPO):
    try:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def source_identity(repo=REPO):
    """commit, whether schedules/ or generators/ differ from it, and a hash of their contents."""
    h = hashlib.sha256()
    for d in ("schedules", "generators"):
        for p in sorted((repo / d).glob("*")):
            if p.is_file() and p.suffix in (".h", ".cpp", ".txt", ".cmake"):
                h.update(p.name.encode())
                h.update(p.read_bytes())
    commit = git("rev-parse", "--short", "HEAD", repo=repo) or "unknown"
    # The tuned files are this tool's output, not its input: their changes are not "dirty".
    dirty = bool(git("status", "--porcelain", "--", "schedules", "generators",
                     ":(exclude)schedules/tuned", repo=repo))
    return {"commit": commit, "dirty": dirty, "source_hash": h.hexdigest()[:16]}


# --------------------------------------------------------------------------------------------
# The generated tuning project

def c_string(s):
    return json.dumps(s)  # a JSON string literal is a valid C++ string literal for our content


def write_project(gen_dir, space, st, round_no, libs, li2018_ok, li2018_failed, ident, token):
    """Writes <gen>/CMakeLists.txt and <gen>/tune_table.cpp: the latest round's candidates of `libs`
    that are still pending (not failed to compile), the defaults, and Li2018."""
    gen_dir.mkdir(parents=True, exist_ok=True)
    round_ids = st["rounds"][-1]["candidates"] if st["rounds"] else {}
    smoke = st.get("target") == "cpu"
    dev = "cpu" if smoke else "cuda"
    cm = [f"# Generated by bench/tune/tune.py for round {round_no}; rerun `tune.py round` instead "
          f"of editing.",
          "cmake_minimum_required(VERSION 3.22)",
          "project(fusedconv_tune LANGUAGES C CXX)",
          f"set(FUSEDCONV_SOURCE_DIR \"{REPO.as_posix()}\")",
          f"set(FUSEDCONV_TUNE_SMOKE_CPU {'ON' if smoke else 'OFF'})",
          "set(FUSEDCONV_TUNE_TABLE \"${CMAKE_CURRENT_SOURCE_DIR}/tune_table.cpp\")",
          "include(\"${FUSEDCONV_SOURCE_DIR}/bench/tune/TuneProject.cmake\")", ""]
    includes, entries, shapes = [], [], []
    for lib in libs:
        s = space[lib]
        ls = st["libs"][lib]
        model = s.model
        shapes.append(f"        {{{c_string(model)}, {{{', '.join(str(d) for d in ls['shape'])}}}}},")
        includes.append(f"#include \"{model}_{dev}.h\"")
        ref = reference_point(s)
        entries.append(f"        {model}_entry(\"default\", \"default\", \"fusedconv_{model}_{dev}\", "
                       f"{c_string(json.dumps(ref))}, &fusedconv_{model}_{dev}),")
        for cid in sorted(round_ids.get(lib, [])):
            c = ls["candidates"][cid]
            if c["status"] != "pending":
                continue
            fn = f"fusedconv_tune_{lib}_{cid}"
            cm.append(f"fusedconv_tune_candidate({lib} {cid} {s.generator} \"{s.cmake_params(c['params'])}\")")
            includes.append(f"#include \"{fn}.h\"")
            entries.append(f"        {model}_entry(\"candidate\", {c_string(cid)}, {c_string(fn)}, "
                           f"{c_string(json.dumps(c['params']))}, &{fn}),")
        if lib in li2018_ok:
            fn = f"fusedconv_tune_{lib}_li2018"
            cm.append(f"fusedconv_tune_li2018({lib} {s.generator})")
            includes.append(f"#include \"{fn}.h\"")
            entries.append(f"        {model}_entry(\"li2018\", \"li2018\", {c_string(fn)}, \"{{}}\", &{fn}),")
        elif lib in li2018_failed:
            entries.append(f"        failed_entry({c_string(model)}, \"li2018\", \"li2018\", "
                           f"{c_string(li2018_failed[lib])}),")
    cm += ["", "fusedconv_tune_executable()", ""]
    cpp = ["// Generated by bench/tune/tune.py; the table of the tuning binary (tune_table.h).",
           "#include \"tune_table.h\"", ""] + includes + [
        "",
        "namespace fusedconv::tune {",
        "",
        "const TableInfo &table_info() {",
        f"    static const TableInfo info = {{{round_no}, {c_string(ident['commit'] + ('+dirty' if ident['dirty'] else ''))}, "
        f"{c_string(ident['source_hash'])}, {c_string(token)}, {c_string('cpu' if smoke else 'gpu')}, {{",
        *shapes,
        "    }};",
        "    return info;",
        "}",
        "",
        "const std::vector<Entry> &table() {",
        "    static const std::vector<Entry> entries = {",
        *entries,
        "    };",
        "    return entries;",
        "}",
        "",
        "}  // namespace fusedconv::tune",
        ""]
    write_if_changed(gen_dir / "CMakeLists.txt", "\n".join(cm))
    write_if_changed(gen_dir / "tune_table.cpp", "\n".join(cpp))


def write_if_changed(path, text):
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)


def run_cmd(cmd, what, capture=False):
    """Runs cmd, its output going to ours; with capture, also returns it (and a failure is the
    caller's to handle)."""
    log("$ " + " ".join(str(c) for c in cmd))
    try:
        if not capture:
            r = subprocess.run([str(c) for c in cmd], text=True)
            if r.returncode != 0:
                raise TuneError(f"{what} failed (exit {r.returncode})")
            return r
        p = subprocess.Popen([str(c) for c in cmd], text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    except OSError as e:  # a missing or non-executable program: an error, not a traceback
        raise TuneError(f"{what}: cannot run {cmd[0]}: {e.strerror or e}") from None
    lines = []
    for line in p.stdout:
        lines.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()
    p.wait()
    return subprocess.CompletedProcess(cmd, p.returncode, "".join(lines), "")


def probe_li2018(info, space_lib, out_dir):
    """Runs Li2018 on one generator directly; returns '' on success, else the error message."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fn = f"fusedconv_tune_{space_lib.lib}_li2018"
    target = info["cuda_target"] + "-no_runtime"
    cmd = [info["generator"], "-g", space_lib.generator, "-f", fn, "-n", fn,
           "-e", "c_header,object,schedule", "-p", info["li2018_plugin"], "-s", "Li2018",
           "-o", str(out_dir), f"target={target}", "auto_schedule=true"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "Li2018 took more than 600 s"
    if r.returncode == 0:
        return ""
    msg = (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()
    return " ".join(msg[-6:])[:1000]


# --------------------------------------------------------------------------------------------
# Commands

def parse_shapes(specs, space):
    out = {}
    for spec in specs or []:
        if "=" not in spec:
            raise TuneError(f"--shape '{spec}': expected MODEL=N,C,... (e.g. p24=2,3,24,32,32)")
        model, dims = spec.split("=", 1)
        try:
            shape = [int(x) for x in dims.split(",") if x]
        except ValueError:
            raise TuneError(f"--shape '{spec}': sizes must be integers") from None
        libs = [l for l, s in space.items() if s.model == model]
        if not libs:
            raise TuneError(f"--shape '{spec}': unknown model {model}")
        for l in libs:
            if len(shape) != len(space[l].shape):
                raise TuneError(f"--shape '{spec}': {model} takes {len(space[l].shape)} sizes")
            out[l] = shape
    return out


def selected_libs(space, models):
    if not models or models == "all":
        libs = list(space)
    else:
        want = [m.strip() for m in models.split(",") if m.strip()]
        libs = [l for l in space if space[l].model in want or l in want]
        missing = [m for m in want if not any(space[l].model == m or l == m for l in space)]
        if missing:
            raise TuneError(f"unknown models {missing}; the search space has "
                            f"{sorted({s.model for s in space.values()})}")
    return sorted(libs, key=lambda l: (MODEL_ORDER.index(space[l].model)
                                       if space[l].model in MODEL_ORDER else 99, l))


def plan_round(st, space, libs, cap, seed, grid_max, top, explore, shapes, drop_pending=False):
    """Adds round k's new candidates to the state (pending first, then new picks up to cap).

    Returns (round number, {lib: [candidate ids of the round]}). The round number stays when the
    latest round has no measurement yet (it is being regenerated, e.g. with other flags).
    """
    last = st["rounds"][-1] if st["rounds"] else None
    measured_in_last = last is not None and any(
        s.get("round") == last["round"] for s in st["sessions"].values())
    round_no = 1 if last is None else (last["round"] + 1 if measured_in_last else last["round"])
    picks = {}
    for lib in libs:
        s = space[lib]
        old = st["libs"].get(lib)
        ls = lib_state(st, lib, shapes.get(lib) or (old["shape"] if old else s.shape))
        if drop_pending:
            for cid in [cid for cid, c in ls["candidates"].items() if c["status"] == "pending"]:
                del ls["candidates"][cid]
        pending = sorted(cid for cid, c in ls["candidates"].items() if c["status"] == "pending")
        ids = pending[:cap]
        rng = random.Random(f"{seed}/{lib}/{round_no}")
        for point, mode, parent in select_candidates(s, ls, cap - len(ids), rng, reference_point(s),
                                                     grid_max, top, explore):
            cid = f"c{ls['next_id']:03d}"
            ls["next_id"] += 1
            ls["candidates"][cid] = {"params": point, "round": round_no, "mode": mode,
                                     "parent": parent, "status": "pending"}
            ids.append(cid)
        for cid in ids:
            ls["candidates"][cid]["round"] = round_no
        picks[lib] = ids
    return round_no, picks


def cmd_round(args):
    space, state_path, st = open_work(args)
    errors, warnings = check_space_against_headers(space)
    for w in warnings:
        log("warning: " + w)
    if errors:
        raise TuneError("search space does not match the schedules:\n  " + "\n  ".join(errors))
    work = state_path.parent
    st = st or new_state(args.seed, "cpu" if args.smoke_cpu else "gpu")
    if st.get("target", "gpu") != ("cpu" if args.smoke_cpu else "gpu"):
        raise TuneError(f"{state_path} is a {'--smoke-cpu' if st.get('target') == 'cpu' else 'GPU'} "
                        f"tuning state; use another --work directory")
    if args.smoke_cpu:
        args.li2018 = False
    if args.seed is not None and args.seed != st["seed"]:
        log(f"note: this state was started with --seed {st['seed']}; keeping it")
    libs = selected_libs(space, args.models)
    shapes = parse_shapes(args.shape, space)
    if args.smoke_cpu:  # CPU libraries are slow at the default shapes: batch 1 unless given
        for lib in libs:
            shapes.setdefault(lib, [1] + space[lib].shape[1:])
    ident = source_identity()
    if st["rounds"] and st["rounds"][-1].get("source_hash") != ident["source_hash"]:
        log(f"warning: schedules/ or generators/ changed since round {st['rounds'][-1]['round']} "
            f"(source hash {st['rounds'][-1].get('source_hash')} -> {ident['source_hash']}); earlier "
            f"measurements were taken with the older code. Start a new --work to discard them.")
    round_no, picks = plan_round(st, space, libs, args.cap, st["seed"], args.grid_max, args.top,
                                 args.explore, shapes, args.drop_pending)
    # A library is in the round when it has candidates, or Li2018 still to measure.
    libs = [l for l in libs if picks[l] or (args.li2018 and li2018_wanted(st["libs"][l], ident))]
    for lib in libs:
        s, ls = space[lib], st["libs"][lib]
        modes = {}
        for cid in picks[lib]:
            modes[ls["candidates"][cid]["mode"]] = modes.get(ls["candidates"][cid]["mode"], 0) + 1
        total = len(s.all_points())
        done = sum(1 for c in ls["candidates"].values() if c["status"] != "pending")
        log(f"{lib}: round {round_no}: {len(picks[lib])} candidates "
            f"({', '.join(f'{v} {k}' for k, v in sorted(modes.items())) or 'space exhausted'}); "
            f"{done} measured of {total} valid points ({s.product_size()} before constraints)")
    token = hashlib.sha256(json.dumps([round_no, picks, ident], sort_keys=True).encode()).hexdigest()[:12]
    rnd = {"round": round_no, "created": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "token": token, "candidates": picks, **ident, "cap": args.cap}
    if st["rounds"] and st["rounds"][-1]["round"] == round_no:
        st["rounds"][-1] = rnd
    else:
        st["rounds"].append(rnd)
    save_state(state_path, st)
    if not libs:
        log("nothing left to measure: every valid point of the selected models is measured")
        return 0
    if args.no_build:
        write_project(work / "gen", space, st, round_no, libs, set(), {}, ident, token)
        log(f"wrote {work / 'gen'} (not built: --no-build)")
        return 0
    build_round(args, work, space, st, state_path, round_no, libs, ident, token)
    return 0


def li2018_wanted(ls, ident):
    """Li2018 is in a round until it was measured with the current sources."""
    li = ls.get("li2018") or {}
    return not (li.get("source_hash") == ident["source_hash"] and li.get("session"))


def build_round(args, work, space, st, state_path, round_no, libs, ident, token):
    gen, build = work / "gen", work / "build"
    li_ok, li_failed = set(), {}
    for lib in libs:
        li = st["libs"][lib].get("li2018", {})
        if args.li2018 and li2018_wanted(st["libs"][lib], ident) and li.get("source_hash") == ident["source_hash"]:
            if li.get("build") == "ok":
                li_ok.add(lib)
            elif li.get("build") == "failed":
                li_failed[lib] = li.get("build_error", "")
    write_project(gen, space, st, round_no, libs, li_ok, li_failed, ident, token)
    jobs = str(args.jobs or os.cpu_count() or 2)
    if not (build / "CMakeCache.txt").exists():
        run_cmd(["cmake", "-S", gen, "-B", build, "-G", "Unix Makefiles",
                 "-DCMAKE_BUILD_TYPE=Release"], "configuring the tuning build")
    else:
        run_cmd(["cmake", build], "configuring the tuning build")
    if args.li2018:
        run_cmd(["cmake", "--build", build, "--target", "fusedconv_generators", "-j", jobs],
                "building the generator")
        info = json.loads((build / "tune_build_info.json").read_text())
        changed = False
        for lib in libs:
            li = st["libs"][lib].setdefault("li2018", {})
            if not li2018_wanted(st["libs"][lib], ident):
                continue
            if li.get("source_hash") == ident["source_hash"] and li.get("build") in ("ok", "failed"):
                continue
            err = probe_li2018(info, space[lib], work / "li2018" / lib)
            li.update({"source_hash": ident["source_hash"], "build": "failed" if err else "ok",
                       "build_error": err})
            for k in ("status", "session", "median_ms", "min_ms", "error", "max_abs_diff",
                      "default_median_ms"):
                li.pop(k, None)  # a new build is measured again
            log(f"{lib}: Li2018 " + (f"cannot schedule it: {err}" if err else
                                     f"scheduled it ({work / 'li2018' / lib})"))
            if err:
                li_failed[lib] = err
            else:
                li_ok.add(lib)
            changed = True
        if changed:
            save_state(state_path, st)
            write_project(gen, space, st, round_no, libs, li_ok, li_failed, ident, token)
            run_cmd(["cmake", build], "configuring the tuning build")
    # Keep going past candidate libraries that fail to compile: each is a failed candidate.
    for attempt in range(3):
        r = run_cmd(["cmake", "--build", build, "--target", "fusedconv_tune", "-j", jobs, "--", "-k"],
                    "building the tuning binary", capture=True)
        if r.returncode == 0:
            break
        failed = []
        for lib in libs:
            for cid in st["rounds"][-1]["candidates"].get(lib, []):
                c = st["libs"][lib]["candidates"][cid]
                fn = f"fusedconv_tune_{lib}_{cid}"
                if c["status"] == "pending" and not (build / f"{fn}.o").exists():
                    failed.append((lib, cid, fn))
        if not failed:
            raise TuneError("building the tuning binary failed (not in a candidate library; see above)")
        for lib, cid, fn in failed:
            rr = subprocess.run(["cmake", "--build", str(build), "--target", f"{fn}.update"],
                                capture_output=True, text=True)
            out = [l.strip() for l in (rr.stdout + rr.stderr).splitlines()
                   if l.strip() and not re.match(r"^g?make(\[\d+\])?:", l.strip())]
            lines = [l for l in out if "rror" in l or "nhandled" in l] or out[-3:]
            err = " ".join(lines[:4])[:1000]
            c = st["libs"][lib]["candidates"][cid]
            c.update({"status": "failed", "phase": "build", "error": err})
            log(f"{lib} {cid} ({space[lib].key(c['params'])}): does not compile: {err}")
        save_state(state_path, st)
        write_project(gen, space, st, round_no, libs, li_ok, li_failed, ident, token)
        run_cmd(["cmake", build], "configuring the tuning build")
    else:
        raise TuneError("building the tuning binary failed three times")
    info = json.loads((build / "tune_build_info.json").read_text())
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    dest = bin_dir / "fusedconv_tune"
    shutil.copy2(info["tune_binary"], dest)
    if shutil.which("strip"):
        subprocess.run(["strip", str(dest)], check=False)
    st["rounds"][-1]["built"] = True
    st["rounds"][-1]["binary"] = str(dest)
    save_state(state_path, st)
    n = sum(1 for lib in libs for cid in st["rounds"][-1]["candidates"].get(lib, [])
            if st["libs"][lib]["candidates"][cid]["status"] == "pending")
    rel = os.path.relpath(dest, REPO) if dest.is_relative_to(REPO) else str(dest)
    log(f"\nround {round_no}: {dest} ({dest.stat().st_size / 1e6:.1f} MB), {n} candidates"
        f"{' + li2018' if li_ok else ''}.\nOn the GPU machine:\n  {rel} --log tune-round{round_no}.jsonl\n"
        f"then here:\n  python3 bench/tune/tune.py ingest tune-round{round_no}.jsonl"
        + (f" --work {args.work}" if Path(args.work).resolve() != DEFAULT_WORK else ""))


def read_log(path):
    records, bad = [], 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(r, dict):
                records.append(r)
            else:
                bad += 1
    return records, bad


def ingest_records(st, space, records):
    """Applies log records to the state; returns counts. Re-ingesting the same log is a no-op."""
    counts = {"candidates": 0, "defaults": 0, "li2018": 0, "skipped": 0}
    sessions = {r["session"]: r for r in records if r.get("type") == "session" and "session" in r}
    for sid, s in sessions.items():
        dev = s.get("device")
        if st["device"] is None:
            st["device"] = dev
            st["slug"] = s.get("slug") or slug(dev)
        elif dev != st["device"]:
            raise TuneError(f"this state holds measurements on {st['device']}; the log is from {dev}. "
                            f"Use another --work directory per GPU.")
        st["sessions"].setdefault(sid, {k: s.get(k) for k in (
            "device", "slug", "date", "time", "round", "token", "commit", "source_hash", "reps",
            "warmup", "simulated", "smoke") if k in s})
    for r in records:
        if r.get("type") != "measurement":
            continue
        lib, system = r.get("lib"), r.get("system")
        if lib not in st["libs"]:
            counts["skipped"] += 1
            continue
        ls = st["libs"][lib]
        if list(r.get("shape", [])) != list(ls["shape"]):
            counts["skipped"] += 1  # another shape (--shape on the binary): not this tuning's
            continue
        if r.get("session") not in st["sessions"]:
            raise TuneError(f"measurement of {lib} {r.get('id')} names session {r.get('session')}, "
                            f"which has no session record in the log")
        if system == "default":
            if r.get("status") == "ok" and not any(d["session"] == r["session"] for d in ls["defaults"]):
                ls["defaults"].append({"session": r["session"], "median_ms": r.get("median_ms"),
                                       "min_ms": r.get("min_ms"), "params": r.get("params"),
                                       "round": r.get("round")})
                counts["defaults"] += 1
        elif system == "candidate":
            cid = r.get("id")
            c = ls["candidates"].get(cid)
            if c is None:
                raise TuneError(f"{lib} {cid}: not a candidate of this state (a log from another --work?)")
            if space.get(lib) and space[lib].key(c["params"]) != space[lib].key(r.get("params", {})):
                raise TuneError(f"{lib} {cid}: the log's params {r.get('params')} are not the state's "
                                f"{c['params']} (a binary of another state?)")
            if c["status"] != "pending":
                continue
            c["status"] = "ok" if r.get("status") == "ok" else "failed"
            c["phase"] = "run"
            for k in ("median_ms", "min_ms", "reps", "cut_short", "max_abs_diff", "first_call_ms",
                      "default_median_ms", "session", "error"):
                if k in r:
                    c[k] = r[k]
            c["result"] = r.get("status")
            counts["candidates"] += 1
        elif system == "li2018":
            li = ls.setdefault("li2018", {})
            if li.get("session"):
                continue
            li.update({"status": r.get("status"), "session": r.get("session")})
            for k in ("median_ms", "min_ms", "error", "max_abs_diff", "default_median_ms"):
                if k in r:
                    li[k] = r[k]
            counts["li2018"] += 1
    return counts


def slug(name):
    """The results files' device slug (bench/results_io.py, bench/results.cpp)."""
    return results_io.slug(name or "")


def r4(x):
    return None if x is None else round(float(x), 4)


def tuned_document(st, space):
    """The tuned-parameters file: per library the best measured params and how they compare."""
    sessions = st["sessions"]
    latest = list(sessions.values())[-1] if sessions else {}
    ident = {"commit": latest.get("commit") or "unknown", "dirty": False,
             "source_hash": latest.get("source_hash")}
    doc = {
        "description": "GPU schedule parameters tuned by bench/tune/tune.py; used by "
                       "cmake -DFUSEDCONV_TUNED=<this file> (generators/CMakeLists.txt). "
                       "gain = default_median_ms / median_ms, both from the same run.",
        "device": st["device"],
        "slug": st.get("slug") or slug(st["device"]),
        "date": datetime.date.today().isoformat(),
        "commit": ident["commit"] + ("+dirty" if ident["dirty"] else ""),
        "source_hash": ident["source_hash"],
        "commit_note": "commit (+dirty: schedules/ or generators/ had changes) and source hash the "
                       "latest measurements were built from; each library's 'measured' says its own",
        "libraries": {},
    }
    if any(s.get("simulated") or s.get("smoke") for s in sessions.values()):
        doc["simulated"] = True
        doc["description"] += (" SIMULATED or CPU smoke-test timings (tune.py simulate / --smoke-cpu): "
                               "not GPU measurements.")
    for lib, ls in st["libs"].items():
        s = space.get(lib)
        defaults = [d for d in ls["defaults"] if d.get("median_ms") is not None]
        if not defaults or s is None:
            continue
        ok = [(c["median_ms"], cid, c) for cid, c in ls["candidates"].items()
              if c["status"] == "ok" and c.get("median_ms") is not None]
        ok.sort(key=lambda t: (t[0], t[1]))
        def_by_session = {d["session"]: d for d in defaults}
        ref = reference_point(s)
        n_measured = sum(1 for c in ls["candidates"].values() if c["status"] != "pending")
        n_failed = sum(1 for c in ls["candidates"].values() if c["status"] == "failed")
        best_def = min(defaults, key=lambda d: d["median_ms"])
        if ok and ok[0][0] < def_by_session.get(ok[0][2].get("session"), best_def)["median_ms"]:
            med, cid, c = ok[0]
            d = def_by_session.get(c.get("session"), best_def)
            entry = {"params": {n: c["params"][n] for n in s.names}, "candidate": cid,
                     "median_ms": r4(med), "min_ms": r4(c.get("min_ms")),
                     "default_median_ms": r4(d["median_ms"]),
                     "gain": round(d["median_ms"] / med, 4)}
        else:
            d = best_def
            entry = {"params": built_point(s, d, ref), "candidate": "default",
                     "median_ms": r4(d["median_ms"]), "min_ms": r4(d.get("min_ms")),
                     "default_median_ms": r4(d["median_ms"]), "gain": 1.0,
                     "note": "no candidate beat the default"}
        entry["default_params"] = built_point(s, d, ref)
        entry["shape"] = ls["shape"]
        entry["candidates_measured"] = n_measured
        entry["candidates_failed"] = n_failed
        entry["rounds"] = len({c["round"] for c in ls["candidates"].values() if c["status"] != "pending"})
        sess = sessions.get((ok[0][2].get("session") if entry["candidate"] != "default"
                             else best_def["session"]), {})
        entry["measured"] = {"date": sess.get("date"), "commit": sess.get("commit"),
                             "source_hash": sess.get("source_hash")}
        li = ls.get("li2018") or {}
        if li.get("status") == "ok":
            entry["li2018"] = {"median_ms": r4(li.get("median_ms")), "min_ms": r4(li.get("min_ms")),
                               "default_median_ms": r4(li.get("default_median_ms"))}
        elif li.get("build") == "failed" or li.get("status"):
            entry["li2018"] = {"status": li.get("status") or "build_failed",
                               "error": li.get("error") or li.get("build_error")}
        doc["libraries"][lib] = entry
    return doc


def dumps_readable(doc):
    """JSON with one key per line down to each library's fields; small objects and lists inline."""
    def inline(v):
        return json.dumps(v)

    lines = ["{"]
    items = list(doc.items())
    for i, (k, v) in enumerate(items):
        end = "," if i + 1 < len(items) else ""
        if k == "libraries":
            lines.append(f' "libraries": {{')
            libs = list(v.items())
            for j, (lib, e) in enumerate(libs):
                lines.append(f"  {json.dumps(lib)}: {{")
                fields = list(e.items())
                for m, (fk, fv) in enumerate(fields):
                    lines.append(f"   {json.dumps(fk)}: {inline(fv)}" + ("," if m + 1 < len(fields) else ""))
                lines.append("  }" + ("," if j + 1 < len(libs) else ""))
            lines.append(" }" + end)
        else:
            lines.append(f" {json.dumps(k)}: {inline(v)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_tuned(st, space, out):
    doc = tuned_document(st, space)
    if not doc["libraries"]:
        log("no library has measurements yet; no tuned file written")
        return None
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps_readable(doc))
    log(f"wrote {out}")
    for lib, e in doc["libraries"].items():
        log(f"  {lib}: {e['candidate']} {e['median_ms']:.3f} ms vs default {e['default_median_ms']:.3f} ms "
            f"({e['gain']:.2f}x) {e['params']}")
    return out


def cmake_params(doc):
    """{lib: 'name=value;name=value'} as generators/tuned_params.cmake reads them (sorted by name)."""
    return {lib: ";".join(f"{k}={fmt_value(v)}" for k, v in sorted(e["params"].items()))
            for lib, e in doc["libraries"].items()}


def tuned_out_path(args, st):
    if args.tuned:
        return Path(args.tuned)
    if st.get("target") == "cpu" or any(s.get("simulated") or s.get("smoke") for s in st["sessions"].values()):
        raise TuneError("the state holds simulated or CPU smoke-test timings: give --tuned PATH "
                        "(outside schedules/tuned/)")
    return TUNED_DIR / f"{st.get('slug') or slug(st['device'])}.json"


def check_state_params(st, space, path):
    """A state whose candidates name other params than the search space (a schedule got new
    parameters since) cannot be refined or compared: refuse it, saying so."""
    for lib, ls in st["libs"].items():
        if lib not in space:
            continue
        want = set(space[lib].names)
        for cid, cand in ls["candidates"].items():
            have = set(cand["params"])
            if have != want:
                raise TuneError(
                    f"{path}: {lib} candidate {cid} has params {sorted(have)}, but the search space "
                    f"now has {sorted(want)}; its measurements belong to an older schedule. "
                    f"Start a new --work directory.")


def open_work(args):
    """The search spaces, the state file's path in the work directory, and its state (None
    if there is none yet)."""
    state_path = Path(args.work).resolve() / "state.json"
    space, st = load_space(args.space), load_state(state_path)
    if st is not None:
        check_state_params(st, space, state_path)
    return space, state_path, st


def cmd_ingest(args):
    space, state_path, st = open_work(args)
    if st is None:
        raise TuneError(f"no state at {state_path}: run `tune.py round` first (same --work)")
    for path in args.logs:
        records, bad = read_log(path)
        if bad:
            log(f"{path}: {bad} unreadable line(s) skipped (an interrupted write)")
        counts = ingest_records(st, space, records)
        log(f"{path}: {counts['candidates']} candidates, {counts['defaults']} default timings, "
            f"{counts['li2018']} li2018 ingested; {counts['skipped']} records of other shapes/libraries skipped")
    save_state(state_path, st)
    print_status(st, space)
    if not args.no_tuned and st["device"]:
        write_tuned(st, space, tuned_out_path(args, st))
    return 0


def print_status(st, space):
    log(f"device: {st['device'] or '(nothing measured yet)'}; rounds: {len(st['rounds'])}")
    for lib, ls in st["libs"].items():
        s = space.get(lib)
        c = ls["candidates"].values()
        ok = [x for x in c if x["status"] == "ok"]
        best = min(ok, key=lambda x: x["median_ms"]) if ok else None
        dm = min((d["median_ms"] for d in ls["defaults"] if d.get("median_ms") is not None), default=None)
        total = len(s.all_points()) if s else "?"
        li = ls.get("li2018") or {}
        li_s = (f"{li['median_ms']:.3f} ms" if li.get("status") == "ok" and li.get("median_ms") is not None
                else li.get("status") or ("build failed" if li.get("build") == "failed" else "-"))
        log(f"  {lib} {shape_str(ls['shape'])}: {len(ok)} ok, "
            f"{sum(1 for x in c if x['status'] == 'failed')} failed, "
            f"{sum(1 for x in c if x['status'] == 'pending')} pending of {total} valid; default "
            f"{'%.3f ms' % dm if dm is not None else '-'}; best "
            f"{'%.3f ms %s' % (best['median_ms'], s.key(best['params']) if s else best['params']) if best else '-'}; "
            f"li2018 {li_s}")


def cmd_status(args):
    space, _, st = open_work(args)
    if st is None:
        log("no state yet")
        return 0
    print_status(st, space)
    return 0


def cmd_tuned(args):
    space, _, st = open_work(args)
    if st is None or not st["device"]:
        raise TuneError("nothing measured yet")
    write_tuned(st, space, tuned_out_path(args, st))
    return 0


def cmd_check_space(args):
    space = load_space(args.space)
    errors, warnings = check_space_against_headers(space)
    for lib, s in space.items():
        ref = reference_point(s)
        v = s.violations(ref)
        log(f"{lib}: {len(s.all_points())} valid points of {s.product_size()}; default "
            f"{s.key(ref)}" + (f" violates {[x[0] for x in v]}" if v else ""))
    for w in warnings:
        log("warning: " + w)
    for e in errors:
        log("error: " + e)
    return 1 if errors else 0


def cmd_check_aliases(args):
    """Each alias must build the library that its value builds, and no other value's.

    search_space.json says, for instance, that gpu_winograd_taps "auto" builds p25's "points"
    library; the schedule (C++) decides what "auto" does. This runs the generator for every
    value of each param that has aliases (the other params at their defaults) and compares
    the lowered statements, so the two cannot drift apart unnoticed."""
    space = load_space(args.space)
    failures, checked = [], 0
    with tempfile.TemporaryDirectory(prefix="tune-aliases-") as tmp:
        for lib, s in space.items():
            for name in s.names:
                if not s.aliases[name]:
                    continue
                stmts = {}
                for value in sorted(set(s.values[name]) | set(s.aliases[name])):
                    out = Path(tmp) / f"{lib}-{name}-{value}"
                    out.mkdir()
                    run_cmd([args.generator, "-g", s.generator, "-f", "f", "-e", "stmt", "-o", out,
                             f"target={args.target}", f"{name}={value}"],
                            f"{lib}: the generator with {name}={value}")
                    stmts[value] = (out / "f.stmt").read_text()
                for alias, target in s.aliases[name].items():
                    checked += 1
                    same = stmts[alias] == stmts[target]
                    also = [v for v in s.values[name] if v != target and stmts[v] == stmts[alias]]
                    ok = same and not also
                    log(f"{lib}: {name}={alias} builds {name}={target}: "
                        + ("yes" if ok else "NO" if not same else f"yes, but also {also}"))
                    if not ok:
                        failures.append(f"{lib} {name}={alias}")
    if failures:
        log(f"error: aliases that do not build what search_space.json says: {failures}")
        return 1
    log(f"{checked} aliases checked")
    return 0


def cmd_cmake_args(args):
    doc = json.loads(Path(args.file).read_text())
    for lib, p in cmake_params(doc).items():
        print(f'-DFUSEDCONV_PARAMS_{lib}="{p}"')
    return 0


def cmd_simulate(args):
    """A fake log for the pending candidates (to exercise ingest and later rounds without a GPU)."""
    space, _, st = open_work(args)
    if st is None or not st["rounds"]:
        raise TuneError("no round yet")
    rnd = st["rounds"][-1]
    rng = random.Random(f"simulate/{rnd['round']}")
    sid = f"simulated-{rnd['round']}-{rng.randrange(1 << 24):06x}"
    day = datetime.date.today().isoformat()
    recs = [{"type": "session", "session": sid, "device": args.device, "slug": slug(args.device),
             "date": day, "round": rnd["round"], "token": rnd["token"], "commit": rnd["commit"] + ("+dirty" if rnd.get("dirty") else ""),
             "source_hash": rnd["source_hash"], "reps": 20, "warmup": 3, "simulated": True}]

    def cost(s, p):  # smooth synthetic cost with a minimum away from the default
        c = 1.0
        for i, n in enumerate(s.names):
            vals = s.values[n]
            j = vals.index(p[n]) if p[n] in vals else 0
            target = (len(vals) - 1) * (0.3 + 0.4 * ((i * 7) % 3) / 2)
            c += 0.15 * (j - target) ** 2
        return round(c * (1 + 0.02 * rng.random()), 4)

    for lib, ids in rnd["candidates"].items():
        s, ls = space[lib], st["libs"][lib]
        base = {"type": "measurement", "session": sid, "round": rnd["round"], "lib": lib,
                "model": s.model, "shape": ls["shape"], "device": args.device, "date": day}
        ref = reference_point(s)
        dms = cost(s, ref)
        recs.append({**base, "system": "default", "id": "default", "params": ref, "status": "ok",
                     "median_ms": dms, "min_ms": dms * 0.98})
        for cid in ids:
            c = ls["candidates"][cid]
            if c["status"] != "pending":
                continue
            r = {**base, "system": "candidate", "id": cid, "params": c["params"]}
            if rng.random() < 0.05:
                r.update({"status": "error", "error": "simulated Halide error"})
            else:
                ms = cost(s, c["params"])
                r.update({"status": "ok", "median_ms": ms, "min_ms": ms * 0.98,
                          "default_median_ms": dms, "max_abs_diff": 0.0})
            recs.append(r)
        if (ls.get("li2018") or {}).get("build") == "ok":
            recs.append({**base, "system": "li2018", "id": "li2018", "params": {}, "status": "ok",
                         "median_ms": dms * 3, "min_ms": dms * 2.9, "default_median_ms": dms})
    with open(args.log, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    log(f"wrote {len(recs)} SIMULATED records to {args.log}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(DEFAULT_WORK),
                    help="tuning directory: state.json, gen/, build/, bin/ (default: %(default)s)")
    ap.add_argument("--space", default=str(SPACE_FILE), help="search space (default: %(default)s)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("round", help="pick the next round's candidates and build the tuning binary")
    r.add_argument("--models", default="all", help="comma-separated models (p24,p25,p32,p83) or libraries")
    r.add_argument("--cap", type=int, default=24, help="candidates per model library per round (default 24)")
    r.add_argument("--seed", type=int, default=None, help="seed of the sampling (fixed when the state is created; default 0)")
    r.add_argument("--grid-max", type=int, default=32,
                   help="a constrained space of at most this many points is searched exhaustively (default 32)")
    r.add_argument("--top", type=int, default=3, help="refine around this many best points (default 3)")
    r.add_argument("--explore", type=float, default=0.25,
                   help="fraction of a refinement round sampled at random (default 0.25)")
    r.add_argument("--shape", action="append", help="tune MODEL at this input shape, e.g. p24=2,3,24,32,32")
    r.add_argument("--no-li2018", dest="li2018", action="store_false",
                   help="leave out the Li2018-autoscheduled libraries")
    r.add_argument("--drop-pending", action="store_true",
                   help="forget candidates generated but never measured instead of carrying them over")
    r.add_argument("--no-build", action="store_true", help="write the generated project only")
    r.add_argument("--smoke-cpu", action="store_true",
                   help="check the whole flow without a GPU: candidates compiled for the CPU (their gpu_* "
                        "params are then unused), batch-1 shapes, no Li2018; needs its own --work; its logs "
                        "are never written to schedules/tuned/")
    r.add_argument("-j", "--jobs", type=int, default=0, help="parallel build jobs (default: all cores)")
    r.set_defaults(func=cmd_round)

    i = sub.add_parser("ingest", help="record a tuning binary's log; write the tuned file")
    i.add_argument("logs", nargs="+", help="JSON-lines logs written by fusedconv_tune --log")
    i.add_argument("--tuned", help="tuned file to write (default schedules/tuned/<device slug>.json)")
    i.add_argument("--no-tuned", action="store_true", help="only update the state")
    i.set_defaults(func=cmd_ingest)

    s = sub.add_parser("status", help="what is measured, pending, best")
    s.set_defaults(func=cmd_status)

    t = sub.add_parser("tuned", help="(re)write the tuned file from the state")
    t.add_argument("--tuned", help="output (default schedules/tuned/<device slug>.json)")
    t.set_defaults(func=cmd_tuned)

    c = sub.add_parser("check-space", help="validate search_space.json against the schedules' headers")
    c.set_defaults(func=cmd_check_space)

    k = sub.add_parser("check-aliases",
                       help="check that each alias builds the library its value builds (runs the generator)")
    k.add_argument("--generator", required=True, help="the fusedconv_generators binary")
    k.add_argument("--target", required=True, help="Halide target, e.g. <FUSEDCONV_CUDA_TARGET>-no_runtime")
    k.set_defaults(func=cmd_check_aliases)

    a = sub.add_parser("cmake-args", help="print -DFUSEDCONV_PARAMS_<lib>=... for a tuned file")
    a.add_argument("file")
    a.set_defaults(func=cmd_cmake_args)

    m = sub.add_parser("simulate", help="write a SIMULATED log for the latest round (testing without a GPU)")
    m.add_argument("--log", required=True)
    m.add_argument("--device", default="Simulated GPU")
    m.set_defaults(func=cmd_simulate)

    args = ap.parse_args(argv)
    if getattr(args, "seed", 0) is None:
        args.seed = 0 if not (Path(args.work).resolve() / "state.json").exists() else None
    try:
        return args.func(args)
    except TuneError as e:
        print(f"tune.py: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
