#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build,
# then run all four models at their default shapes on the best available
# device, each checked against a float64 reference. Arguments go to the CLI
# (see build/runtime/fusedconv --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
exec "${BUILD_DIR:-$root/build}/runtime/fusedconv" "$@"
