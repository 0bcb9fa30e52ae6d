#include "p24_schedule.h"
#include "warp_staging.h"

namespace fusedconv::schedules {

using namespace Halide;

namespace {

// Unroll the taps of a k x k x k convolution for k = 3; the general path loops.
void unroll_3x3x3(Stage update, const blocks::Conv &conv, const P24Pipeline &p) {
    update.specialize(p.kw == 3 && p.kh == 3 && p.kd == 3)
        .unroll(conv.r.x)
        .unroll(conv.r.y)
        .unroll(conv.r.z);
}

// GPU: ONE kernel, one warp per block (the layout of the p25/p32 schedule).
// A block owns a gpu_tile_x x gpu_tile_y tile of output pixels and all
// channels, one channel per lane (Cout <= 32; lanes past Cout compute a
// clamped channel that is never read). Per output depth z, each lane
// accumulates its channel's convolution for the whole tile in registers
// from the input planes staged in shared memory (every input value is one
// broadcast load feeding up to 27 FMAs per lane), then folds it into the
// depth-min in shared memory. Then the lanes, one per pixel, do the softmax
// over channels.
// Measured 2026-11-21, NVIDIA H200, default shape, 8x8 tile: 0.537 ms
// (18 TFLOP/s useful; 32 lanes for 24 channels and 8x8 tiles over 30x30
// pixels execute 1.5x the useful FMAs; ncu: FMA pipe 46% busy). With the
// 6x10 tile (now the default; it divides 30x30) 0.473 ms.
// Tried and slower (branch p24-rows-layout-experiment, H200, one run against
// 0.477 ms): threads over (x, block of 8 channels), 8 rows x 8 channels of
// the conv in registers per thread, the depth-min in shared memory, weight
// loads as channel vectors: 0.617 ms (ncu: 255 registers, 8.5% of the warp
// slots active, FMA pipe 34%).
void gpu(P24Pipeline &p, const P24Params &t) {
    blocks::V v;
    const int lanes = kWarpLanes, tx = t.gpu_tile_x, ty = t.gpu_tile_y;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), pix("pix"), pixo("pixo"), pixl("pixl");
    Var fo("fo"), fl("fl");
    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, tx, ty, TailStrategy::GuardWithIf)
        .fuse(xi, yi, pix)
        .split(pix, pixo, pixl, lanes, TailStrategy::GuardWithIf)
        .reorder(v.c, pixo, pixl, xo, yo, v.n)
        .gpu_threads(pixl)
        .gpu_blocks(xo, yo, v.n);
    p.softmax.max_c.compute_at(out, pixo);
    p.softmax.sum_c.compute_at(out, pixo);

    // Depth-min of the tile, channel-innermost so the lanes (channels) update
    // consecutive words.
    Func mn = p.min_depth.f;
    channel_tile_in_shared(mn, LoopLevel(out, xo), tx, ty, false);
    mn.update()
        .reorder(v.x, v.y, v.c, p.min_depth.r.x)
        .gpu_lanes(v.c)
        .unroll(v.x)
        .unroll(v.y);

    Func conv = p.conv.f;
    conv.compute_at(mn, p.min_depth.r.x)
        .store_in(MemoryType::Register)
        .reorder(v.x, v.y, v.z, v.c, v.n)
        .gpu_lanes(v.c)
        .unroll(v.x)
        .unroll(v.y);
    Stage upd = conv.update();
    upd.reorder(v.x, v.y, v.z, p.conv.r.x, p.conv.r.y, p.conv.r.z, v.c, p.conv.r.w)
        .gpu_lanes(v.c)
        .unroll(v.x)
        .unroll(v.y);
    unroll_3x3x3(upd, p.conv, p);

    // Staged per output depth and input channel: the kd input planes and
    // that channel's weights of all output channels (shared memory stays
    // small for any kernel size: (tile + k - 1)^2 * k + 32 * k^3 floats).
    // For 3x3x3 the staging loops are unrolled so every lane's loads are in
    // flight at once; the weights are stored output-channel-outermost, so
    // the lanes read words kw * kh * kd apart (27: conflict-free).
    Func src = p.conv.source;
    src.compute_at(conv, p.conv.r.w)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, tx + p.kw - 1)
        .bound_extent(v.y, ty + p.kh - 1)
        .bound_extent(v.z, p.kd);
    unrolled_over_warp(src, p.kw == 3 && p.kh == 3 && p.kd == 3, {v.x, v.y, v.z});
    src.split(v.x, fo, fl, lanes, TailStrategy::GuardWithIf)
        .reorder(fo, v.y, v.z, fl)
        .gpu_threads(fl);

    Func w = p.conv.weight;  // w(kx, ky, kz, ci, co)
    w.compute_at(conv, p.conv.r.w)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.n, lanes);
    unrolled_over_warp(w, p.kw == 3 && p.kh == 3 && p.kd == 3, {v.x, v.y, v.z, v.n});
    w.reorder(v.x, v.y, v.z, v.c, v.n).gpu_threads(v.n);
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
    unroll_3x3x3(upd, p.conv, p);
}

}  // namespace

void schedule_p24(P24Pipeline &p, const P24Params &t, const Target &target) {
    if (target.has_gpu_feature()) {
        gpu(p, t);
    } else {
        cpu(p, t);
    }
}

}  // namespace fusedconv::schedules
