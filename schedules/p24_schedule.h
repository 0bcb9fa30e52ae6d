// Schedules for p24 (conv3d -> min over depth -> softmax over channels).
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

// Tunable parameters; declared as members of the generator, so each is a
// GeneratorParam settable at build time (PARAMS in add_halide_library).
struct P24Params {
    // GPU: output pixels per block (threads), each thread owning one pixel's
    // softmax over all channels. The block keeps tile_x * tile_y * Cout floats
    // of the depth-min in shared memory (the runtime checks this fits 48 KB).
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 16};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // GPU: output channels whose convolutions a thread accumulates at once
    // in registers, reusing each input value that many times.
    Halide::GeneratorParam<int> gpu_channel_block{"gpu_channel_block", 8};
    // GPU: rows of output pixels per thread in the depth-min (each weight
    // load then feeds that many FMAs).
    Halide::GeneratorParam<int> gpu_rows_per_thread{"gpu_rows_per_thread", 2};
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
};

void schedule_p24(P24Pipeline &p, const P24Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
