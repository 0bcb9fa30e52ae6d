#include "warp_staging.h"

namespace fusedconv::schedules {

using namespace Halide;

void unrolled_over_warp(Func f, const Expr &fast, const std::vector<Var> &dims,
                        const std::vector<VarOrRVar> &inner) {
    Var fused("f"), fo("fo"), fl("fl");
    Stage s = fast.defined() ? f.specialize(fast) : Stage(f);
    s.fuse(dims.at(0), dims.at(1), fused);
    for (size_t i = 2; i < dims.size(); ++i) s.fuse(fused, dims[i], fused);
    s.split(fused, fo, fl, kWarpLanes, TailStrategy::GuardWithIf);
    std::vector<VarOrRVar> order(inner);
    order.push_back(fo);
    order.push_back(fl);
    s.reorder(order).unroll(fo);
    for (const VarOrRVar &v : inner) s.unroll(v);
    s.gpu_threads(fl);
}

}  // namespace fusedconv::schedules
