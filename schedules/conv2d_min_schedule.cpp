#include "conv2d_min_schedule.h"

namespace fusedconv::schedules {

using namespace Halide;

namespace {

void unroll_3x3(Stage update, const Conv2dMinPipeline &p) {
    update.specialize(p.kw == 3 && p.kh == 3).unroll(p.conv.r.x).unroll(p.conv.r.y);
}

// The running min walks the channels in blocks of `block`; each block's
// convolutions are computed together (the conv clamps its channel index, so
// the last block may run past Cout; those values are never consumed).
void block_channels(Conv2dMinPipeline &p, int block) {
    blocks::V v;
    RVar rco("rco"), rci("rci");
    Func mn = p.min_channels.f;
    mn.update().split(p.min_channels.r.x, rco, rci, block, TailStrategy::GuardWithIf).unroll(rci);
    Func conv = p.conv.f;
    conv.compute_at(mn, rco).bound_extent(v.c, block).unroll(v.c);
}

// GPU: ONE kernel. A thread owns gpu_rows_per_thread output pixels of a
// column; it walks the output channels a block at a time, accumulates the
// block's convolutions for its pixels in registers (each weight load feeds
// one FMA per pixel, each input load one per channel), folds them into
// running mins, then applies the epilogue and writes its pixels.
// Measured 2026-11-21, NVIDIA H200, tile 32x8, channel block 8, 4 rows per
// thread: p25 default shape 14.2 ms median, p32 35.1 ms (17 TFLOP/s). One row
// per thread: p25 12.25 ms, p32 50.5 ms; 2 rows with channel block 16: 21.0 /
// 95.5 ms; 8 rows: 94 / 379 ms (register spills); channel block 32 with one
// row spills too (p32 679 ms).
void gpu(Conv2dMinPipeline &p, const Conv2dMinParams &t) {
    blocks::V v;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), yii("yii");
    const int rows = t.gpu_rows_per_thread;
    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, t.gpu_tile_x, t.gpu_tile_y * rows,
             TailStrategy::GuardWithIf)
        .split(yi, yi, yii, rows, TailStrategy::GuardWithIf)
        .reorder(yii, v.c, xi, yi, xo, yo, v.n)
        .unroll(yii)
        .gpu_blocks(xo, yo, v.n)
        .gpu_threads(xi, yi);
    Func mn = p.min_channels.f;
    mn.compute_at(out, xi).bound_extent(v.y, rows).unroll(v.y);
    block_channels(p, t.gpu_channel_block);
    mn.update().reorder(v.y, RVar("rci"), RVar("rco")).unroll(v.y);
    Func conv = p.conv.f;
    conv.bound_extent(v.y, rows).unroll(v.y);
    Stage upd = conv.update();
    upd.reorder(v.c, v.y, p.conv.r.x, p.conv.r.y, p.conv.r.z).unroll(v.c).unroll(v.y);
    unroll_3x3(upd, p);
}

// CPU: rows in parallel; per vector of output pixels, the channel min of the
// convolution, a block of channels' conv vectors accumulated in registers.
void cpu(Conv2dMinPipeline &p, const Conv2dMinParams &t) {
    blocks::V v;
    Var yn("yn"), xo("xo"), xi("xi");
    const int vec = t.cpu_vector;
    Func out = p.output;
    out.reorder(v.x, v.c, v.y, v.n)
        .fuse(v.y, v.n, yn)
        .parallel(yn)
        .split(v.x, xo, xi, vec, TailStrategy::GuardWithIf)
        .vectorize(xi);
    Func mn = p.min_channels.f;
    mn.compute_at(out, xo).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    block_channels(p, t.cpu_channel_block);
    mn.update().reorder(v.x, RVar("rci"), RVar("rco")).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Func conv = p.conv.f;
    conv.vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Stage upd = conv.update();
    // x outermost: the block's accumulators stay in vector registers over
    // the whole reduction.
    upd.reorder(v.c, p.conv.r.x, p.conv.r.y, p.conv.r.z, v.x)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf)
        .unroll(v.c);
    unroll_3x3(upd, p);
}

}  // namespace

void schedule_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    if (target.has_gpu_feature()) {
        gpu(p, t);
    } else {
        cpu(p, t);
    }
}

}  // namespace fusedconv::schedules
