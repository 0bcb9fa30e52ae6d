"""`tune.py ingest`: read the tuning binary's JSON-lines logs and record their measurements in
the state."""

import json

from .messages import TuneError, log
from .state import open_work, save_state
from .status import print_status
from .tuned import slug, tuned_out_path, write_tuned


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
