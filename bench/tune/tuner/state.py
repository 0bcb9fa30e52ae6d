"""The resumable tuning state, <work>/state.json: every round, every candidate with its status
and timings, the default's timings per run, Li2018's result. Measured candidates stay
measured, so a round never rebuilds or reruns them."""

import json
import os
from pathlib import Path

from .messages import TuneError
from .space import load_space

STATE_VERSION = 1


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
