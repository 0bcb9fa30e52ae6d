#!/bin/bash
# Profiles the Halide pipelines' kernels with Nsight Compute, for bench/ncu_table.py.
#
#   bench/ncu_profile.sh BENCH OUT.csv [PROBLEMS]
#
# BENCH: the fusedconv_bench binary; PROBLEMS: comma-separated (default p24,p25,p32,p83).
# Runs each problem's Halide pipeline twice (one warm-up, one timed call) under ncu, with
# the metrics ncu_table.py reads, at the GPU's own clocks (--clock-control none, as the
# timings are taken), and writes every launch to OUT.csv after a "# problem: <id>" line.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 BENCH OUT.csv [PROBLEMS]" >&2
    exit 2
fi
bench=$1 out=$2 problems=${3:-p24,p25,p32,p83}
here=$(cd "$(dirname "$0")" && pwd)
metrics=$(python3 -c "import sys; sys.path.insert(0, '$here'); import ncu_table; print(','.join(ncu_table.REQUIRED))")
: > "$out"
for p in ${problems//,/ }; do
    echo "# problem: $p" >> "$out"
    ncu --csv --page raw --print-units base --clock-control none --metrics "$metrics" \
        "$bench" -p "$p" -s halide -r 1 -w 1 --samples 1 --results - --no-measure-ceilings >> "$out"
done
