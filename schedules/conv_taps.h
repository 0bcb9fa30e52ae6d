// How the GPU and CPU schedules treat a convolution's filter taps.
#pragma once

#include "Halide.h"
#include "blocks.h"

#include <vector>

namespace fusedconv::schedules {

// On a specialization for kernels of size 3 in the given dimensions (the
// models' default), the update's tap loops over them are unrolled, so each
// tap's weight and input offsets are constants; other kernel sizes keep the
// loops. `extents` are the kernel's (kw[, kh[, kd]]): the first
// extents.size() tap dimensions of conv.r (x, then y, then z) are unrolled,
// the others stay loops whatever their size.
void unroll_taps_of_size_3(Halide::Stage update, const blocks::Conv &conv,
                           const std::vector<Halide::Expr> &extents);

}  // namespace fusedconv::schedules
