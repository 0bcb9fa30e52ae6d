#include "conv_taps.h"

namespace fusedconv::schedules {

using namespace Halide;

void unroll_taps_of_size_3(Stage update, const blocks::Conv &conv,
                           const std::vector<Expr> &extents) {
    Expr all_3 = extents.at(0) == 3;
    for (size_t i = 1; i < extents.size(); ++i) all_3 = all_3 && extents[i] == 3;
    Stage fast = update.specialize(all_3);
    const RVar taps[] = {conv.r.x, conv.r.y, conv.r.z};
    for (size_t i = 0; i < extents.size(); ++i) fast.unroll(taps[i]);
}

}  // namespace fusedconv::schedules
