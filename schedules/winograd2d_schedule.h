// GPU schedule of p25 and p32 with the Winograd F(4x4, 3x3) form
// (generators/winograd2d.h): multi-warp blocks, per-thread outer products.
#pragma once

#include "conv2d_min_schedule.h"

namespace fusedconv::schedules {

// tiles_x, lanes: gpu_wino2d_tiles_x and gpu_wino2d_lanes resolved for the model
// (Conv2dMinParams::wino2d_tiles_x, wino2d_lanes).
void gpu_conv2d_min_winograd2d(Conv2dMinPipeline &p, const Conv2dMinParams &t, int tiles_x,
                               int lanes);

}  // namespace fusedconv::schedules
