#!/usr/bin/env bash
# Configures and builds into BUILD_DIR (default build/) in Release mode.
# Extra arguments go to cmake, e.g. -DFUSEDCONV_SANITIZE=ON.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)"
