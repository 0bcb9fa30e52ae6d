// Schedules of count_nan and count_nan_small (generators/nan_count.cpp).
#pragma once

#include "Halide.h"

namespace fusedconv::schedules {

// count(n) = 0; count(n) += nan(r.x, r.y, r.z, n), count being the output.
void schedule_count_nan(Halide::Func count, const Halide::RDom &r, const Halide::Target &target);

// count(n) = sum(n); sum(n) = 0; sum(n) += nan(r.x, n), count being the output.
void schedule_count_nan_small(Halide::Func count, Halide::Func sum, const Halide::RDom &r,
                              const Halide::Target &target);

}  // namespace fusedconv::schedules
