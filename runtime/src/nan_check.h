// Whether a 4D result holds a NaN: the check that tells the p25 and p32
// models to recompute a Winograd result in the direct form (the Winograd form
// marks with NaN every tile where it does not give the direct form's result;
// generators/winograd.h).
#pragma once

#include "fusedconv/tensor.h"

namespace fusedconv::detail {

// `t` must be a 4D tensor (on either device); throws Error naming its shape
// otherwise. On the GPU: one small kernel, and N int32 counts copied to the
// host.
bool has_nan(const Tensor &t);

}  // namespace fusedconv::detail
