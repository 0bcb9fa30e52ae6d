// Schedules shared by p25 and p32: conv2d -> min over channels -> element-wise
// epilogue. The two models differ only in their epilogue, which stays inlined.
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

struct Conv2dMinParams {
    // GPU: output pixels per block (one warp); each lane holds the tile's
    // convolution for one channel in registers (tile_x * tile_y of them).
    // tile_x * tile_y must be a multiple of 32.
    // Measured (NVIDIA H200, default shapes, p25 / p32 ms), before the
    // round's padding (conv2d_min_schedule.cpp): 16x8 chunk 4:
    // 5.62 / 16.5; 32x4 chunk 4: 5.74 / 17.2; 8x8 chunk 8: 5.99 / 18.2;
    // 16x4 chunk 8: 6.05 / 18.5; 8x8 chunk 4: 6.10 / 19.3; 8x4 chunk 8:
    // 7.10 / 22.9.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 16};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // GPU: input channels whose input window and weights are staged in
    // shared memory at a time.
    Halide::GeneratorParam<int> gpu_channel_chunk{"gpu_channel_chunk", 4};
    // CPU: vector width over x, and channels accumulated at once.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
    Halide::GeneratorParam<int> cpu_channel_block{"cpu_channel_block", 8};
};

void schedule_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t,
                         const Halide::Target &target);

}  // namespace fusedconv::schedules
