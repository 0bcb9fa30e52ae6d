"""`tune.py round`: pick the next round's candidates per library, record them in the state,
and write (and build) the tuning project."""

import datetime
import hashlib
import json
import random

from .build import build_round, li2018_wanted
from .headers import check_space_against_headers, reference_point
from .messages import TuneError, log
from .project import write_project
from .selection import select_candidates
from .source import source_identity
from .state import lib_state, new_state, open_work, save_state

MODEL_ORDER = ["p24", "p25", "p32", "p83"]


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
    if args.smoke_cpu:
        skipped = [l for l in libs if space[l].cuda_only]
        if skipped:
            log(f"--smoke-cpu: leaving out {', '.join(skipped)}, which compile for CUDA only")
        libs = [l for l in libs if not space[l].cuda_only]
        if not libs:
            raise TuneError("--smoke-cpu: every selected library compiles for CUDA only")
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
    libs = [l for l in libs if picks[l] or (args.li2018 and space[l].li2018 and li2018_wanted(st["libs"][l], ident))]
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
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rnd = {"round": round_no, "created": created,
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
