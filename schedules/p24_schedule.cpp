#include "p24_schedule.h"

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

// GPU: ONE kernel. Each block owns a tile of output pixels of one sample; the
// depth-min of every channel of the tile lives in shared memory. Each thread
// computes its pixel's convolutions a block of channels at a time, depth by
// depth (the block's conv values never leave registers; the conv clamps its
// channel index, so the last block may run past Cout unconsumed), then the
// softmax reads the shared min.
// Measured 2026-11-21, NVIDIA H200, default shape (128, 3, 24, 32, 32), tile
// 16x8, channel block 8, 2 rows per thread: 1.42 ms median (1 row: 1.44 ms;
// no channel blocking: 2.22 ms; channel block 12: 3.05 ms; 4 rows with a
// 16x16 tile: 3.6 ms).
void gpu(P24Pipeline &p, const P24Params &t) {
    blocks::V v;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, t.gpu_tile_x, t.gpu_tile_y, TailStrategy::GuardWithIf)
        .reorder(v.c, xi, yi, xo, yo, v.n)
        .gpu_blocks(xo, yo, v.n)
        .gpu_threads(xi, yi);
    p.softmax.max_c.compute_at(out, xi);
    p.softmax.sum_c.compute_at(out, xi);

    Func mn = p.min_depth.f;
    mn.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .reorder(v.c, v.x, v.y, v.n)
        .gpu_threads(v.x, v.y);
    // The depth-min: each thread owns gpu_rows_per_thread rows of a pixel
    // column, so each weight load feeds that many FMAs.
    Var co("co"), ci("ci"), yt("yt"), yy("yy");
    const int rows = t.gpu_rows_per_thread;
    mn.update()
        .split(v.c, co, ci, t.gpu_channel_block, TailStrategy::GuardWithIf)
        .split(v.y, yt, yy, rows, TailStrategy::GuardWithIf)
        .reorder(ci, yy, p.min_depth.r.x, co, v.x, yt, v.n)
        .unroll(ci)
        .unroll(yy)
        .gpu_threads(v.x, yt);

    Func conv = p.conv.f;
    conv.compute_at(mn, p.min_depth.r.x)
        .bound_extent(v.c, t.gpu_channel_block)
        .bound_extent(v.y, rows)
        .unroll(v.c)
        .unroll(v.y);
    Stage upd = conv.update();
    upd.reorder(v.c, v.y, p.conv.r.x, p.conv.r.y, p.conv.r.z, p.conv.r.w).unroll(v.c).unroll(v.y);
    unroll_3x3x3(upd, p.conv, p);
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
