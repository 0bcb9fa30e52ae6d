// p25 (conv2d 3x3 -> min over channels -> tanh -> tanh) as one fused kernel whose Winograd
// F(4x4, 3x3) product runs on tensor cores: the structure schedules/NOTES.md ("Tensor cores
// through a PTX splice") counts for p25. A block owns 16 tiles along x (64 x 4 output pixels)
// of one sample, with 4 warps of 32 threads:
//  1. the transformed input v of its 16 tiles and 16 input channels, staged in shared memory
//     in fragment order (37 KB);
//  2. per round of 16 output channels, each warp sums 9 of the 36 points for 1 x 2 blocks of
//     16 channels x 8 tiles (3xTF32 mma through the placeholders of mma_splice.h) and hands
//     its sums to shared memory (45 KB with the padding below);
//  3. a thread per (channel c8, tile) applies the output transform to channels c8 and c8 + 8
//     and folds them into its running minimum of the tile's 16 pixels (shared, 8 KB);
//  4. the output: the minimum over the 8 channel groups, tanh, tanh.
// The transformed taps come from the host as fragments (mma_splice.h). 91 KB of shared
// memory a block: the launch needs the dynamic shared memory attribute raised (p25_main.cpp).
// Not part of the library (README.md); it has no NaN handling. The library's p25 kernel on
// tensor cores is this structure made general (generators/winograd2d_tensor_core.h).
#include "Halide.h"
#include "mma_step.h"
#include "winograd.h"

namespace {

using namespace Halide;
using fusedconv::blocks::winograd_input_transform;
using fusedconv::blocks::winograd_output_transform;

Expr pick(const Expr &i, const std::vector<Expr> &v) {  // v[i] for a small constant-range i
    Expr e = v.back();
    for (int k = static_cast<int>(v.size()) - 2; k >= 0; k--) e = select(i == k, v[k], e);
    return e;
}

class P25TensorCoreProbe : public Generator<P25TensorCoreProbe> {
public:
    // true: u's fragments come as (tf32, remainder) pairs (8 floats a lane); false: as float32
    // (4 floats a lane, half the bytes), split in the kernel.
    GeneratorParam<bool> presplit{"presplit", true};

    Input<Buffer<float, 4>> input{"input"};  // (x, y, ci, n), 16 input channels
    Input<Buffer<float, 5>> uf{"uf"};        // (q, lane, cg, ks, p): u's fragments, as probe_generator
    Input<Buffer<float, 1>> bias{"bias"};    // (co), 64 output channels
    Output<Buffer<float, 3>> out{"out"};     // (x, y, n)

    void generate() {
        Func src = BoundaryConditions::repeat_edge(input);
        // v = BT d B of the tile (tx, ty): along x per input row, then along y; p = kx + 6 ky.
        std::vector<Expr> dx;
        for (int a = 0; a < 6; a++) dx.push_back(src(4 * tx + a, yy, ci, n));
        vx(kx, yy, tx, ci, n) = pick(kx, winograd_input_transform(dx));
        std::vector<Expr> dy;
        for (int b = 0; b < 6; b++) dy.push_back(vx(kx, 4 * ty + b, tx, ci, n));
        vt(kx, ky, tx, ty, ci, n) = pick(ky, winograd_input_transform(dy));
        // vf(j, t4, g8, tg, ks, p, bx, ty, n): lane 4 g8 + t4 of tile group tg, channel step ks
        // holds b_j = v at tile 16 bx + 8 tg + g8, channel 8 ks + t4 + 4 j (mma_splice.h's
        // layout). The lane's two parts are dimensions of their own, so that each thread's
        // share is a single tile and channel to bounds inference.
        vf(j, t4, g8, tg, ks, p, bx, ty, n) = vt(p % 6, p / 6, 16 * bx + 8 * tg + g8, ty, 8 * ks + t4 + 4 * j, n);
        // The sums of warp w's points 9 w + pi, tile block ni of round r (channels 16 r to
        // 16 r + 15), over 2 steps of 8 input channels.
        rk = RDom(0, 2, "rk");
        uw(q, lane, cg, ks2, p) = uf(q, lane, cg, ks2, p);  // u's fragments, loaded as vectors
        acc(t4, g8, pi, ni, w, r, bx, ty, n) = Tuple(0.f, 0.f, 0.f, 0.f);
        Expr pp = 9 * w + pi;
        std::vector<Expr> ua, vb;
        for (int q = 0; q < u_row(); q++) ua.push_back(uw(q, t4 + 4 * g8, r, rk, pp));
        for (int q = 0; q < 2; q++) vb.push_back(vf(q, t4, g8, ni, rk, pp, bx, ty, n));
        const std::vector<Expr> vals = fusedconv::blocks::mma_step(acc(t4, g8, pi, ni, w, r, bx, ty, n), ua, vb);
        acc(t4, g8, pi, ni, w, r, bx, ty, n) = Tuple(vals);
        FuncRef a = acc(t4, g8, pi, ni, w, r, bx, ty, n);
        mfrag(e, t4, g8, pi, ni, w, r, bx, ty, n) = pick(e, {a[0], a[1], a[2], a[3]});
        // m(p, c, t): the sum at point p of round channel c (0-15) and tile t (0-15).
        Expr g = c % 8, ehi = c / 8, ni_t = t / 8, tt = (t % 8) / 2, elo = t % 2;
        m(p, c, t, r, bx, ty, n) = mfrag(2 * ehi + elo, tt, g, p % 9, ni_t, p / 9, r, bx, ty, n);
        // The output transform of channel c8 + 8 k4: AT along x per row ky, then along y.
        Expr cc = c8 + 8 * k4;
        std::vector<Expr> mx;
        for (int k = 0; k < 6; k++) mx.push_back(m(k + 6 * ky, cc, t, r, bx, ty, n));
        ox(i, ky, k4, c8, t, r, bx, ty, n) = pick(i, winograd_output_transform(mx));
        std::vector<Expr> my;
        for (int l = 0; l < 6; l++) my.push_back(ox(i, l, k4, c8, t, r, bx, ty, n));
        ot(i, j, k4, c8, t, r, bx, ty, n) = pick(j, winograd_output_transform(my)) + bias(16 * r + cc);
        // The minimum of a tile's pixels over the thread's channels c8 and c8 + 8 of every round.
        rc = RDom(0, 2, 0, 4, "rc");  // (k4, round)
        part(c8, t, i, j, bx, ty, n) = Float(32).max();
        part(c8, t, i, j, bx, ty, n) = min(part(c8, t, i, j, bx, ty, n), ot(i, j, rc.x, c8, t, rc.y, bx, ty, n));
        RDom rm(0, 8, "rm");
        Expr mn = minimum(part(rm, (x / 4) % 16, x % 4, y % 4, x / 64, y / 4, n));
        out(x, y, n) = tanh(tanh(mn));
    }

    void schedule() {
        // Every thread nest takes the shape 4 x 8 x 4 (128 threads).
        Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), xh("xh"), xl("xl"), xp("xp");
        out.split(x, xo, xi, 64, TailStrategy::GuardWithIf).split(y, yo, yi, 4, TailStrategy::GuardWithIf)
            .split(xi, xi, xp, 2).split(xi, xh, xl, 4)
            .reorder(xp, xl, xh, yi, xo, yo, n).unroll(xp)
            .gpu_blocks(xo, yo, n).gpu_threads(xl, xh, yi);
        // 1. v staged once per block; its row transform in registers.
        // (Its threads are 4 x 8 x 2, the two channel steps a serial loop: the block's 4 x 8 x 4
        // threads run it with half of them idle.)
        vf.compute_at(out, xo).store_in(MemoryType::GPUShared)
            .bound(j, 0, 2).bound(t4, 0, 4).bound(g8, 0, 8).bound(tg, 0, 2).bound(ks, 0, 2).bound(p, 0, 36)
            .reorder(p, j, ks, t4, g8, tg).unroll(j).unroll(p).gpu_threads(t4, g8, tg);
        vx.compute_at(vf, j).store_in(MemoryType::Register).unroll(kx).unroll(yy);
        // 3. the round minimum; its update's round loop (outermost, at block level) holds step 2.
        Var tl("tl"), th("th");
        // (c8 innermost in part's storage: a warp's threads, 4 tiles x 8 channels, touch 32
        // distinct banks.)
        part.compute_at(out, xo).store_in(MemoryType::GPUShared)
            .bound(i, 0, 4).bound(j, 0, 4).bound(c8, 0, 8).bound(t, 0, 16)
            .split(t, th, tl, 4).reorder(i, j, tl, c8, th).unroll(i).unroll(j)
            .gpu_threads(tl, c8, th);
        part.update().split(t, th, tl, 4).reorder(i, j, rc.x, tl, c8, th, rc.y).unroll(i).unroll(j)
            .unroll(rc.x).gpu_threads(tl, c8, th);
        ot.compute_at(part, rc.x).store_in(MemoryType::Register).unroll(i).unroll(j);
        ox.compute_at(part, rc.x).store_in(MemoryType::Register).unroll(i).unroll(ky);
        // 2. the sums of a round, handed over in shared memory as one 16-byte store a lane and
        // point.
        mfrag.compute_at(part, rc.y).store_in(MemoryType::GPUShared)
            .bound(e, 0, 4).bound(t4, 0, 4).bound(g8, 0, 8).bound(pi, 0, 9).bound(ni, 0, 2)
            .bound(w, 0, 4).reorder(e, pi, ni, t4, g8, w)
            .vectorize(e).unroll(pi).unroll(ni).gpu_threads(t4, g8, w)
            // t4's storage padded to 5, so that the output transform's reads (8 channels g8 x
            // 4 tiles a warp) fall in distinct banks more often: g8's stride is 20 words.
            .align_storage(t4, 5);
        acc.compute_at(mfrag, t4).store_in(MemoryType::Register).unroll(pi).unroll(ni);
        acc.update().reorder(pi, ni, rk).unroll(pi).unroll(ni);
        Var qo("qo"), qi("qi");
        const int nu = u_row();
        uw.compute_at(acc, pi).bound(q, 0, nu).split(q, qo, qi, 4).unroll(qo).vectorize(qi)
            .store_in(MemoryType::Register);
        uf.dim(0).set_min(0).set_stride(1).set_extent(nu);
        uf.dim(1).set_min(0).set_stride(nu).set_extent(32);
        uf.dim(2).set_min(0).set_stride(32 * nu).set_extent(4);  // 4 rounds of 16 channels
        uf.dim(3).set_min(0).set_stride(128 * nu).set_extent(2);
        uf.dim(4).set_min(0).set_stride(256 * nu).set_extent(36);
        input.dim(2).set_min(0).set_extent(16);
        // Blocks at multiples of 64 x 4 pixels, so that a block's tiles are one bx and ty.
        out.dim(0).set_min(0);
        out.dim(1).set_min(0);
        bias.dim(0).set_min(0).set_extent(64);
    }

private:
    int u_row() const { return presplit ? 8 : 4; }  // floats of u a lane and step

    Var x{"x"}, y{"y"}, n{"n"}, kx{"kx"}, ky{"ky"}, yy{"yy"}, tx{"tx"}, ty{"ty"}, ci{"ci"}, j{"j"},
        t4{"t4"}, g8{"g8"}, lane{"lane"}, tg{"tg"}, ks{"ks"}, p{"p"}, bx{"bx"}, pi{"pi"}, ni{"ni"}, w{"w"}, r{"r"},
        e{"e"}, c{"c"}, t{"t"}, i{"i"}, k4{"k4"}, c8{"c8"}, q{"q"}, ks2{"ks2"}, cg{"cg"};
    RDom rk, rc;
    Func vx{"vx"}, vt{"vt"}, vf{"vf"}, acc{"acc"}, uw{"uw"}, mfrag{"mfrag"}, m{"m"}, ox{"ox"}, ot{"ot"},
        part{"part"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(P25TensorCoreProbe, p25_tensor_core_probe)
