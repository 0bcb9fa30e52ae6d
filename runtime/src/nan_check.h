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

// The p25 and p32 forward: `run(true)` computes `output` in the Winograd form,
// `run(false)` in the direct form. With `winograd` (a 3x3 kernel) the
// Winograd form runs first, and its result is recomputed in the direct form
// when it holds NaN: that form makes NaN every output whose tile's input or
// sums are not all finite, where its result could differ from PyTorch's.
template <typename Run>
void run_winograd_or_direct(bool winograd, const Tensor &output, Run run) {
    run(winograd);
    if (winograd && has_nan(output)) run(false);
}

}  // namespace fusedconv::detail
