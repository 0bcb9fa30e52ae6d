"""The search spaces (schedules/search_space.json): per library its params, their candidate
values and aliases, its constants and constraints, and the points they allow."""

import itertools
import json

from .expr import Expr
from .messages import TuneError
from .paths import SPACE_FILE

ENUMERATION_LIMIT = 200000  # larger products are sampled, never enumerated


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


def _typed_aliases(lib, name, aliases, values):
    """search_space.json's aliases of a param, keyed like its values: strings, or integers."""
    if not aliases:
        return {}
    if all(isinstance(v, str) for v in values):
        return dict(aliases)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        try:
            return {int(k): t for k, t in aliases.items()}
        except ValueError:
            raise TuneError(f"{lib}: param {name}: the aliases of an integer param must be "
                            f"integers, got {sorted(aliases)}") from None
    raise TuneError(f"{lib}: param {name}: aliases are for string- or integer-valued params only")


class LibSpace:
    """The search space of one library (p32_cuda): ordered params, constants, constraints."""

    def __init__(self, lib, spec):
        self.lib = lib
        self.model = spec.get("model", lib.split("_")[0])
        self.generator = spec["generator"]
        # The table's entry helper (tune_table.h: <entry>_entry) and so the function's signature:
        # the model's, unless the library has its own (p25_tc_cuda: "p25_tc").
        self.entry = spec.get("entry", self.model)
        # A library with no CPU build (the tensor-core forms): --smoke-cpu leaves it out.
        self.cuda_only = bool(spec.get("cuda_only", False))
        # Whether rounds build the Li2018-autoscheduled library too (false where the generator
        # has no estimates to give it, as the tensor-core forms).
        self.li2018 = bool(spec.get("li2018", True))
        self.header = spec.get("header", "")
        self.shape = list(spec.get("shape", []))
        self.constants = dict(spec.get("constants", {}))
        self.names = list(spec["params"])
        if not self.names:
            raise TuneError(f"{lib}: no params")
        # "fixed": GeneratorParams every build of this library takes at one value (p25_xy_cuda:
        # gpu_winograd_dims=xy, as generators/CMakeLists.txt builds it); "unused": the header's
        # gpu_* params that this library's schedule does not read (not searched, no warning).
        self.fixed = dict(spec.get("fixed", {}))
        self.unused = list(spec.get("unused", []))
        for n in self.fixed:
            if n in self.names:
                raise TuneError(f"{lib}: {n} is both a param and fixed")
        self.values = {n: expand_values(n, spec["params"][n]) for n in self.names}
        self.default = {n: spec["params"][n].get("default") for n in self.names}
        # "aliases": {value: candidate value}: a value that builds the same library as a
        # candidate (gpu_winograd_taps "auto" is one layout or the other), so that a point and
        # its alias are one point: not picked, built and timed twice.
        # An integer param's aliases are integers too (JSON object keys are strings: "0": 64
        # makes 0 stand for 64, as gpu_wino2d_max_cin 0 is the model's choice).
        self.aliases = {n: _typed_aliases(lib, n, spec["params"][n].get("aliases", {}),
                                          self.values[n]) for n in self.names}
        for n in self.names:
            if self.default[n] is None:
                raise TuneError(f"{lib}: param {n} has no default")
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
        # Constraints see what a value builds: an alias as the value it stands for.
        env = dict(self.constants)
        env.update({n: self.canonical_value(n, v) if n in self.aliases else v
                    for n, v in point.items()})
        return env

    def violations(self, point):
        env = self.env(point)
        return [(e.text, kind, why) for e, kind, why in self.constraints if not e.evaluate(env)]

    def valid(self, point):
        env = self.env(point)
        return all(e.evaluate(env) for e, _, _ in self.constraints)

    def buildable(self, point):
        """The hard constraints hold (prune constraints only keep a point from being picked)."""
        return all(kind != "hard" for _, kind, _ in self.violations(point))

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
        return ";".join([f"{n}={fmt_value(point[n])}" for n in self.names] +
                        [f"{n}={fmt_value(v)}" for n, v in self.fixed.items()])

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
