// The Winograd product's inner loop on tensor cores: M(p, cout, tile) = sum over cin of
// U(p, cout, cin) V(p, cin, tile), with one warp per 16 output channels x 8 tiles holding all
// 36 transform points in registers (4 floats a point and lane: the 144 registers of
// today's F(4x4, 3x3) sums), as the fused kernels of p25 and p32 would. Each step is one
// mma.sync.m16n8k8 per point, written as the placeholder calls of mma_splice.h. The input
// channel loop runs `reps` times over the same channels, so that the operands stay in L1 and
// the loop's own throughput is measured. Not part of the library (README.md).
#include "Halide.h"

namespace {

using namespace Halide;
using Halide::Internal::Call;
using Halide::Internal::Let;
using Halide::Internal::Variable;

class TensorCoreProbe : public Generator<TensorCoreProbe> {
public:
    // true: U comes as (tf32, remainder) pairs (fc_mma8s); false: the kernel splits it (fc_mma8).
    GeneratorParam<bool> presplit{"presplit", true};

    // U's fragments: uf(q, lane, cg, ks, p), q 0-3 the lane's A elements (a0..a3 of
    // mma_splice.h), with presplit their tf32 values and q 4-7 the remainders; cg a group of 16
    // output channels, ks a step of 8 input channels.
    Input<Buffer<float, 5>> uf{"uf"};
    // V's fragments: vf(q, lane, tg, ks, p), q 0-1 the lane's b0, b1, 2-3 padding (one 16-byte
    // row a lane); tg a group of 8 tiles.
    Input<Buffer<float, 5>> vf{"vf"};
    Input<int> reps{"reps", 1, 1, 1 << 20};
    // out(e, lane, p, tg, cg): element e of the lane's D fragment.
    Output<Buffer<float, 5>> out{"out"};

    void generate() {
        const int nu = presplit ? 8 : 4;
        r = RDom(0, vf.dim(3).extent(), 0, reps, "r");
        uw(q, l, cg, ks, p) = uf(q, l, cg, ks, p);
        vw(q, l, tg, ks, p) = vf(q, l, tg, ks, p);
        acc(l, p, tg, cg) = Tuple(0.f, 0.f, 0.f, 0.f);
        // Halide 14's SplitTuples looks for the Func's own components only outside call
        // arguments, so it would store the four new values one after another, each call reading
        // components already updated. The old components bound in lets, each used twice (as an
        // operand and in the anchor, so that the simplifier keeps the let), show it the
        // dependence: the four values are then computed before any is stored. The splice
        // ignores the anchor, and ptxas drops its arithmetic.
        std::vector<Expr> vals;
        for (int e = 0; e < 4; e++) {
            std::vector<Expr> args, old;
            for (int j = 0; j < 4; j++) old.push_back(Variable::make(Float(32), "old" + std::to_string(j)));
            args = old;
            for (int j = 0; j < nu; j++) args.push_back(uw(j, l, cg, r.x, p));
            for (int j = 0; j < 2; j++) args.push_back(vw(j, l, tg, r.x, p));
            args.push_back(old[0] + old[1] + old[2] + old[3]);
            const std::string family = presplit ? "fc_mma8s_d" : "fc_mma8_d";
            Expr v = Call::make(Float(32), family + std::to_string(e), args, Call::PureExtern);
            for (int j = 3; j >= 0; j--) v = Let::make("old" + std::to_string(j), acc(l, p, tg, cg)[j], v);
            vals.push_back(v);
        }
        acc(l, p, tg, cg) = Tuple(vals);
        out(e, l, p, tg, cg) = select(e == 0, acc(l, p, tg, cg)[0], e == 1, acc(l, p, tg, cg)[1],
                                      e == 2, acc(l, p, tg, cg)[2], acc(l, p, tg, cg)[3]);
    }

    void schedule() {
        const int nu = presplit ? 8 : 4;
        // One warp a block, a lane per fragment slot; the points unrolled so that the sums stay
        // in registers (144 at 36 points).
        out.bound(e, 0, 4).bound(l, 0, 32).bound(p, 0, 36);
        out.reorder(e, p, l, tg, cg).unroll(e).unroll(p).gpu_blocks(tg, cg).gpu_lanes(l);
        acc.compute_at(out, l).store_in(MemoryType::Register).unroll(p);
        acc.update().reorder(p, r.x, r.y).unroll(p);
        // Each point's operands as 16-byte loads: U's 4 or 8 floats, V's row of 4 (2 used).
        Var qo("qo"), qi("qi");
        uw.compute_at(acc, p).bound(q, 0, nu).split(q, qo, qi, 4).unroll(qo).vectorize(qi)
            .store_in(MemoryType::Register);
        vw.compute_at(acc, p).bound(q, 0, 4).vectorize(q).store_in(MemoryType::Register);
        // Dense fragment arrays from index 0, so that Halide proves the 16-byte alignment.
        for (auto *b : {&uf, &vf}) {
            const int row = b == &uf ? nu : 4;
            (*b).dim(0).set_min(0).set_stride(1).set_extent(row);
            (*b).dim(1).set_min(0).set_stride(row).set_extent(32);
            (*b).dim(2).set_min(0).set_stride(32 * row);
            (*b).dim(3).set_min(0).set_stride((*b).dim(2).extent() * 32 * row);
            (*b).dim(4).set_min(0).set_stride((*b).dim(3).stride() * (*b).dim(3).extent());
        }
    }

private:
    Var q{"q"}, e{"e"}, l{"l"}, p{"p"}, tg{"tg"}, cg{"cg"}, ks{"ks"};
    RDom r;
    Func uw{"uw"}, vw{"vw"}, acc{"acc"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(TensorCoreProbe, tensor_core_probe)
