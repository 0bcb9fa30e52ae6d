// Schedules for p24 (conv3d -> min over depth -> softmax over channels).
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

// Tunable parameters; declared as members of the generator, so each is a
// GeneratorParam settable at build time (PARAMS in add_halide_library).
struct P24Params {
    // GPU: output pixels per block (one warp, one lane per output channel);
    // each lane keeps tile_x * tile_y accumulators in registers.
    // The softmax runs one lane per pixel, in passes of 32 pixels.
    // Measured 2026-11-21, NVIDIA H200, default shape (30 x 30 outputs), one
    // run: 8x8 0.535 ms, 10x6 0.492, 6x10 0.472, 15x4 0.505, 10x10 0.878
    // (100 accumulators per lane); a second run against 6x10 (0.473): 30x2
    // 0.521, 6x5 0.567, 5x10 0.602, 6x15 0.787, 15x6 0.814.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 6};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 10};
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
};

void schedule_p24(P24Pipeline &p, const P24Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
