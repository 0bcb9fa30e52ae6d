#!/usr/bin/env bash
# The scaling sweep of issue 30 on one host: fusedconv_scaling (C++ sharded_forward_into over
# 1, 2, 4, 8 GPUs) and torch_scaling.py under torchrun with the same GPU counts (only counts <=
# the visible GPUs), both merging into bench/results/scaling-<slug>.json, then the markdown
# table bench/results/scaling-<slug>.md (bench/scaling_table.py).
#
#   bench/run_scaling.sh [--build DIR] [--commit HASH] [-- EXTRA ARGS FOR BOTH TOOLS]
#     --build DIR   where fusedconv_scaling (DIR/bench) and the Python package (DIR/python) are
#                   (default: build)
#     --commit      the commit to record (the GPU machine has no .git)
#     --skip-torch  only the C++ tool
# Run from the repository root. Extra arguments (e.g. -p p24,p83 --reps 10) go to both tools.
set -euo pipefail
build=build
commit=${FUSEDCONV_COMMIT:-}
skip_torch=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --commit) commit=$2; shift 2 ;;
        --skip-torch) skip_torch=1; shift ;;
        --) shift; break ;;
        *) echo "run_scaling.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
extra=("$@")
tool=$build/bench/fusedconv_scaling
[[ -x $tool ]] || { echo "run_scaling.sh: $tool not found (cmake --build $build --target fusedconv_scaling)" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "run_scaling.sh: nvidia-smi not found: no GPU here" >&2; exit 2; }
visible=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# CUDA_VISIBLE_DEVICES limits what both tools see (nvidia-smi ignores it).
if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    IFS=, read -ra listed <<< "$CUDA_VISIBLE_DEVICES"
    (( ${#listed[@]} < visible )) && visible=${#listed[@]}
fi
(( visible >= 1 )) || { echo "run_scaling.sh: no GPU visible" >&2; exit 2; }
counts=()
for n in 1 2 4 8; do (( n <= visible )) && counts+=("$n"); done
largest=${counts[-1]}
slug=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import results_io; print(results_io.slug(sys.argv[1]))' "$name")
results=bench/results/scaling-$slug.json
commit_args=()
[[ -n $commit ]] && commit_args=(--commit "$commit")
echo "== $visible x $name; GPU counts ${counts[*]}; results $results"

status=0
"$tool" --devices "$(IFS=,; echo "${counts[*]}")" --results "$results" "${commit_args[@]}" "${extra[@]}" || status=$?

if (( ! skip_torch )); then
    for n in "${counts[@]}"; do
        echo "== torchrun, $n process(es)"
        # --batch-round: the C++ tool rounds a capped batch to its largest count; so do we.
        PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} \
            torchrun --standalone --nproc_per_node="$n" bench/torch_scaling.py \
            --batch-round "$largest" --results "$results" "${commit_args[@]}" "${extra[@]}" || status=$?
    done
fi
python3 bench/scaling_table.py "$results"
exit "$status"
