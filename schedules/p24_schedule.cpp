#include "p24_schedule.h"
#include "conv_taps.h"

#include <string>

namespace fusedconv::schedules {

using namespace Halide;

namespace {

// GPU: ONE kernel. A block owns a gpu_tile_x x gpu_tile_y tile of output
// pixels; its threads are gpu_channel_groups x (gpu_pixel_groups_x x
// gpu_pixel_groups_y): each thread owns gpu_channels_per_thread channels of
// one sub-tile of pixels, whose conv at gpu_depth_block output depths it
// accumulates in registers (an outer product: each input value feeds
// channels_per_thread FMAs per depth it reaches, each weight every pixel of
// the sub-tile), then folds into the depth-min in shared memory. Input and
// weights are read from global memory through L1 (97% hits; staging them in
// shared memory measured 2x slower). A block walks the output channels in
// tiles of groups x channels_per_thread, so any Cout runs, and Cout = 24
// (8 x 3) leaves no thread idle. Then one thread per pixel does the softmax
// over channels.
// NVIDIA H200, 2026-11-26, default shape: 0.41 ms (ncu: 255 registers, 8
// warps per SM, FMA pipe 45%; too few warps ready to hide latency, the load
// path is not the limit). schedules/NOTES.md has the alternatives measured
// (tiles, depths per thread, tap unrolling, register caps, Winograd).
void gpu(P24Pipeline &p, const P24Params &t) {
    blocks::V v;
    const int tx = t.gpu_tile_x, ty = t.gpu_tile_y;
    const int cpt = t.gpu_channels_per_thread, groups = t.gpu_channel_groups;
    const int gx = t.gpu_pixel_groups_x, gy = t.gpu_pixel_groups_y;
    const int threads = groups * gx * gy;
    const int dz = t.gpu_depth_block;
    if (dz < 1) {
        throw CompileError("p24 GPU schedule: gpu_depth_block must be at least 1, not " +
                           std::to_string(dz));
    }
    if (tx % gx != 0 || ty % gy != 0 || threads > 1024) {
        throw CompileError("p24 GPU schedule: a " + std::to_string(tx) + " x " +
                           std::to_string(ty) + " tile cannot split into " + std::to_string(gx) +
                           " x " + std::to_string(gy) + " pixel groups, or " +
                           std::to_string(threads) + " threads per block are more than 1024");
    }
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), pix("pix"), pixo("pixo"), pixl("pixl");
    Func out = p.output;
    auto tile_blocks = [&](Stage s, TailStrategy tail) {
        s.tile(v.x, v.y, xo, yo, xi, yi, tx, ty, tail)
            .fuse(xi, yi, pix)
            .split(pix, pixo, pixl, threads, TailStrategy::GuardWithIf)
            .reorder(v.c, pixo, pixl, xo, yo, v.n)
            .gpu_threads(pixl)
            .gpu_blocks(xo, yo, v.n);
    };
    // Where the output holds a whole tile, the last tiles of a row and a
    // column shift inwards (overlapping their neighbours, the same values
    // written twice), so no thread computes a pixel past the edge and the
    // conv reads its input unclamped (p.xy_inside): one address per row of
    // taps instead of one per column (H200: 8% fewer instructions, 4%
    // faster). Otherwise the last tiles overhang, guarded, reading clamped.
    if (p.xy_inside.defined()) tile_blocks(out.specialize(p.xy_inside), TailStrategy::ShiftInwards);
    tile_blocks(out, TailStrategy::GuardWithIf);
    p.softmax.max_c.compute_at(out, pixo);
    p.softmax.sum_c.compute_at(out, pixo);

    // The tile's depth-min of every channel, in shared memory (x innermost:
    // the softmax's threads, one per pixel, read consecutive words).
    Func mn = p.min_depth.f;
    Var f("f"), fo("fo"), fl("fl");
    mn.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, tx)
        .bound_extent(v.y, ty)
        .fuse(v.x, v.y, f)
        .fuse(f, v.c, f)
        .split(f, fo, fl, threads, TailStrategy::GuardWithIf)
        .gpu_threads(fl);
    Var xg("xg"), xs("xs"), yg("yg"), ys("ys"), ct("ct"), cl("cl"), cg("cg"), ck("ck"), th("th");
    RVar dzo("dzo"), dzi("dzi");
    mn.update()
        .split(v.x, xg, xs, tx / gx)
        .split(v.y, yg, ys, ty / gy)
        .split(v.c, ct, cl, groups * cpt, TailStrategy::GuardWithIf)
        .split(cl, cg, ck, cpt)
        .split(p.min_depth.r.x, dzo, dzi, dz, TailStrategy::GuardWithIf)
        .reorder(ck, xs, ys, dzi, cg, xg, yg, dzo, ct, v.n)
        .fuse(cg, xg, th)
        .fuse(th, yg, th)
        .gpu_threads(th)
        .unroll(ck)
        .unroll(xs)
        .unroll(ys)
        .unroll(dzi);

    // One thread's conv at gpu_depth_block depths, in registers (the input
    // planes the depths share are loaded once). A block of depths past the
    // last one computes clamped planes no one consumes (the min's guard
    // skips them). All taps unrolled on the 3x3x3 specialization: unrolling
    // fewer saves registers but costs more instructions (measured slower).
    Func conv = p.conv.f;
    conv.compute_at(mn, th)
        .store_in(MemoryType::Register)
        .bound_extent(v.c, cpt)
        .bound_extent(v.z, dz)
        .reorder(v.c, v.x, v.y, v.z, v.n)
        .unroll(v.c)
        .unroll(v.x)
        .unroll(v.y)
        .unroll(v.z);
    Stage upd = conv.update();
    upd.reorder(v.c, v.x, v.y, v.z, p.conv.r.x, p.conv.r.y, p.conv.r.z, v.n, p.conv.r.w)
        .unroll(v.c)
        .unroll(v.x)
        .unroll(v.y)
        .unroll(v.z);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh, p.kd});
}

// CPU: rows of (sample, y) in parallel, vectorized over x; per row, the
// depth-min of all channels, then the softmax.
void cpu(P24Pipeline &p, const P24Params &t) {
    blocks::V v;
    Var yn("yn");
    const int vec = t.cpu_vector;
    Func out = p.output;
    out.reorder(v.x, v.c, v.y, v.n)
        .fuse(v.y, v.n, yn)
        .parallel(yn)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    p.softmax.max_c.compute_at(out, yn).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    p.softmax.max_c.update().vectorize(v.x, vec, TailStrategy::GuardWithIf);
    p.softmax.sum_c.compute_at(out, yn).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    p.softmax.sum_c.update().vectorize(v.x, vec, TailStrategy::GuardWithIf);

    // The edge-clamped input rows, staged so the conv's loads stay dense
    // vector loads (the clamps would make gathers).
    p.conv.source.compute_at(out, yn).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Func mn = p.min_depth.f;
    mn.compute_at(out, yn).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    mn.update().reorder(v.x, p.min_depth.r.x, v.c).vectorize(v.x, vec, TailStrategy::GuardWithIf);

    Func conv = p.conv.f;
    conv.compute_at(mn, p.min_depth.r.x).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Stage upd = conv.update();
    upd.reorder(v.x, p.conv.r.x, p.conv.r.y, p.conv.r.z, p.conv.r.w)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh, p.kd});
}

}  // namespace

Expr P24Params::xy_inside(const Target &target, const Expr &in_w, const Expr &in_h,
                          const Expr &kw, const Expr &kh) const {
    if (!target.has_gpu_feature()) return Expr();
    // Written with the input's extents and kw == 3, kh == 3 as terms of their
    // own, so that the taps' 3x3 specialization (which substitutes 3 for kw
    // and kh inside the kernel) leaves the condition the same as the output's
    // specialization on it, and the clamps' selects fold away.
    return kw == 3 && kh == 3 && in_w >= gpu_tile_x + 2 && in_h >= gpu_tile_y + 2;
}

void schedule_p24(P24Pipeline &p, const P24Params &t, const Target &target) {
    if (target.has_gpu_feature()) {
        gpu(p, t);
    } else {
        cpu(p, t);
    }
}

}  // namespace fusedconv::schedules
