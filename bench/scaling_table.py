#!/usr/bin/env python3
"""Renders bench/results/scaling-<slug>.json as a markdown table (bench/results/scaling-<slug>.md).

One row per (model, system, GPUs): samples/s and efficiency = samples/s with n GPUs /
(n x samples/s with 1 GPU of the same system), as fusedconv_scaling and torch_scaling.py
record them. Systems: halide-sharded (C++ sharded_forward_into, input and output on GPU 0,
shards copied peer to peer) and torchrun (one process per GPU, fusedconv.torch,
NCCL scatter and gather through GPU 0).

Usage: scaling_table.py RESULTS.json [-o OUT.md]   (default OUT: RESULTS with .md)
Standard library only.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io  # noqa: E402

DATA = {
    "halide-sharded": "one process, one thread per GPU (`fusedconv_scaling`); input and output on "
                      "GPU 0, other GPUs' shards copied there and back peer to peer (NVLink or PCIe)",
    "torchrun": "one process per GPU (`torchrun`, `fusedconv.torch`); input scattered from GPU 0 "
                "and output gathered to it with NCCL",
}


def _fmt_rate(v):
    return "%.1f" % v if v < 1000 else "{:,.0f}".format(v)


def render(records):
    """Markdown for a list of scaling records; raises ValueError naming a record that lacks a key."""
    records = list(records)
    if not records:
        raise ValueError("no scaling records to render")
    for r in records:
        results_io.validate(r, results_io.SCALING_KEYS)
    records.sort(key=lambda r: (str(r["problem"]), str(r["system"]), int(r["devices"])))
    devices = sorted({str(r["device"]) for r in records})
    dates = sorted({str(r["date"]) for r in records})
    commits = sorted({str(r["commit"]) for r in records})
    lines = [
        "# Data-parallel scaling: %s" % ", ".join(devices),
        "",
        "Measured %s from commit %s by `bench/run_scaling.sh`; samples/s is the batch over the "
        "median time of one whole-batch forward (data movement included), efficiency = samples/s "
        "with n GPUs / (n x samples/s with 1 GPU of the same system; n/a without that run)."
        % (" to ".join([dates[0], dates[-1]]) if len(dates) > 1 else dates[0], ", ".join(commits)),
        "",
        "| model | system | GPUs | batch | median ms | samples/s | efficiency |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        flag = "" if r.get("bit_identical_to_1", True) else " (output differs from 1 GPU!)"
        eff = "n/a" if r["efficiency"] is None else "%.2f" % float(r["efficiency"])
        lines.append("| %s | %s | %d | %d | %.3f | %s | %s%s |" % (
            r["problem"], r["system"], int(r["devices"]), int(r["batch"]), 1e3 * float(r["median_s"]),
            _fmt_rate(float(r["samples_per_s"])), eff, flag))
    lines.append("")
    for system in sorted({str(r["system"]) for r in records}):
        lines.append("- `%s`: %s." % (system, DATA.get(system, "see bench/README.md")))
    notes = sorted({"%s: %s" % (r["problem"], r["note"]) for r in records if r.get("note")})
    for n in notes:
        lines.append("- %s" % n)
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a scaling-<slug>.json file")
    ap.add_argument("-o", "--output", help="markdown file (default: the results path with .md)")
    args = ap.parse_args(argv)
    try:
        records = results_io.load(args.results)
        if not os.path.exists(args.results):
            raise ValueError("%s does not exist" % args.results)
        text = render(records)
    except (ValueError, OSError) as e:
        sys.exit("scaling_table.py: %s: %s" % (args.results, e))
    out = args.output or os.path.splitext(args.results)[0] + ".md"
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s (%d rows)" % (out, len(records)))


if __name__ == "__main__":
    main()
