// Schedules for p24 (conv3d -> min over depth -> softmax over channels).
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

// Tunable parameters; declared as members of the generator, so each is a
// GeneratorParam settable at build time (PARAMS in add_halide_library).
struct P24Params {
    // GPU (schedules/NOTES.md says how they were chosen):
    // output pixels per block, x and y;
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 10};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 4};
    // threads per block: channel groups x pixel groups (x, y); a thread owns
    // channels_per_thread channels of (tile_x / pixel_groups_x) x (tile_y /
    // pixel_groups_y) pixels, whose conv it keeps in registers.
    // The tile's depth-min of every output channel is in shared memory
    // (4 * Cout * tile_x * tile_y bytes, at most 48 KB: about 300 channels at
    // 10x4; past that the launch fails, and the runtime says why).
    Halide::GeneratorParam<int> gpu_channel_groups{"gpu_channel_groups", 8};
    Halide::GeneratorParam<int> gpu_channels_per_thread{"gpu_channels_per_thread", 3};
    Halide::GeneratorParam<int> gpu_pixel_groups_x{"gpu_pixel_groups_x", 2};
    Halide::GeneratorParam<int> gpu_pixel_groups_y{"gpu_pixel_groups_y", 2};
    // output depths whose conv a thread keeps in registers at once (so a
    // thread holds channels_per_thread x sub-tile x depth_block sums): the
    // input planes that neighbouring depths share are loaded once for all.
    Halide::GeneratorParam<int> gpu_depth_block{"gpu_depth_block", 2};
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
    // Where the GPU schedule computes no pixel past the conv's right or
    // bottom edge, so the conv reads its input unclamped in x and y
    // (blocks::conv3d's xy_inside): a kernel 3 wide and high (the taps'
    // unrolled fast path) and a conv of at least one tile (the tiles at the
    // edge then shift inwards). Undefined on the CPU.
    Halide::Expr xy_inside(const Halide::Target &target, const Halide::Expr &in_w,
                           const Halide::Expr &in_h, const Halide::Expr &kw,
                           const Halide::Expr &kh) const;
};

void schedule_p24(P24Pipeline &p, const P24Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
