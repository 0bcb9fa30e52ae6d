#!/usr/bin/env python3
"""Copies a tuned file's measurements into the shared results file, so the
benchmark table shows Halide's Li2018 autoscheduler next to the hand-default
and tuned schedules.

    python3 bench/tune/export_results.py schedules/tuned/nvidia-h200.json

Each library's "li2018" timing (measured in the same tuning run as its default
and best candidate, with outputs checked against the default schedule) becomes
a record of system "halide-li2018" in bench/results/<slug>.json. Records of the
harness's own systems are not touched: the harness times those itself.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results_io  # noqa: E402


def li2018_records(tuned):
    records = []
    for lib, entry in sorted(tuned.get("libraries", {}).items()):
        li = entry.get("li2018")
        if not li or li.get("median_ms") is None:
            continue
        measured = entry.get("measured", {})
        records.append({
            "problem": lib.split("_")[0],
            "system": "halide-li2018",
            "shape": entry["shape"],
            "median_ms": li["median_ms"],
            "min_ms": li.get("min_ms"),
            "max_abs_err_vs_fp64": None,
            "peak_device_mem_mb": None,
            "device": tuned["device"],
            "date": measured.get("date", tuned.get("date")),
            "commit": measured.get("commit", tuned.get("commit", "unknown")),
            "note": "Halide 14 Li2018 GPU autoscheduler, timed by the tuning binary; output "
                    "equal to the default schedule's (so its float64 error is the halide "
                    "record's); the timing stops early once it is far slower than the default",
        })
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tuned", help="schedules/tuned/<slug>.json")
    ap.add_argument("--results", help="results file (default bench/results/<slug>.json)")
    args = ap.parse_args()
    with open(args.tuned) as f:
        tuned = json.load(f)
    path = args.results or results_io.default_results_path(tuned["device"])
    records = li2018_records(tuned)
    results_io.merge_into(path, records)
    print("merged %d halide-li2018 record(s) into %s" % (len(records), path))


if __name__ == "__main__":
    main()
