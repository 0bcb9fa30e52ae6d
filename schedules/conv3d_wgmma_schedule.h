// GPU schedule of p24's conv and minimum over depth on wgmma (generators/conv3d_wgmma.h), and of
// the softmax over channels after it.
#pragma once

#include "conv3d_wgmma.h"

namespace fusedconv::schedules {

// `out` (x, y, c, n): the softmax of m.f over channels (`softmax`). Throws CompileError for a
// target without CUDA.
void gpu_conv3d_min_depth_wgmma(blocks::ConvMinDepthWgmma &m, blocks::Softmax &softmax, Halide::Func out,
                                const Halide::Target &target);

}  // namespace fusedconv::schedules
