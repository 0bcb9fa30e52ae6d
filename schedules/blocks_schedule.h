// Schedule for the single-block test generators (CPU only): every reduction
// at root, the output parallel over its outermost dimension. Simple on
// purpose: these libraries check the algorithm, not speed.
#pragma once

#include "Halide.h"

#include <vector>

namespace fusedconv::schedules {

void schedule_block(const std::vector<Halide::Func> &at_root, Halide::Func output);

}  // namespace fusedconv::schedules
