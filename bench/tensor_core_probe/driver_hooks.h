// What the probe's programs install around Halide 14's CUDA runtime before their first call:
// the library's own driver hooks (runtime/src/tensor_core_hooks.h: the placeholder calls
// spliced into mma.sync when a module loads, and launches past 48 KB of shared memory allowed),
// without the rest of the library, whose Halide runtime would be a second one in the program.
// Halide's errors are kept as a message (halide_message) instead of ending the program.
#pragma once

#include <functional>
#include <string>

#include "tensor_core_hooks.h"

struct halide_buffer_t;

namespace tc_probe {

// Also sets HL_CUDA_JIT_MAX_REGISTERS to 255 (as the library does), unless it is set.
void install_driver_hooks();

// The groups spliced into the last module loaded (-1 before any).
using fusedconv::cuda::spliced_groups;

// The last error Halide reported.
const std::string &halide_message();

// The median wall time in ms of `runs` calls of `run`, each followed by a device sync of `out`,
// after 3 untimed calls; a negative value (with halide_message set) when a call fails.
double median_ms(const std::function<int()> &run, halide_buffer_t *out, int runs);

}  // namespace tc_probe
