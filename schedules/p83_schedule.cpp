#include "p83_schedule.h"

namespace fusedconv::schedules {

using namespace Halide;

namespace {

void unroll_3x3x3(Stage update, const P83Pipeline &p) {
    update.specialize(p.kw == 3 && p.kh == 3 && p.kd == 3)
        .unroll(p.conv.r.x)
        .unroll(p.conv.r.y)
        .unroll(p.conv.r.z);
}

// The conv is cheap here (Cin * k^3 = 81 multiply-adds per output) next to
// moving its 441 MB result through memory twice, so it is recomputed where it
// is needed rather than kept: once in the column statistics (a clone of it)
// and once in the output kernel, each time in registers.
//
// GPU: three kernels. (1) per column (x, z, c, n): Welford mean and M2 over
// y, neighbouring threads on neighbouring x;
// (2) tiny: per (group, sample) mean and 1/std; (3) per element: conv,
// normalize, min, clamp, dropout.
// Measured 2026-11-21, NVIDIA H200, default shape (128, 3, 16, 64, 64):
// channel block 4, 4 rows per thread: 5.57 ms median (8 and 2: 6.95 ms; 16
// and 1: 11.3 ms; one channel and one pixel per thread: 6.35 ms, 589 MB peak). With fused block dimensions the per-thread
// conv went to global memory: 7.3 ms, 7.8 GB; ncu then showed both large
// kernels bound by load instructions (LSU ~70%). One thread per row instead
// of per column (uncoalesced): 40.9 ms.
void gpu(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), yii("yii"), zo("zo"), zi("zi"), co("co"),
        ci("ci");
    auto &s = p.stats;
    const int cb = t.gpu_channel_block;

    // Block dimensions are never fused here: with a fused block index Halide
    // cannot prove that a per-thread producer covers one point and puts its
    // storage in global memory. Dimensions beyond a block's three stay serial
    // loops inside each thread.
    //
    // Column statistics: threads over (x, depth), blocks over (x tiles,
    // channel blocks, samples); each thread walks the rest of the depth, and
    // for each y computes a block of channels' conv values at once (the conv
    // clamps its channel index, so a last partial block computes unconsumed
    // extra channels). A wrapper keeps init and update in one kernel.
    Func cols = s.cols.in();
    cols.compute_root()
        .split(v.x, xo, xi, t.gpu_cols_x, TailStrategy::GuardWithIf)
        .split(v.z, zo, zi, t.gpu_cols_z, TailStrategy::GuardWithIf)
        .split(v.c, co, ci, cb, TailStrategy::GuardWithIf)
        .reorder(ci, zo, xi, zi, xo, co, v.n)
        .unroll(ci)
        .gpu_blocks(xo, co, v.n)
        .gpu_threads(xi, zi);
    s.cols.compute_at(cols, zo).bound_extent(v.c, cb).unroll(v.c);
    s.cols.update().reorder(v.c, s.r_col.x).unroll(v.c);
    Func conv_cols = p.conv.f.clone_in(s.cols);
    conv_cols.compute_at(s.cols, s.r_col.x).bound_extent(v.c, cb).unroll(v.c);
    conv_cols.update().reorder(v.c, p.conv.r.x, p.conv.r.y, p.conv.r.z, p.conv.r.w).unroll(v.c);
    unroll_3x3x3(conv_cols.update(), p);

    s.groups.compute_root().gpu_tile(v.g, v.n, xo, yo, xi, yi, 8, 8, TailStrategy::GuardWithIf);
    s.mean.compute_at(s.groups, xi);
    s.m2.compute_at(s.groups, xi);

    // Output: threads over an (x, y) tile, each thread owning
    // gpu_rows_per_thread rows; blocks over (tiles, samples); depth and
    // channel blocks serial in the thread, the block's conv in registers.
    const int rows = t.gpu_rows_per_thread;
    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, t.gpu_tile_x, t.gpu_tile_y * rows,
             TailStrategy::GuardWithIf)
        .split(yi, yi, yii, rows, TailStrategy::GuardWithIf)
        .split(v.c, co, ci, cb, TailStrategy::GuardWithIf)
        .reorder(ci, yii, v.z, co, xi, yi, xo, yo, v.n)
        .unroll(ci)
        .unroll(yii)
        .gpu_blocks(xo, yo, v.n)
        .gpu_threads(xi, yi);
    Func conv = p.conv.f;
    conv.compute_at(out, v.z).bound_extent(v.c, cb).bound_extent(v.y, rows).unroll(v.c).unroll(v.y);
    Stage upd = conv.update();
    upd.reorder(v.c, v.y, p.conv.r.x, p.conv.r.y, p.conv.r.z, p.conv.r.w).unroll(v.c).unroll(v.y);
    unroll_3x3x3(upd, p);
}

// CPU: the same three stages, each parallel over planes and vectorized over x.
void cpu(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    Var zc("zc"), zcn("zcn"), yz("yz"), yzc("yzc"), yzcn("yzcn");
    const int vec = t.cpu_vector;
    auto &s = p.stats;

    s.cols.compute_root().fuse(v.z, v.c, zc).fuse(zc, v.n, zcn).parallel(zcn)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    s.cols.update().reorder(v.x, s.r_col.x).fuse(v.z, v.c, zc).fuse(zc, v.n, zcn).parallel(zcn)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Func conv_cols = p.conv.f.clone_in(s.cols);
    conv_cols.compute_at(s.cols, s.r_col.x).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    conv_cols.update().reorder(v.x, p.conv.r.x, p.conv.r.y, p.conv.r.z, p.conv.r.w)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    unroll_3x3x3(conv_cols.update(), p);

    s.groups.compute_root().parallel(v.n);
    s.mean.compute_at(s.groups, v.g);
    s.m2.compute_at(s.groups, v.g);

    Func out = p.output;
    out.fuse(v.y, v.z, yz).fuse(yz, v.c, yzc).fuse(yzc, v.n, yzcn).parallel(yzcn)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Func conv = p.conv.f;
    conv.compute_at(out, yzcn).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    conv.update().reorder(v.x, p.conv.r.x, p.conv.r.y, p.conv.r.z, p.conv.r.w)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    unroll_3x3x3(conv.update(), p);
}

}  // namespace

void schedule_p83(P83Pipeline &p, const P83Params &t, const Target &target) {
    if (target.has_gpu_feature()) {
        gpu(p, t);
    } else {
        cpu(p, t);
    }
}

}  // namespace fusedconv::schedules
