// Schedules for p83 (conv3d -> GroupNorm -> min -> clamp -> dropout).
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

struct P83Params {
    // GPU statistics kernel: threads per block over (x, depth); each thread
    // walks the rest of the depth and a block of channels.
    Halide::GeneratorParam<int> gpu_cols_x{"gpu_cols_x", 32};
    Halide::GeneratorParam<int> gpu_cols_z{"gpu_cols_z", 7};
    // GPU conv kernel: pixels per block (x, and y in units of
    // gpu_rows_per_thread); each thread walks depth and channel blocks of its
    // pixels. The element-wise output kernel uses the same x, y tile.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 32};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // GPU conv kernel: rows of pixels per thread (each weight load then
    // feeds that many FMAs).
    Halide::GeneratorParam<int> gpu_rows_per_thread{"gpu_rows_per_thread", 8};
    // GPU conv and statistics kernels: output channels a thread handles at
    // once (in the conv, each input load then feeds that many FMAs).
    Halide::GeneratorParam<int> gpu_channel_block{"gpu_channel_block", 8};
    // GPU output kernel: depth steps a thread takes per loop iteration,
    // unrolled (1 = a rolled loop); on depths below it the loop stays rolled.
    Halide::GeneratorParam<int> gpu_output_depth_unroll{"gpu_output_depth_unroll", 7};
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
};

void schedule_p83(P83Pipeline &p, const P83Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
