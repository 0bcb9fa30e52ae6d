// The Winograd product's inner loop on tensor cores: M(p, cout, tile) = sum over cin of
// U(p, cout, cin) V(p, cin, tile), with one warp per 16 output channels x 8 tiles holding all
// 36 transform points in registers (4 floats a point and lane: the 144 registers of
// today's F(4x4, 3x3) sums), as the fused kernels of p25 and p32 would. Each step is one
// mma.sync.m16n8k8 per point, written as the placeholder calls of mma_splice.h. The input
// channel loop runs `reps` times over the same channels, so that the operands stay in L1 and
// the loop's own throughput is measured. Not part of the library (README.md).
#include "Halide.h"
#include "mma_step.h"

namespace {

using namespace Halide;

class TensorCoreProbe : public Generator<TensorCoreProbe> {
public:
    // true: U comes as (tf32, remainder) pairs (fc_mma8s); false: the kernel splits it (fc_mma8).
    GeneratorParam<bool> presplit{"presplit", true};
    // The points a warp sums, and its blocks of 16 output channels x 8 tiles (the sums take
    // 4 x points x m_blocks x n_blocks registers a lane). 36 x 1 x 1 is the fused kernels' shape;
    // fewer points and more blocks reuse each loaded operand m_blocks or n_blocks times.
    GeneratorParam<int> points{"points", 36, 1, 36};
    GeneratorParam<int> m_blocks{"m_blocks", 1, 1, 4};
    GeneratorParam<int> n_blocks{"n_blocks", 1, 1, 4};

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
        r = RDom(0, vf.dim(3).extent(), 0, reps, "r");
        uw(q, l, cg, ks, p) = uf(q, l, cg, ks, p);
        vw(q, l, tg, ks, p) = vf(q, l, tg, ks, p);
        // acc(l, p, mi, ni, tg, cg): block (mi, ni) of the warp's; uf's and vf's groups are
        // cg * m_blocks + mi and tg * n_blocks + ni.
        Expr cgg = cg * m_blocks + mi, tgg = tg * n_blocks + ni;
        acc(l, p, mi, ni, tg, cg) = Tuple(0.f, 0.f, 0.f, 0.f);
        std::vector<Expr> ua, vb;
        for (int j = 0; j < u_row(); j++) ua.push_back(uw(j, l, cgg, r.x, p));
        for (int j = 0; j < 2; j++) vb.push_back(vw(j, l, tgg, r.x, p));
        const std::vector<Expr> vals = fusedconv::blocks::mma_step(acc(l, p, mi, ni, tg, cg), ua, vb);
        acc(l, p, mi, ni, tg, cg) = Tuple(vals);
        // out(e, lane, p, tile group, channel group), whatever the blocks.
        FuncRef a = acc(l, p, cg % m_blocks, tg % n_blocks, tg / n_blocks, cg / m_blocks);
        out(e, l, p, tg, cg) = select(e == 0, a[0], e == 1, a[1], e == 2, a[2], a[3]);
    }

    void schedule() {
        const int nu = u_row();
        // One warp a block, a lane per fragment slot; the points unrolled so that the sums stay
        // in registers (144 at 36 points).
        Var tgo("tgo"), cgo("cgo");
        out.bound(e, 0, 4).bound(l, 0, 32).bound(p, 0, points);
        // Whole warps' blocks only (tc_probe checks the sizes), so that a warp's groups are
        // tgo * n_blocks + ni exactly and its sums' indices constants.
        out.dim(3).set_min(0).set_extent(out.dim(3).extent() / n_blocks * n_blocks);
        out.dim(4).set_min(0).set_extent(out.dim(4).extent() / m_blocks * m_blocks);
        out.split(tg, tgo, ni, n_blocks, TailStrategy::RoundUp).split(cg, cgo, mi, m_blocks, TailStrategy::RoundUp)
            .reorder(e, p, ni, mi, l, tgo, cgo).unroll(e).unroll(p).unroll(ni).unroll(mi)
            .gpu_blocks(tgo, cgo).gpu_lanes(l);
        acc.compute_at(out, l).store_in(MemoryType::Register).unroll(p).unroll(mi).unroll(ni);
        acc.update().reorder(p, mi, ni, r.x, r.y).unroll(p).unroll(mi).unroll(ni);
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
    int u_row() const { return presplit ? 8 : 4; }  // floats of U a lane and step

    Var q{"q"}, e{"e"}, l{"l"}, p{"p"}, tg{"tg"}, cg{"cg"}, ks{"ks"}, mi{"mi"}, ni{"ni"};
    RDom r;
    Func uw{"uw"}, vw{"vw"}, acc{"acc"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(TensorCoreProbe, tensor_core_probe)
