// What the probe's programs install around Halide 14's CUDA runtime before their first call.
// The runtime takes its driver entry points through halide_get_library_symbol, and these wrap
// two of them:
// - cuModuleLoadDataEx: the module's placeholder calls spliced into mma.sync (mma_splice.h),
//   and the JIT's error log printed when it refuses the result;
// - cuLaunchKernel: a kernel's dynamic shared memory attribute raised first when a launch asks
//   for more than 48 KB, which Halide 14 never does itself.
// Halide's errors are kept as a message (halide_message) instead of ending the program.
#pragma once

#include <functional>
#include <string>

struct halide_buffer_t;

namespace tc_probe {

// `tool` names the program in the messages. Also sets HL_CUDA_JIT_MAX_REGISTERS to 255 (as the
// library does), unless it is set.
void install_driver_hooks(const char *tool);

// The groups spliced into the last module loaded (-1 before any).
int spliced_groups();

// The last error Halide reported.
const std::string &halide_message();

// The median wall time in ms of `runs` calls of `run`, each followed by a device sync of `out`,
// after 3 untimed calls; a negative value (with halide_message set) when a call fails.
double median_ms(const std::function<int()> &run, halide_buffer_t *out, int runs);

}  // namespace tc_probe
