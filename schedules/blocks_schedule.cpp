#include "blocks_schedule.h"

namespace fusedconv::schedules {

void schedule_block(const std::vector<Halide::Func> &at_root, Halide::Func output) {
    for (Halide::Func f : at_root) {
        f.compute_root();
    }
    output.parallel(output.args().back());
}

}  // namespace fusedconv::schedules
