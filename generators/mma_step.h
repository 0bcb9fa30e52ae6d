// The generators' side of runtime/src/mma_splice.h: the new accumulator elements of one mma or wgmma
// step, written as the placeholder calls that splice_mma replaces.
#pragma once

#include "Halide.h"

#include <string>
#include <vector>

namespace fusedconv::blocks {

// One step's new accumulator elements as placeholder calls `family`0, `family`1, ...: each call
// takes the old elements, then `operands`, then an anchor (the old elements' sum, after
// `anchor_base` when it is defined); `acc` is the accumulator's Tuple at the thread.
//
// Halide 14's SplitTuples looks for the Func's own components only outside call arguments, so
// it would store the new values one after another, each call reading components already
// updated. The old components bound in lets, each used twice (as an operand and in the anchor,
// so that the simplifier keeps the let), show it the dependence: the new values are then
// computed before any is stored. The splice ignores the anchor, and ptxas drops its arithmetic.
inline std::vector<Halide::Expr> placeholder_step(Halide::FuncRef acc, int elements, const std::string &family,
                                                  const std::vector<Halide::Expr> &operands,
                                                  const Halide::Expr &anchor_base = Halide::Expr()) {
    using namespace Halide;
    using Internal::Call;
    using Internal::Let;
    using Internal::Variable;
    std::vector<Expr> old, vals;
    for (int k = 0; k < elements; k++) old.push_back(Variable::make(Float(32), "old" + std::to_string(k)));
    Expr anchor = anchor_base.defined() ? anchor_base + old[0] : old[0];
    for (int k = 1; k < elements; k++) anchor = anchor + old[k];
    for (int e = 0; e < elements; e++) {
        std::vector<Expr> args = old;
        args.insert(args.end(), operands.begin(), operands.end());
        args.push_back(anchor);
        Expr v = Call::make(Float(32), family + std::to_string(e), args, Call::PureExtern);
        for (int k = elements - 1; k >= 0; k--) v = Let::make("old" + std::to_string(k), acc[k], v);
        vals.push_back(v);
    }
    return vals;
}

// One 3xTF32 step of mma.sync.m16n8k8: `acc` the accumulator's Tuple (c0..c3) at the lane; `a`
// the lane's A elements, 8 for (tf32 values a0..a3, remainders) (fc_mma8s) or 4 to be split in
// the kernel (fc_mma8); `b` its b0, b1. Returns the Tuple update's four values.
inline std::vector<Halide::Expr> mma_step(Halide::FuncRef acc, const std::vector<Halide::Expr> &a,
                                          const std::vector<Halide::Expr> &b) {
    std::vector<Halide::Expr> operands = a;
    operands.insert(operands.end(), b.begin(), b.end());
    return placeholder_step(acc, 4, a.size() == 8 ? "fc_mma8s_d" : "fc_mma8_d", operands);
}

// One 3xTF32 step of wgmma.m64n24k8 (runtime/src/mma_splice.h's fc_wg24 family): `acc` the Tuple
// of the thread's 12 accumulator elements, `a` its 4 A elements (the RS form's fragment, split
// in the kernel), `b_address` the byte address in shared memory of the step's B (tf32 values,
// then 768 bytes on their remainders, as core matrices), and `b_value` a value read from that B:
// the splice reads B through the address only, so without a read Halide would see no use of B's
// Func and drop it (the value joins the anchor). Every thread of the warpgroup must reach the
// step together: no condition on the thread may guard it.
inline std::vector<Halide::Expr> wgmma_step(Halide::FuncRef acc, const std::vector<Halide::Expr> &a,
                                            const Halide::Expr &b_address, const Halide::Expr &b_value) {
    std::vector<Halide::Expr> operands = a;
    operands.push_back(b_address);
    return placeholder_step(acc, 12, "fc_wg24_d", operands, b_value);
}

}  // namespace fusedconv::blocks
