// fc_tensor (the C ABI's view of caller memory) to fusedconv::Tensor, with
// every field checked; messages start with the function and argument names.
#pragma once

#include "fusedconv/fusedconv_c.h"
#include "fusedconv/tensor.h"

namespace fusedconv::capi {

// The shape of `t` ("x", "weight", ... in messages), checked: t not null,
// 1 <= ndim <= FC_MAX_DIMS, device FC_DEVICE_CPU or >= 0 (sizes are checked
// by the shape validation of whoever uses it).
Shape shape_of(const char *fn, const char *name, const fc_tensor *t);
// A Tensor viewing t's memory (nothing copied): the shape checks above, a
// non-null data pointer, positive sizes, and a CUDA device index in range.
Tensor view_of(const char *fn, const char *name, const fc_tensor *t);

}  // namespace fusedconv::capi
