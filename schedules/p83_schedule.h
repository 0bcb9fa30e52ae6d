// Schedules for p83 (conv3d -> GroupNorm -> min -> clamp -> dropout).
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

struct P83Params {
    // GPU statistics kernel: threads per block over (x, channels); each
    // thread walks the depth.
    Halide::GeneratorParam<int> gpu_cols_x{"gpu_cols_x", 32};
    Halide::GeneratorParam<int> gpu_cols_c{"gpu_cols_c", 4};
    // GPU output kernel: output pixels per block; each thread walks depth
    // and channels of its pixel.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 32};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
};

void schedule_p83(P83Pipeline &p, const P83Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
