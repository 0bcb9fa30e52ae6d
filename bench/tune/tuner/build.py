"""Building a round: configure and build the generated project, have Li2018 schedule each
library first, mark the candidates that do not compile as failed, and copy the tuning binary
to <work>/bin/."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from .messages import TuneError, log
from .paths import DEFAULT_WORK, REPO
from .process import run_cmd
from .project import write_project
from .state import save_state


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


def li2018_wanted(ls, ident):
    """Li2018 is in a round until it was measured with the current sources."""
    li = ls.get("li2018") or {}
    return not (li.get("source_hash") == ident["source_hash"] and li.get("session"))


def build_round(args, work, space, st, state_path, round_no, libs, ident, token):
    gen, build = work / "gen", work / "build"
    li_ok, li_failed = set(), {}
    for lib in libs:
        li = st["libs"][lib].get("li2018", {})
        if args.li2018 and space[lib].li2018 and li2018_wanted(st["libs"][lib], ident) and li.get("source_hash") == ident["source_hash"]:
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
            if not space[lib].li2018:
                continue
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
