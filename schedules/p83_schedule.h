// Schedules for p83 (conv3d -> GroupNorm -> min -> clamp -> dropout).
#pragma once

#include "conv3d_xy_schedule.h"
#include "pipelines.h"

namespace fusedconv::schedules {

struct P83Params {
    // GPU statistics kernel: threads per block over (x, depth); each thread
    // walks the rest of the depth and a block of channels.
    Halide::GeneratorParam<int> gpu_cols_x{"gpu_cols_x", 32};
    Halide::GeneratorParam<int> gpu_cols_z{"gpu_cols_z", 7};
    // GPU conv kernel: pixels per block (x, and y in units of
    // gpu_rows_per_thread); each thread walks depth and channel blocks of its
    // pixels.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 32};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 8};
    // GPU conv kernel: rows of pixels per thread (each weight load then
    // feeds that many FMAs).
    Halide::GeneratorParam<int> gpu_rows_per_thread{"gpu_rows_per_thread", 8};
    // GPU conv and statistics kernels: output channels a thread handles at
    // once (in the conv, each input load then feeds that many FMAs).
    Halide::GeneratorParam<int> gpu_channel_block{"gpu_channel_block", 8};
    // GPU output kernel: threads per block over (x, y); each thread walks
    // the depth of its pixel.
    Halide::GeneratorParam<int> gpu_output_tile_x{"gpu_output_tile_x", 64};
    Halide::GeneratorParam<int> gpu_output_tile_y{"gpu_output_tile_y", 1};
    // GPU output kernel: depth steps a thread takes per loop iteration,
    // unrolled (1 = a rolled loop); on depths below it the loop stays rolled.
    Halide::GeneratorParam<int> gpu_output_depth_unroll{"gpu_output_depth_unroll", 7};
    // GPU output kernel of the "xy" library: floats a thread loads and
    // stores at once along x (1, 2 or 4), where the output's width and
    // strides are multiples of it; the library then needs its output's
    // storage aligned to as many floats (output_alignment), which the
    // runtime checks. Elsewhere the kernel takes one float a thread.
    Halide::GeneratorParam<int> gpu_output_vector{"gpu_output_vector", 2};
    // The floats the output kernel moves at once: gpu_output_vector (checked)
    // in the "xy" library (`max_cin` > 0, xy_max_cin's), else 1.
    int output_vector(int max_cin) const;
    // The output's storage alignment in bytes that the library assumes, 4
    // output_vector (4: none beyond a float's).
    int output_alignment(const Halide::Target &target) const;
    // GPU: the conv's form: "direct" (the kernel above), or "xy": Winograd
    // F(4x4, 3x3) over x and y for 3x3x3 kernels with at most gpu_xy_max_cin
    // input channels (generators/winograd2d.h; the direct form, in the same
    // kernel's other specialization, for the rest). The runtime calls the
    // library built with "xy" (p83_xy_cuda) where it applies.
    Halide::GeneratorParam<std::string> gpu_conv_form{"gpu_conv_form", "direct"};
    // GPU, "xy": a block owns tiles_x x tiles_y 4x4 tiles of gpu_xy_depth
    // output depths at a time, and stages the transformed input of its
    // tiles, their depths (+ 2) and all gpu_xy_max_cin channels in shared
    // memory, 576 tiles_x tiles_y (depth + 2) max_cin bytes, and one depth's
    // conv of its pixels, 64 tiles_x tiles_y (lanes + 1) bytes: under 48 KB.
    // Threads: gpu_xy_lanes output channels x tiles_x / tiles_per_thread x
    // tiles_y; each thread's 4 x 4 tiles_per_thread pixels and one channel
    // hold 36 tiles_per_thread transform-domain sums in registers.
    Halide::GeneratorParam<int> gpu_xy_max_cin{"gpu_xy_max_cin", 3};
    Halide::GeneratorParam<int> gpu_xy_tiles_x{"gpu_xy_tiles_x", 16};
    Halide::GeneratorParam<int> gpu_xy_tiles_y{"gpu_xy_tiles_y", 1};
    Halide::GeneratorParam<int> gpu_xy_tiles_per_thread{"gpu_xy_tiles_per_thread", 4};
    Halide::GeneratorParam<int> gpu_xy_depth{"gpu_xy_depth", 2};
    Halide::GeneratorParam<int> gpu_xy_lanes{"gpu_xy_lanes", 16};
    // GPU, "xy": input channels the sums' loop unrolls (its 3 depth taps
    // always are). 3, p83's Cin: with the statistics' pieces in the kernel
    // it spills less (H100, bench/tune: 1.3-1.5% faster than 1).
    Halide::GeneratorParam<int> gpu_xy_cin_unroll{"gpu_xy_cin_unroll", 3};
    // GPU, "xy": the GroupNorm statistics by pieces (one thread's tiles of one
    // channel and depth), computed in the conv kernel from its staged output,
    // instead of a column-statistics kernel reading the kept conv.
    Halide::GeneratorParam<bool> gpu_xy_stats_in_conv{"gpu_xy_stats_in_conv", true};
    // The pieces' size in pixels (piece_w 0: statistics by columns).
    void stats_pieces(int max_cin, int &piece_w, int &piece_h) const;
    // The input channels the algorithm's Winograd form is built for: 0 (no
    // such form) unless the target has a GPU and gpu_conv_form is "xy".
    int xy_max_cin(const Halide::Target &target) const;
    // The gpu_xy_* params, with `max_cin` the form's channel limit.
    Conv3dXYShape xy_shape(int max_cin) const;
    // CPU: vector width over x.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
};

void schedule_p83(P83Pipeline &p, const P83Params &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
