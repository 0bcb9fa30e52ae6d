// Schedules shared by p25 and p32: conv2d -> min over channels -> element-wise
// epilogue. The two models differ only in their epilogue, which stays inlined.
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

// The F(4x4, 3x3) libraries' per-model choices, taken where gpu_wino2d_max_cin,
// gpu_wino2d_tiles_x and gpu_wino2d_lanes are 0 (their defaults): the best that bench/tune
// measured for each model on an H100 and an H200 alike (schedules/NOTES.md).
// generators/CMakeLists.txt reads max_cin from these two lines.
struct Winograd2DChoice {
    int max_cin, tiles_x, lanes;
};
constexpr Winograd2DChoice kP25Winograd2D{16, 8, 16};
constexpr Winograd2DChoice kP32Winograd2D{64, 4, 32};

struct Conv2dMinParams {
    // GPU: output pixels per block (one warp); each lane holds the tile's
    // convolution for one channel in registers (tile_x * tile_y of them; the
    // Winograd form 6 * tile_x / 4 * tile_y transform-domain sums).
    // tile_x * tile_y must be a multiple of 32, tile_x a multiple of 4.
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 16};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 6};
    // GPU: input channels whose input window and weights are staged in
    // shared memory at a time. 4, not the direct form's best alone (8): the
    // round of conv values stays in shared memory too, and 3x3 to 7x7
    // kernels must fit in 48 KB.
    Halide::GeneratorParam<int> gpu_channel_chunk{"gpu_channel_chunk", 4};
    // GPU, Winograd form: the same for its transformed input rows (the two
    // forms share the kernel's shared memory). p25 and p32 share the
    // defaults; the tuned files set it per model (schedules/NOTES.md).
    Halide::GeneratorParam<int> gpu_winograd_chunk{"gpu_winograd_chunk", 4};
    // GPU, Winograd form: where its transformed taps lie in global memory:
    // "points" innermost, "channels" innermost, or "auto": the model's
    // measured choice (p25 points, p32 channels; schedules/NOTES.md).
    Halide::GeneratorParam<std::string> gpu_winograd_taps{"gpu_winograd_taps", "auto"};
    // Whether the libraries hold the Winograd form at all (generators/winograd.h);
    // false: the direct form only, whatever the `winograd` Input says (to
    // compare the two forms from one source).
    Halide::GeneratorParam<bool> winograd_form{"winograd_form", true};
    // The generators' `winograd` Input as the pipeline takes it: constant
    // false when the libraries hold the direct form only.
    Halide::Expr winograd_switch(const Halide::Expr &requested) const {
        return winograd_form ? requested : Halide::Internal::const_false();
    }
    // GPU: which Winograd form the CUDA libraries hold for 3x3 kernels: "x"
    // (F(4, 3) along x, one-warp blocks) or "xy" (F(4x4, 3x3), multi-warp
    // blocks; winograd2d_schedule.cpp). The CPU libraries always hold the
    // form along x.
    Halide::GeneratorParam<std::string> gpu_winograd_dims{"gpu_winograd_dims", "x"};
    // GPU, F(4x4, 3x3): the input channels up to which a block stages the
    // transformed input of all of them (more take the direct form; the
    // runtime then calls the form along x, generators/CMakeLists.txt), the
    // block's 4x4 tiles along x and y, the tiles of one thread along x, and
    // how many input channels the sums' loop unrolls. A block's shared
    // memory (< 48 KB): 144 tiles_x tiles_y max_cin bytes of transformed
    // input, 64 (lanes + 1) tiles_x tiles_y bytes of conv values. max_cin and
    // tiles_x 0: the model's choice (Winograd2DChoice above).
    Halide::GeneratorParam<int> gpu_wino2d_max_cin{"gpu_wino2d_max_cin", 0};
    Halide::GeneratorParam<int> gpu_wino2d_tiles_x{"gpu_wino2d_tiles_x", 0};
    Halide::GeneratorParam<int> gpu_wino2d_tiles_y{"gpu_wino2d_tiles_y", 1};
    Halide::GeneratorParam<int> gpu_wino2d_tiles_per_thread{"gpu_wino2d_tiles_per_thread", 4};
    Halide::GeneratorParam<int> gpu_wino2d_cin_unroll{"gpu_wino2d_cin_unroll", 4};
    // GPU, F(4x4, 3x3): output channels on the lanes of a warp, and so in a
    // round: 32, or 16 (a warp then holds two tile groups, whose lanes load
    // the same transformed taps) or 8; 0: the model's choice.
    Halide::GeneratorParam<int> gpu_wino2d_lanes{"gpu_wino2d_lanes", 0};
    // The Winograd form of the CUDA libraries, max_cin resolved for `model`.
    WinogradForm winograd_choice(const Halide::Target &target, Winograd2DChoice model) const;
    // gpu_wino2d_tiles_x and gpu_wino2d_lanes resolved for `model`.
    int wino2d_tiles_x(Winograd2DChoice model) const;
    int wino2d_lanes(Winograd2DChoice model) const;
    // CPU: vector width over x, and channels accumulated at once.
    Halide::GeneratorParam<int> cpu_vector{"cpu_vector", 8};
    Halide::GeneratorParam<int> cpu_channel_block{"cpu_channel_block", 8};
};

// The schedule p25 and p32 share, each with its own measured layout of the
// Winograd form's transformed taps where gpu_winograd_taps is "auto"
// (conv2d_min_schedule.cpp).
void schedule_p25(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Halide::Target &target);
void schedule_p32(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Halide::Target &target);

}  // namespace fusedconv::schedules
