#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite with ctest.
# GPU tests run when a CUDA device is present and skip with a message otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)"
