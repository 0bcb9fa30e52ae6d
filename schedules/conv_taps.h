// How the GPU and CPU schedules treat a convolution's filter taps.
#pragma once

#include "Halide.h"
#include "blocks.h"

#include <vector>

namespace fusedconv::schedules {

// On a specialization for kernels of size 3 in every spatial dimension (the
// models' default), the update's tap loops (conv.r.x, .y and for a 3D conv
// .z) are unrolled, so each tap's weight and input offsets are constants;
// other kernel sizes keep the loops. `extents` are the kernel's (kw, kh[,
// kd]), which also says how many of the RDom's dimensions are taps.
void unroll_taps_of_size_3(Halide::Stage update, const blocks::Conv &conv,
                           const std::vector<Halide::Expr> &extents);

}  // namespace fusedconv::schedules
