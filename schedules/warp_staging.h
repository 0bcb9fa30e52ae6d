// Staging loops of the one-warp-per-block GPU schedules (p25, p32): how a
// Func that is staged in shared memory is loaded by the warp.
#pragma once

#include "Halide.h"

#include <vector>

namespace fusedconv::schedules {

// Threads of a one-warp block.
constexpr int kWarpLanes = 32;

// On the fast path `fast` (a fixed kernel size, so every extent is a
// constant), the loops of `f` over `dims` are fused into one, spread over the
// warp's 32 threads, and each thread's share is unrolled, so all of its loads
// are in flight at once. `inner` loops stay innermost in each thread and are
// unrolled too. The general case keeps whatever loops the caller gives f. An
// undefined `fast` means every extent is constant already: no specialization.
void unrolled_over_warp(Halide::Func f, const Halide::Expr &fast,
                        const std::vector<Halide::Var> &dims,
                        const std::vector<Halide::VarOrRVar> &inner = {});

}  // namespace fusedconv::schedules
