// Schedule of count_nan (generators/nan_count.cpp).
#pragma once

#include "Halide.h"

namespace fusedconv::schedules {

// count(n) = 0; count(n) += nan(r.x, r.y, r.z, n), count being the output.
void schedule_count_nan(Halide::Func count, const Halide::RDom &r, const Halide::Target &target);

}  // namespace fusedconv::schedules
