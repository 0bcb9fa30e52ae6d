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
table() { python3 -c "import sys; sys.path.insert(0, '$here'); import ncu_table; print(' '.join(ncu_table.$1))"; }
metrics=$(table REQUIRED | tr ' ' ',')
# A metric is known when its full name or its base name (before the first '.') is listed.
known=$( { ncu --query-metrics; ncu --query-metrics --query-metrics-mode all; } 2>/dev/null |
        awk '{print $1}' | sort -u)
for m in $(table OPTIONAL); do
    if grep -qxF -e "$m" -e "${m%%.*}" <<< "$known"; then
        metrics+=",$m"
    else
        echo "ncu_profile.sh: this ncu does not list $m; left out" >&2
    fi
done
: > "$out"
for p in ${problems//,/ }; do
    echo "# problem: $p" >> "$out"
    ncu --csv --page raw --print-units base --clock-control none --metrics "$metrics" \
        "$bench" -p "$p" -s halide -r 1 -w 1 --samples 1 --results - --no-measure-ceilings >> "$out"
done
