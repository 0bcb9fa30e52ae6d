#!/usr/bin/env bash
# Installs what is missing, then builds and runs the test suite (ctest) twice:
#   pass 1: the normal Release build in BUILD_DIR (default build/);
#   pass 2: the same with AddressSanitizer + UndefinedBehaviorSanitizer
#           (-DFUSEDCONV_SANITIZE=ON) in BUILD_DIR-asan (default build-asan/).
# GPU tests run when a CUDA device is present and skip with a message otherwise.
# FUSEDCONV_TEST_SANITIZE=0 skips pass 2.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
build=${build%/}
asan_build=$build-asan
jobs=$(nproc)
"$root/scripts/install_deps.sh"

start=$SECONDS
echo "=== fusedconv tests, pass 1/2: Release build in $build ==="
BUILD_DIR=$build "$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
echo "=== pass 1/2 (Release) passed in $((SECONDS - start)) s ==="

if [ "${FUSEDCONV_TEST_SANITIZE:-1}" = 0 ]; then
    echo "=== pass 2/2 (ASan + UBSan) skipped: FUSEDCONV_TEST_SANITIZE=0 ==="
    exit 0
fi
start=$SECONDS
echo "=== fusedconv tests, pass 2/2: AddressSanitizer + UBSan build in $asan_build ==="
# The cuDNN baselines (bench/*.cu, nvcc) are not instrumented and no test runs
# them: left out of this build to save time.
BUILD_DIR=$asan_build "$root/scripts/build.sh" -DFUSEDCONV_SANITIZE=ON -DFUSEDCONV_BENCH_CUDA=OFF
# Any report fails its test: UBSan aborts (-fno-sanitize-recover), ASan and
# LeakSanitizer exit non-zero. protect_shadow_gap=0 lets the CUDA driver map
# its memory where ASan would otherwise reserve it (needed on GPU machines).
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0:strict_string_checks=1:check_initialization_order=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$asan_build" --output-on-failure -j "$jobs"
echo "=== pass 2/2 (ASan + UBSan) passed in $((SECONDS - start)) s ==="
