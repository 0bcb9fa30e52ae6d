// GPU schedule of the conv-min F(4x4, 3x3) form on tensor cores
// (generators/winograd2d_tensor_core.h).
#pragma once

#include "winograd2d_tensor_core.h"

namespace fusedconv::schedules {

// The tensor-core libraries' tunable choices (bench/tune: p25_tc_cuda, p32_tc_cuda). 0 is the
// model's choice: the generator's shape (kTensorCoreShape, kTensorCoreWideShape) and its
// default unroll.
struct TensorCoreParams {
    // Blocks of 16 output channels a round (TensorCoreShape::round_mtiles): 1 (4 warps, each
    // summing both tile groups) or 2 (8 warps, each one tile group for both m-tiles). 1 for
    // both models (bench/tune, H100: p32 5.10 ms against 5.43 with 2, all steps unrolled).
    Halide::GeneratorParam<int> gpu_tc_round_mtiles{"gpu_tc_round_mtiles", 0};
    // Steps of 8 input channels the mma loop unrolls, 1 to max_cin / 8; 0: all of them
    // (bench/tune, H100: p32's 8 in 5.10 ms against 5.38 for 4 and 6.01 for 2; p25's 2 in
    // 1.93-1.96 against 1.95-2.00 for 1).
    Halide::GeneratorParam<int> gpu_tc_step_unroll{"gpu_tc_step_unroll", 0};
    // Points of the 36 each warp sums, a divisor of 36: 9 (4 warps a block with one m-tile a
    // round), 6, 4 or 3 (6, 9 or 12 warps, fewer accumulators a thread); 0: the model's, p25 9
    // (bench/tune, H200: 1.64 ms against 1.72 with 6), p32 3 with u split at the steps (bench/tune,
    // H200, the 3-instruction split: 4.23 ms against 4.83 at 9 split ahead; 12 warps a block).
    Halide::GeneratorParam<int> gpu_tc_warp_points{"gpu_tc_warp_points", 0};
    // Where u's fragments are split into tf32 values and remainders
    // (TensorCoreShape::split_u_at_steps): "ahead" (by u's own small kernel, 8 bytes a value),
    // "steps" (each mma step splits the float32 values it loads, as it splits v: half of u's
    // bytes, 6 more instructions a step) or "auto", the model's: steps for both (p25, bench/tune,
    // H100: 1.80-1.87 ms against 1.93-2.01 ahead; p32 as gpu_tc_warp_points says).
    Halide::GeneratorParam<std::string> gpu_tc_u_split{"gpu_tc_u_split", "auto"};
    // `model` with round_mtiles, warp_points and the u split resolved (the form rejects a shape
    // it cannot take; an unknown gpu_tc_u_split throws CompileError here).
    blocks::TensorCoreShape shape(blocks::TensorCoreShape model) const;
    // gpu_tc_step_unroll resolved for `shape`; throws CompileError on a value out of range.
    int step_unroll(const blocks::TensorCoreShape &shape) const;
};

// `out` (x, y, c, n), c of extent 1: the pipeline's output, an element-wise function of the
// form's f (inlined). Throws CompileError for a target without CUDA.
// `step_unroll`: TensorCoreParams::step_unroll's.
void gpu_conv2d_min_winograd_tensor_core(blocks::ConvMinWinogradTensorCore &w, Halide::Func out,
                                         const Halide::Target &target, int step_unroll);

}  // namespace fusedconv::schedules
