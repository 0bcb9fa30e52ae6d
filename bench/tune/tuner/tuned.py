"""The tuned file, schedules/tuned/<device slug>.json: per library the best measured params and
how they compare with the default; `tune.py tuned` and `tune.py cmake-args`."""

import datetime
import json
import sys
from pathlib import Path

from .headers import reference_point
from .messages import TuneError, log
from .paths import REPO, TUNED_DIR
from .space import fmt_value
from .state import built_point, open_work

sys.path.insert(0, str(REPO / "bench"))
import results_io  # noqa: E402  (bench/results_io.py: standard library only)


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


def kept_entries(out, doc):
    """The entries of an existing tuned file `out` for libraries this state did not measure (tuned
    in another work directory, e.g. p24_cuda before p25_xy_cuda was added), in its order; a file of
    another device is refused."""
    if not out.exists():
        return {}
    try:
        old = json.loads(out.read_text())
        libs = old["libraries"]
        if not isinstance(libs, dict):
            raise TypeError("\"libraries\" is not an object")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TuneError(f"{out} exists but is not a tuned file ({e}); move it away or give "
                        f"--tuned PATH") from None
    if old.get("device") != doc["device"]:
        raise TuneError(f"{out} holds {old.get('device')!r}'s parameters, these measurements are "
                        f"{doc['device']!r}'s; give --tuned PATH")
    return {lib: e for lib, e in libs.items() if lib not in doc["libraries"]}


def write_tuned(st, space, out):
    doc = tuned_document(st, space)
    if not doc["libraries"]:
        log("no library has measurements yet; no tuned file written")
        return None
    out = Path(out)
    kept = kept_entries(out, doc)
    if kept:
        doc["libraries"] = {**kept, **doc["libraries"]}
        log(f"{out}: kept as they were (not in this state): {', '.join(kept)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps_readable(doc))
    log(f"wrote {out}")
    for lib, e in doc["libraries"].items():
        if lib in kept:
            continue
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


def cmd_tuned(args):
    space, _, st = open_work(args)
    if st is None or not st["device"]:
        raise TuneError("nothing measured yet")
    write_tuned(st, space, tuned_out_path(args, st))
    return 0


def cmd_cmake_args(args):
    doc = json.loads(Path(args.file).read_text())
    for lib, p in cmake_params(doc).items():
        print(f'-DFUSEDCONV_PARAMS_{lib}="{p}"')
    return 0
