// Schedules for p24 (conv3d -> min over depth -> softmax over channels).
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

// Tunable parameters; declared as members of the generator, so each is a
// GeneratorParam settable at build time (PARAMS in add_halide_library).
struct P24Params {
    // GPU: output pixels per block (one warp, one lane per output channel);
    // each lane keeps tile_x * tile_y accumulators in registers.
    // tile_x * tile_y should be a multiple of 32 (the softmax runs one lane
    // per pixel).
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 8};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
};

void schedule_p24(P24Pipeline &p, const P24Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
