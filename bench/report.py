#!/usr/bin/env python3
"""Regenerates bench/results/<slug>.md and <slug>.png from bench/results/<slug>.json.

  python3 bench/report.py                          # every bench/results/*.json
  python3 bench/report.py bench/results/nvidia-h200.json [--out-dir DIR]

The Markdown file has two tables: median time per problem and system (with the ratio of
the Halide pipeline's time to the best PyTorch system's), and accuracy and memory per
problem and system. The PNG is a grouped bar chart of the times on a log scale, with each
problem's direct-convolution roofline floor drawn as a dashed line.

The chart needs matplotlib (Agg backend); without it the Markdown is still written and the
script says why there is no chart. Never needs torch.
"""

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io  # noqa: E402

# Direct-convolution floors on an NVIDIA H200 (../shared/PROBLEMS.md), ms, at the default shapes.
# A record of system "halide" that carries "floor_ms" overrides these for its (problem, shape).
DEFAULT_FLOORS_MS = {"p24": 0.15, "p25": 2.3, "p32": 9.1, "p83": 0.27}
DEFAULT_SHAPES = {
    "p24": (128, 3, 24, 32, 32),
    "p25": (128, 16, 256, 256),
    "p32": (64, 64, 256, 256),
    "p83": (128, 3, 16, 64, 64),
}

HALIDE = "halide"
ROUNDTRIP = "halide-cli-roundtrip"
TORCH_ORDER = ["torch-eager", "torch-eager-fp32", "torch-compile", "torch-compile-max-autotune"]


def system_sort_key(system):
    """halide, other halide-*, other systems (the C++ harness's cuDNN baselines), torch-*, round trip."""
    if system == HALIDE:
        return (0, 0, system)
    if system == ROUNDTRIP:
        return (4, 0, system)
    if system.startswith("halide"):
        return (1, 0, system)
    if system in TORCH_ORDER:
        return (3, TORCH_ORDER.index(system), system)
    if system.startswith("torch-"):
        return (3, len(TORCH_ORDER), system)
    return (2, 0, system)


def is_torch(system):
    return system.startswith("torch-")


def shape_tuple(rec):
    return tuple(int(d) for d in rec.get("shape") or ())


def shape_str(shape):
    return "x".join(str(d) for d in shape) if shape else "?"


def num(v):
    """v as a float, or None when it is missing or not a number."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None  # drop NaN


def fmt_ms(v):
    v = num(v)
    if v is None:
        return "-"
    if v < 1:
        return "%.3f" % v
    if v < 100:
        return "%.2f" % v
    return "%.1f" % v


def fmt_err(v):
    v = num(v)
    return "-" if v is None else "%.2e" % v


def fmt_mb(v):
    v = num(v)
    return "-" if v is None else "%.1f" % v


def md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def floors_for(records):
    """{(problem, shape): (floor_ms, source)} for every (problem, shape) in records."""
    floors = {}
    keys = {(r.get("problem"), shape_tuple(r)) for r in records}
    for problem, shape in keys:
        floor, source = None, None
        base = DEFAULT_FLOORS_MS.get(problem)
        default_shape = DEFAULT_SHAPES.get(problem)
        if base is not None and default_shape is not None and shape:
            if shape == default_shape:
                floor, source = base, "H200 estimate"
            elif shape[1:] == default_shape[1:] and shape[0] > 0:
                floor, source = base * shape[0] / default_shape[0], "H200 estimate, scaled by batch"
        floors[(problem, shape)] = (floor, source)
    for r in records:
        if r.get("system") == HALIDE and num(r.get("floor_ms")) is not None:
            floors[(r.get("problem"), shape_tuple(r))] = (num(r["floor_ms"]), "harness")
    return floors


def build_index(records):
    """rows: sorted (problem, shape); cell: {(problem, shape, system): record}."""
    cell = {}
    for r in records:
        cell[(r.get("problem"), shape_tuple(r), r.get("system"))] = r
    rows = sorted({(p, s) for p, s, _ in cell}, key=lambda k: (str(k[0]), k[1]))
    return rows, cell


def timed_systems(records):
    systems = {r.get("system") for r in records if num(r.get("median_ms")) is not None}
    return sorted(systems, key=system_sort_key)


def best_torch(row, cell, systems):
    best = None
    for s in systems:
        if not is_torch(s):
            continue
        r = cell.get(row + (s,))
        v = num(r.get("median_ms")) if r else None
        if v is not None and (best is None or v < best[0]):
            best = (v, s)
    return best


def markdown(path, records, png_name):
    rows, cell = build_index(records)
    systems = timed_systems(records)
    all_systems = sorted({r.get("system") for r in records}, key=system_sort_key)
    floors = floors_for(records)
    devices = sorted({str(r.get("device")) for r in records})
    dates = sorted({str(r.get("date")) for r in records if r.get("date")})
    commits = sorted({str(r.get("commit")) for r in records if r.get("commit")})

    out = []
    title = ", ".join(devices) if devices else os.path.basename(path)
    out.append("# fusedconv benchmark: %s" % title)
    out.append("")
    out.append("Generated by `bench/report.py` from `%s` (%d records; dates %s; commits %s). "
               "Do not edit: rerun the script." % (
                   os.path.basename(path), len(records),
                   ", ".join(dates) or "-", ", ".join(commits) or "-"))
    out.append("")

    out.append("## Median time per forward (ms)")
    out.append("")
    if not systems:
        out.append("No timed records.")
    else:
        header = ["problem", "input", "floor"] + systems + ["best halide / best torch"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
        for row in rows:
            problem, shape = row
            floor, _ = floors.get(row, (None, None))
            cells = [md_cell(problem), shape_str(shape), fmt_ms(floor)]
            for s in systems:
                r = cell.get(row + (s,))
                cells.append(fmt_ms(r.get("median_ms")) if r else "-")
            best = best_torch(row, cell, systems)
            # The faster of the Halide builds (hand defaults, tuned) that were timed.
            halides = [(num(cell[row + (s,)].get("median_ms")), s) for s in systems
                       if s.startswith(HALIDE) and s != ROUNDTRIP and row + (s,) in cell]
            halides = [(v, s) for v, s in halides if v is not None]
            hv = min(halides)[0] if halides else None
            if best is not None and hv is not None and best[0] > 0:
                cells.append("%.2f (%s vs %s)" % (hv / best[0], min(halides)[1], best[1]))
            else:
                cells.append("-")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        out.append("Median of the timed runs (`torch-*`: CUDA events around each call; `fusedconv_bench` systems: host clock around each call, which waits for the device). `floor`: the "
                   "direct-convolution roofline floor (float32 FMA peak and memory bandwidth; "
                   "from the `halide` record's `floor_ms` where it has one, else PROBLEMS.md's "
                   "H200 estimate). `best halide / best torch` < 1 means the faster Halide build "
                   "(`halide`: the schedules' default parameters; `halide-tuned`: a build with "
                   "`-DFUSEDCONV_TUNED`) beats the fastest `torch-*` system.")
        sources = sorted({src for (f, src) in floors.values() if f is not None})
        if sources:
            out.append("Floor sources: %s." % "; ".join(sources))
        if any("h200" not in d.lower() for d in devices) and any(
                src and "H200" in src for (_, src) in floors.values()):
            out.append("**Note:** this device is not an H200, but some floors are the H200 "
                       "estimates.")
    out.append("")

    out.append("## Accuracy and memory")
    out.append("")
    out.append("| problem | input | system | max abs err vs fp64 | max abs err vs torch fp32 "
               "| peak device MB | note |")
    out.append("|---|---|---|---:|---:|---:|---|")
    for row in rows:
        for s in all_systems:
            r = cell.get(row + (s,))
            if r is None:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                md_cell(row[0]), shape_str(row[1]), md_cell(s),
                fmt_err(r.get("max_abs_err_vs_fp64")),
                fmt_err(r.get("max_abs_err_vs_torch_fp32")),
                fmt_mb(r.get("peak_device_mem_mb")),
                md_cell(r.get("note") or "")))
    out.append("")
    out.append("Errors: the largest absolute difference from the same model run in float64 "
               "(for the CLI round trip also from PyTorch eager in strict FP32); over every "
               "output element for `torch-*` and `halide-cli-roundtrip`, over `samples_checked` "
               "sampled positions for the `fusedconv_bench` systems (`halide`, `cudnn-eager-*`). "
               "p83's `torch-*` errors are taken in eval mode (dropout masks differ between "
               "runs). Peak device memory during one forward, input and parameters included, "
               "MB = 1e6 bytes: `torch-*` from `torch.cuda.max_memory_allocated`; the harness's "
               "systems as their note says.")
    out.append("")
    if png_name:
        out.append("![median time per model and system, log scale](%s)" % png_name)
        out.append("")
    return "\n".join(out)


def chart(png_path, records):
    """Writes the chart; returns None when written, else why not (a short phrase)."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed for %s" % sys.executable

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cell = build_index(records)
    systems = timed_systems(records)
    rows = [row for row in rows
            if any(num((cell.get(row + (s,)) or {}).get("median_ms")) is not None for s in systems)]
    if not rows or not systems:
        return "no timings"
    floors = floors_for(records)
    devices = sorted({str(r.get("device")) for r in records})

    n = len(systems)
    width = 0.8 / n
    fig_w = max(7.0, 1.2 + len(rows) * (0.45 * n + 0.6))
    fig, ax = plt.subplots(figsize=(fig_w, 5.2))
    cmap = plt.get_cmap("tab10")
    all_values = []
    for j, s in enumerate(systems):
        xs, ys = [], []
        for i, row in enumerate(rows):
            r = cell.get(row + (s,))
            v = num(r.get("median_ms")) if r else None
            if v is not None and v > 0:
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(v)
        all_values += ys
        ax.bar(xs, ys, width=width * 0.95, label=s, color=cmap(j % 10), zorder=2)
        for x, y in zip(xs, ys):
            ax.text(x, y * 1.04, fmt_ms(y), ha="center", va="bottom", fontsize=6.5, rotation=90,
                    zorder=5, bbox=dict(boxstyle="square,pad=0.1", facecolor="white",
                                        edgecolor="none", alpha=0.7))
    floor_labelled = False
    for i, row in enumerate(rows):
        floor, _ = floors.get(row, (None, None))
        if floor is None or floor <= 0:
            continue
        all_values.append(floor)
        ax.hlines(floor, i - 0.45, i + 0.45, colors="black", linestyles="dashed", linewidth=1.5,
                  zorder=4, label=None if floor_labelled else "roofline floor (direct conv)")
        floor_labelled = True
    ax.set_yscale("log")
    if all_values:
        ax.set_ylim(min(all_values) / 1.8, max(all_values) * 2.5)  # room for the value labels
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["%s\n%s" % (p, shape_str(s)) for p, s in rows], fontsize=8)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel("median time per forward (ms, log scale)")
    ax.set_title("fusedconv vs PyTorch: %s" % ", ".join(devices), fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3, zorder=0)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(png_path, dpi=130)
    plt.close(fig)
    return None


def report(json_path, out_dir=None):
    records = results_io.load(json_path)
    stem = os.path.splitext(os.path.basename(json_path))[0]
    out_dir = out_dir or os.path.dirname(os.path.abspath(json_path))
    os.makedirs(out_dir, exist_ok=True)
    png_path = os.path.join(out_dir, stem + ".png")
    md_path = os.path.join(out_dir, stem + ".md")
    no_chart = chart(png_path, records)
    text = markdown(json_path, records, None if no_chart else os.path.basename(png_path))
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)
    if no_chart and os.path.exists(png_path):
        # Left in place (nothing is deleted), but said: it shows an earlier run's timings.
        no_chart += "; %s is from an earlier run and does not show these timings" % png_path
    print("%s -> %s%s" % (json_path, md_path,
                          " (no chart: %s)" % no_chart if no_chart else ", " + png_path))


def default_paths(results_dir):
    """Every results file of the benchmark in results_dir; the scaling files (scaling-*.json)
    have their own records and renderer (bench/scaling_table.py)."""
    return sorted(p for p in glob.glob(os.path.join(results_dir, "*.json"))
                  if not os.path.basename(p).startswith("scaling-"))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Markdown table and PNG chart from bench results JSON.")
    ap.add_argument("results", nargs="*",
                    help="results JSON file(s) (default: every bench/results/*.json but the "
                         "scaling-*.json files, which bench/scaling_table.py renders)")
    ap.add_argument("--out-dir", default=None,
                    help="where to write <slug>.md and <slug>.png (default: beside each JSON)")
    args = ap.parse_args(argv)
    paths = args.results or default_paths(results_io.RESULTS_DIR)
    if not paths:
        print("no results: %s/*.json is empty" % results_io.RESULTS_DIR, file=sys.stderr)
        return 1
    for p in paths:
        report(p, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
