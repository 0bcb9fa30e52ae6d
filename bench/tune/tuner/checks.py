"""`tune.py check-space` and `tune.py check-aliases`: the search space against the schedules'
headers, and its aliases against what the generator builds."""

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .headers import check_space_against_headers, reference_point
from .messages import log
from .process import run_cmd
from .space import fmt_value, load_space


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
        # Every (library, param, value) to build, the other params at their defaults; the
        # generator runs side by side (each is one process, mostly lowering: 14 of them take
        # minutes under ASan).
        jobs = []
        for lib, s in space.items():
            fixed = [f"{k}={fmt_value(v)}" for k, v in s.fixed.items()]
            for name in s.names:
                if not s.aliases[name]:
                    continue
                for value in sorted(set(s.values[name]) | set(s.aliases[name])):
                    # A value the constraints refuse beside the other defaults cannot be built.
                    if not s.buildable({**s.default, name: value}):
                        continue
                    out = Path(tmp) / f"{lib}-{name}-{value}"
                    out.mkdir()
                    jobs.append(((lib, name, value), out,
                                 [args.generator, "-g", s.generator, "-f", "f", "-e", "stmt", "-o",
                                  out, f"target={args.target}", *fixed, f"{name}={value}"]))

        def build(job):
            (lib, name, value), out, cmd = job
            run_cmd(cmd, f"{lib}: the generator with {name}={value}")
            return (lib, name, value), (out / "f.stmt").read_text()

        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            stmts = dict(pool.map(build, jobs))
        for lib, s in space.items():
            for name in s.names:
                mine = {v: t for (l, n, v), t in stmts.items() if l == lib and n == name}
                for alias, target in s.aliases[name].items():
                    checked += 1
                    same = mine[alias] == mine[target]
                    also = [v for v in mine if v not in (alias, target) and v in s.values[name]
                            and mine[v] == mine[alias]]
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
