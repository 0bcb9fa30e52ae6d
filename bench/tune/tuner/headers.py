"""The search spaces against the schedules' headers: the GeneratorParams each declares, and the
params the reference (default) library is built with."""

import re
from pathlib import Path

from .paths import REPO


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
        for n in list(s.fixed) + s.unused:
            if n not in hp:
                errors.append(f"{lib}: fixed or unused param {n} is not a GeneratorParam in {s.header}")
        for n in s.names:
            if n not in hp:
                errors.append(f"{lib}: param {n} is not a GeneratorParam in {s.header}")
            elif hp[n] != s.default[n]:
                warnings.append(f"{lib}: {n} default is {s.default[n]} in search_space.json but "
                                f"{hp[n]} in {s.header}; the reference uses {hp[n]}")
        for n in hp:
            if n.startswith("gpu_") and n not in s.names and n not in s.fixed and n not in s.unused:
                warnings.append(f"{lib}: {s.header} declares {n}, which search_space.json does not "
                                f"list; it stays at its default")
    return errors, warnings


def reference_point(space_lib, repo=REPO):
    """The params the reference (default) library is built with: the header's defaults, and the
    library's fixed params."""
    point = dict(space_lib.default)
    point.update(space_lib.fixed)
    if space_lib.header and (repo / space_lib.header).exists():
        hp = header_params(repo / space_lib.header)
        for n in space_lib.names:
            if n in hp:
                point[n] = hp[n]
    return point
