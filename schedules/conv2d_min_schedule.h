// Schedules shared by p25 and p32: conv2d -> min over channels -> element-wise
// epilogue. The two models differ only in their epilogue, which stays inlined.
#pragma once

#include "pipelines.h"

namespace fusedconv::schedules {

struct Conv2dMinParams {
    // GPU: output pixels per block (one warp); each lane holds the tile's
    // convolution for one channel in registers (tile_x * tile_y of them; the
    // Winograd form 6 * tile_x / 4 * tile_y transform-domain sums).
    // tile_x * tile_y must be a multiple of 32, tile_x a multiple of 4.
    // The measurements below are of the direct form (before the Winograd
    // form; conv2d_min_schedule.cpp has the Winograd form's).
    // Measured (NVIDIA H200, default shapes, tune.py, 2026-11-21, before
    // the staged weights were padded, which took 3% off the defaults; p25 /
    // p32 ms): 16x6 chunk 8 (the defaults): 4.45 / 15.16; 16x8 chunk 4:
    // 4.48 / 15.75; 8x16 chunk 4: 4.45 / -; 16x8 chunk 8: 4.82 / 15.33;
    // 16x4 chunk 8: 4.97 / -; 8x8 chunk 4: 5.04 / 17.94; 32x4 chunk 8:
    // - / 16.77; chunk 1 or 2, or tiles of 64 pixels or fewer: slower
    // still (schedules/tuned/nvidia-h200.json has the best of each).
    Halide::GeneratorParam<int> gpu_tile_x{"gpu_tile_x", 16};
    Halide::GeneratorParam<int> gpu_tile_y{"gpu_tile_y", 6};
    // GPU: input channels whose input window and weights are staged in
    // shared memory at a time.
    // 4, not 8 (the direct form's best alone): the round of conv values now
    // stays in shared memory while the chunk is staged, and 3x3 to 7x7
    // kernels must fit 48 KB (5x5 at chunk 8 failed to launch).
    Halide::GeneratorParam<int> gpu_channel_chunk{"gpu_channel_chunk", 4};
    // GPU, Winograd form: the same for its transformed input rows (the two
    // forms share the kernel's shared memory, at most 48 KB). 4: 8 measured
    // slower (H200, p25 3.62-3.66 against 3.59 ms, p32 13.8 / 11.9), so did
    // 2 (3.75 / 13.4); with the taps still copied to shared memory as well,
    // 8: 4.23 / 13.23 against 3.94 / 12.81, 2: 3.79 / 12.48 against 3.70 /
    // 12.35.
    // Tuning rounds of 2026-11-22 (H200, tune.py, same-process medians, p25
    // / p32 ms against 3.39-3.40 / 11.77-11.79 for these defaults): direct
    // chunk 2 with Winograd chunk 8 3.30 (p25's entry in
    // schedules/tuned/nvidia-h200.json; ncu: still 8 warps per SM, 221
    // registers against 209, kernel 3.25 ms against 3.35); direct chunk 2
    // alone 3.39 / 13.43, Winograd chunk 8 alone 3.44 / 11.72 (p32's entry).
    // The defaults stay: the two models share them, and p32 measured 14%
    // slower with the direct chunk at 2.
    Halide::GeneratorParam<int> gpu_winograd_chunk{"gpu_winograd_chunk", 4};
    // GPU, Winograd form: where its transformed taps lie in global memory
    // (gpu_winograd in conv2d_min_schedule.cpp measures both): "points"
    // innermost, "channels" innermost, or "auto": the model's measured
    // choice (p25 points, p32 channels).
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
    // blocks, Cin <= kWinograd2DMaxCin; winograd2d_schedule.cpp). The CPU
    // libraries always hold the form along x.
    Halide::GeneratorParam<std::string> gpu_winograd_dims{"gpu_winograd_dims", "x"};
    WinogradDims winograd_dims(const Halide::Target &target) const;
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
