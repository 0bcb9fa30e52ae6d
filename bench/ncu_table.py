#!/usr/bin/env python3
"""Turns Nsight Compute CSV profiles of the Halide pipelines into a Markdown table of
achieved FLOP/s and memory throughput per kernel.

  python3 bench/ncu_table.py PROFILE.csv --peak-tflops 66.9 --peak-gbps 4814 [--out FILE]

PROFILE.csv holds one or more `ncu --csv --page raw` outputs (bench/README.md has the
command), each after a line `# problem: <id>` naming the model it profiled. Lines that are
not part of a CSV table (the profiled program's own output, ncu's `==PROF==` lines) are
skipped. Needed metrics, per kernel launch:

  gpu__time_duration.sum, dram__bytes.sum, launch__registers_per_thread,
  smsp__sass_thread_inst_executed_op_{ffma,fadd,fmul}_pred_on.sum,
  sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,
  smsp__issue_active.avg.pct_of_peak_sustained_active,
  sm__warps_active.avg.pct_of_peak_sustained_active

and, where the profile has them (OPTIONAL below), the L1 and L2 throughput, the tensor pipe
and the warps' stalled cycles by reason, from which the table names each kernel's busiest unit
and its largest stall reasons.

FLOP counts an FFMA as 2 and an FADD or FMUL as 1 (float32 instructions executed by
threads whose predicate is on). The peaks (the device's float32 FMA rate and DRAM
bandwidth; fusedconv_bench prints them as its "ceilings") only scale the two percentage
columns. A kernel launched several times (the profile may cover a few forward calls) is
reported once, by its last launch. Standard library only.
"""

import argparse
import csv
import io
import re
import sys

TIME = "gpu__time_duration.sum"
DRAM = "dram__bytes.sum"
REGS = "launch__registers_per_thread"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
REQUIRED = [TIME, DRAM, REGS, FFMA, FADD, FMUL, FMA_PIPE, ISSUE, WARPS]

# Read where the profile has them (ncu_profile.sh asks for those its ncu knows; the committed
# H100 profile predates them): the cache levels' throughput, the tensor pipe (mma.sync and
# Hopper's wgmma count in different metrics; the table takes the largest present), and the
# warps' stalled cycles by reason (ncu's average latency per warp; the table gives each
# reason's share of their sum, which ranks them whatever the metric's normalization).
L1 = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
TENSOR = ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"]
STALL_REASONS = ["long_scoreboard", "short_scoreboard", "wait", "barrier", "math_pipe_throttle",
                 "mio_throttle", "lg_throttle", "tex_throttle", "not_selected", "dispatch_stall",
                 "no_instruction", "branch_resolving", "membar", "drain", "imc_miss", "misc",
                 "sleeping"]
STALLS = {r: f"smsp__average_warp_latency_issue_stalled_{r}.ratio" for r in STALL_REASONS}
OPTIONAL = [L1, L2] + TENSOR + list(STALLS.values())
TOP_STALLS = 3  # reasons shown per kernel

# Units ncu may print (with or without --print-units base), to seconds and bytes.
TIME_UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
              "ms": 1e-3, "second": 1.0, "s": 1.0}
BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
              "KB": 1e3, "MB": 1e6, "GB": 1e9}
PROBLEM_LINE = re.compile(r"^#\s*problem:\s*(\S+)\s*$")


class ProfileError(ValueError):
    """A profile that cannot be read; the message says where and why."""


def number(text, where):
    """A metric value: ncu may group digits with commas."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise ProfileError(f"{where}: {text!r} is not a number") from None


def read_sections(text):
    """Splits the file into (problem, [lines of its CSV table]) in order."""
    sections, problem, table = [], None, None
    for lineno, line in enumerate(text.splitlines(), 1):
        m = PROBLEM_LINE.match(line)
        if m:
            problem, table = m.group(1), None
            continue
        if line.startswith('"ID",'):
            if problem is None:
                raise ProfileError(f"line {lineno}: a CSV table before any '# problem:' line")
            table = [line]
            sections.append((problem, table, lineno))
        elif table is not None and line.startswith('"'):
            table.append(line)
        else:
            table = None  # the program's own output ends a table
    return sections


def optional(row, col, metric, where):
    """An optional metric's value, None where the table has no such column (or ncu printed
    "n/a" for it)."""
    if metric not in col or row[col[metric]].strip() in ("", "n/a"):
        return None
    return number(row[col[metric]], where)


def table_unit(units, metric, default, known, what, where):
    """The unit of `metric` in a table's units row (`default` without one), checked."""
    name = units.get(metric) or default
    if name not in known:
        raise ProfileError(f"{where}: {what} unit {name!r} unknown")
    return name


def parse(text):
    """Kernel launches as dicts: problem, kernel, grid, block and the metrics in base units."""
    launches = []
    for problem, lines, lineno in read_sections(text):
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
        header = rows[0]
        missing = [m for m in REQUIRED + ["Kernel Name", "Grid Size", "Block Size"]
                   if m not in header]
        if missing:
            raise ProfileError(f"line {lineno} ({problem}): the table has no column "
                               + ", ".join(missing))
        col = {name: i for i, name in enumerate(header)}
        units = {}
        body = rows[1:]
        if body and body[0][col["ID"]] == "":  # the units row
            units = {name: body[0][i] for name, i in col.items()}
            body = body[1:]
        # One units row per table: its units hold for every launch below it.
        where = f"line {lineno} ({problem})"
        time_unit = table_unit(units, TIME, "nsecond", TIME_UNITS, "duration", where)
        byte_unit = table_unit(units, DRAM, "byte", BYTE_UNITS, "DRAM byte", where)
        for r, row in enumerate(body, 1):
            if len(row) != len(header):
                raise ProfileError(f"line {lineno} ({problem}), launch {r}: "
                                   f"{len(row)} fields, the header has {len(header)}")
            where = f"{problem}, launch {r}"
            seconds = number(row[col[TIME]], where) * TIME_UNITS[time_unit]
            if seconds <= 0:
                raise ProfileError(f"{where}: a duration of {row[col[TIME]]} {time_unit}")
            launches.append({
                "problem": problem,
                "kernel": row[col["Kernel Name"]],
                "grid": row[col["Grid Size"]],
                "block": row[col["Block Size"]],
                "seconds": seconds,
                "dram_bytes": number(row[col[DRAM]], where) * BYTE_UNITS[byte_unit],
                "registers": int(number(row[col[REGS]], where)),
                "flop": 2 * number(row[col[FFMA]], where) + number(row[col[FADD]], where)
                        + number(row[col[FMUL]], where),
                "fma_pipe_pct": number(row[col[FMA_PIPE]], where),
                "issue_pct": number(row[col[ISSUE]], where),
                "warps_pct": number(row[col[WARPS]], where),
                "l1_pct": optional(row, col, L1, where),
                "l2_pct": optional(row, col, L2, where),
                "tensor_pct": max((v for m in TENSOR
                                   if (v := optional(row, col, m, where)) is not None),
                                  default=None),
                "stalls": {r: v for r, m in STALLS.items()
                           if (v := optional(row, col, m, where)) is not None},
            })
    if not launches:
        raise ProfileError("no kernel launches found (no '# problem:' line followed by an "
                           "ncu --csv --page raw table)")
    return launches


def last_launches(launches):
    """Per (problem, kernel) the last launch, in the order the kernels first ran: a profile of
    a few forward calls then shows each kernel once, warm (its first launch may include the
    driver's JIT and cold caches)."""
    last, order = {}, []
    for k in launches:
        key = (k["problem"], k["kernel"])
        if key not in last:
            order.append(key)
        last[key] = k
    return [last[key] for key in order]


def short_name(kernel):
    """Halide's kernel names without the _kernel_ prefix and the ___block_id suffix."""
    name = re.sub(r"^_kernel_", "", kernel)
    return re.sub(r"___block_id_[xyz](__\d+)?$", "", name)


def busiest(k, dram_pct):
    """The unit nearest its peak: issue slots, FMA or tensor pipe, L1, L2 or DRAM (a kernel far
    from every peak is held by latency: its stalls say on what)."""
    units = {"issue": k["issue_pct"], "FMA pipe": k["fma_pipe_pct"], "tensor pipe": k["tensor_pct"],
             "L1": k["l1_pct"], "L2": k["l2_pct"], "DRAM": dram_pct}
    name, pct = max(((n, v) for n, v in units.items() if v is not None), key=lambda nv: nv[1])
    return f"{name} {pct:.0f}%"


def top_stalls(k):
    """The largest stall reasons, each as its share of the stalled cycles of all reasons."""
    total = sum(k["stalls"].values())
    if total <= 0:
        return "—"
    top = sorted(k["stalls"].items(), key=lambda rv: -rv[1])[:TOP_STALLS]
    return ", ".join(f"{r} {100 * v / total:.0f}%" for r, v in top)


def pct(v):
    return "—" if v is None else f"{v:.1f}"


def table(launches, peak_tflops, peak_gbps):
    out = ["| problem | kernel | grid | block | registers | time (us) | GFLOP/s | % of FP32 peak "
           "| DRAM GB/s | % of DRAM peak | FMA pipe % | issue % | warps active % | tensor pipe % "
           "| L1 % | L2 % | busiest unit | largest stalls (share of stalled cycles) |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for k in launches:
        gflops = k["flop"] / k["seconds"] / 1e9
        gbps = k["dram_bytes"] / k["seconds"] / 1e9
        dram_pct = 100 * gbps / peak_gbps
        out.append(
            f"| {k['problem']} | `{short_name(k['kernel'])}` | {k['grid']} | {k['block']} "
            f"| {k['registers']} | {k['seconds'] * 1e6:.1f} | {gflops:.0f} "
            f"| {100 * gflops / (peak_tflops * 1e3):.1f} | {gbps:.0f} | {dram_pct:.1f} "
            f"| {k['fma_pipe_pct']:.1f} | {k['issue_pct']:.1f} | {k['warps_pct']:.1f} "
            f"| {pct(k['tensor_pct'])} | {pct(k['l1_pct'])} | {pct(k['l2_pct'])} "
            f"| {busiest(k, dram_pct)} | {top_stalls(k)} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", help="the ncu CSV profiles, each after a '# problem: <id>' line")
    ap.add_argument("--peak-tflops", type=float, required=True,
                    help="the device's float32 FMA peak, TFLOP/s")
    ap.add_argument("--peak-gbps", type=float, required=True,
                    help="the device's DRAM bandwidth, GB/s")
    ap.add_argument("--out", help="write the table here (default: standard output)")
    args = ap.parse_args(argv)
    if args.peak_tflops <= 0 or args.peak_gbps <= 0:
        ap.error(f"the peaks must be positive, got {args.peak_tflops} TFLOP/s and "
                 f"{args.peak_gbps} GB/s")
    try:
        with open(args.profile, encoding="utf-8") as f:
            launches = parse(f.read())
    except (OSError, ProfileError) as e:
        print(f"ncu_table.py: {args.profile}: {e}", file=sys.stderr)
        return 2
    text = table(last_launches(launches), args.peak_tflops, args.peak_gbps)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
