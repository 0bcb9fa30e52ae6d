// Schedules shared by p25 and p32: conv2d -> min over channels -> element-wise
// epilogue. The two models differ only in their epilogue, which stays inlined.
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

struct Conv2dMinParams {
    // GPU: output pixels per block; one thread per pixel.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 32};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // GPU: output channels whose convolutions a thread accumulates at once
    // (registers), reusing each input value that many times.
    Halide::GeneratorParam<int> gpu_channel_block{"gpu_channel_block", 8};
    // GPU: output rows per thread (each weight load feeds that many FMAs).
    Halide::GeneratorParam<int> gpu_rows_per_thread{"gpu_rows_per_thread", 4};
    // CPU: vector width over x, and channels accumulated at once.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
    Halide::GeneratorParam<int> cpu_channel_block{"cpu_channel_block", 8};
};

void schedule_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t,
                         const Halide::Target &target);

}  // namespace fusedconv::schedules
