// GPU schedule of the conv-min F(4x4, 3x3) form on tensor cores
// (generators/winograd2d_tensor_core.h).
#pragma once

#include "winograd2d_tensor_core.h"

namespace fusedconv::schedules {

// `out` (x, y, c, n), c of extent 1: the pipeline's output, an element-wise function of the
// form's f (inlined). Throws CompileError for a target without CUDA.
void gpu_conv2d_min_winograd_tensor_core(blocks::ConvMinWinogradTensorCore &w, Halide::Func out,
                                         const Halide::Target &target);

}  // namespace fusedconv::schedules
