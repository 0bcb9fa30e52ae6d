// The parts of the p25 / p32 schedule (conv2d_min_schedule.cpp) that live in
// files of their own: the Winograd form along x on the GPU, and the CPU
// schedule.
#pragma once

#include "conv2d_min_schedule.h"

namespace fusedconv::schedules {

// Where the Winograd form's transformed taps u (per output and input
// channel: 6 points x 3 tap rows) lie in global memory. Channels innermost:
// a warp's load of one (point, row) is 128 consecutive bytes. Points
// innermost: a lane's 18 loads per input channel share 3 addresses (fewer
// instructions and registers), but a warp's load spans 6 cache lines.
enum class WinogradTapsLayout { ChannelsInnermost, PointsInnermost };

// Whether the pipeline holds the Winograd form (Conv2dMinParams::winograd_form).
inline bool has_winograd(const Conv2dMinPipeline &p) { return !Halide::Internal::is_const_zero(p.use_winograd); }

// The Winograd form along x of one round, computed at `at` (winograd_x_schedule.cpp).
void gpu_winograd_x(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Halide::LoopLevel &at,
                    WinogradTapsLayout taps);

// The CPU schedule (conv2d_min_cpu_schedule.cpp).
void cpu_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t);

}  // namespace fusedconv::schedules
