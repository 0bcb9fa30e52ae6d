#include "p83_schedule.h"
#include "conv_taps.h"

#include <algorithm>
#include <string>

namespace fusedconv::schedules {

using namespace Halide;

namespace {

// GPU: four kernels, and the conv is KEPT, not recomputed: (1) the conv,
// into a global buffer (each thread a block of channels over a few rows,
// in registers); (2) per column (x, z, c, n): Welford mean and M2 over y,
// reading (1), neighbouring threads on neighbouring x; (3) tiny: per (group,
// sample) mean and 1/std; (4) per element: normalize, min, clamp, dropout,
// reading (1).
// Measured 2026-11-21, NVIDIA H200, default shape (128, 3, 16, 64, 64):
// recomputing the conv in (2) and (4) instead: 5.14 ms median (column
// statistics 2.87 ms, output 2.06 ms: both bound by load instructions, LSU
// ~70%). Keeping it moves 441 MB out and twice back in (~0.3 ms of DRAM
// traffic) but computes the conv once; peak memory grows by the conv's
// 441 MB (1059 MB in all, against 1093 MB for PyTorch eager). Kept, with the
// parameters and forms below: 1.17 ms median; ncu: conv 0.66 ms (FMA pipe
// 50%), column statistics 0.13 ms, groups 0.03 ms, output 0.33 ms. The
// alternatives measured on the way are noted at each stage.
void gpu(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), yii("yii"), zo("zo"), zi("zi"), co("co"),
        ci("ci"), cn("cn");
    auto &s = p.stats;
    const int cb = t.gpu_channel_block;

    // (1) The conv: threads over an (x, y) tile, each thread owning
    // gpu_rows_per_thread rows; blocks over (tiles, samples); depth and
    // channel blocks serial in the thread, a block of channels' conv in
    // registers. A wrapper (global, read by (2) and (4)) keeps init and
    // update in one kernel. Block dimensions are never fused here: with a
    // fused block index Halide cannot prove that a per-thread producer covers
    // one point and puts its storage in global memory.
    // Measured (H200, whole pipeline): against 1.40 ms for the defaults of
    // the time, channel block 4 1.52 ms, 32x4 threads 1.52, rows 16 1.49;
    // against 1.31 ms, rows 4 1.39; depth chunks as a grid dimension (7-14x
    // more blocks, y tiles a loop in the thread) 1.44-1.59 (ptxas then used
    // all 255 registers and the warps per SM stayed at 8); register caps
    // (HL_CUDA_JIT_MAX_REGISTERS 168 / 128, for more warps per SM) spilled:
    // 1.49 / 1.68. Winograd F(4, 3) along x (6 multiplies per 4 outputs and
    // row of taps instead of 12; transform-domain sums in registers, input
    // transform inlined): 1.34-1.55 ms against 1.15 for this form, same run
    // (255 registers with spills); its code is not kept in this repository.
    // Two or four output depths a thread at once (the depth split, the conv
    // in registers over depths too, so each input row feeds more of them),
    // against 1.127-1.130 ms, same runs: 4 rows x 2 depths 1.256-1.263, 2 x 4
    // 1.505-1.510, channel block 4 x 8 rows x 2 depths 1.245-1.247 (each at
    // 255 registers, small spills in two); 8 rows x 2 depths spilled 1.5 KB.
    const int rows = t.gpu_rows_per_thread;
    // All output channels, rounded up to whole channel blocks: the channel
    // blocks of (2) read that many, and the conv's channel vectors then start
    // at multiples of cb (aligned vector loads of the staged weights). The
    // extra channels repeat the last one (the weights clamp their channel).
    Expr channels = (p.cout + cb - 1) / cb * cb;
    Func conv = p.conv.f;
    Func kept = conv.in();
    kept.compute_root()
        .bound(v.c, 0, channels)
        .tile(v.x, v.y, xo, yo, xi, yi, t.gpu_tile_x, t.gpu_tile_y * rows,
              TailStrategy::GuardWithIf)
        .split(yi, yi, yii, rows, TailStrategy::GuardWithIf)
        .split(v.c, co, ci, cb, TailStrategy::GuardWithIf)
        .reorder(ci, yii, v.z, co, xi, yi, xo, yo, v.n)
        .unroll(ci)
        .unroll(yii)
        .gpu_blocks(xo, yo, v.n)
        .gpu_threads(xi, yi);
    // Vectors of 4 channels (a 16-byte shared load; wider ones are split
    // into 8-byte loads by the PTX backend).
    const int vec = std::min(cb, 4);
    conv.compute_at(kept, v.z).bound_extent(v.c, cb).bound_extent(v.y, rows)
        .vectorize(v.c, vec).unroll(v.c).unroll(v.y);
    // The taps: kx and ky unrolled (on a 3x3 specialization), the input
    // channels inside the depth taps, both rolled loops. Measured (H200,
    // whole pipeline, medians of 10 calls, four runs of two each):
    // 1.097-1.108 ms against 1.117-1.157 with all 27 taps unrolled and the
    // channels outermost; the depth taps rolled inside the channels:
    // 1.113-1.115; only kx unrolled (ky rolled too): 1.326-1.337; ky
    // innermost of the unrolled taps: 1.119-1.125 against 1.101-1.114 (7 rows
    // a thread on 32x9 threads gave no result). ncu (conv
    // kernel): FMA pipe 58% against 55%, issuing 66% of cycles against 61%,
    // the same 8 warps per SM: offline ptxas (sm_90) takes 180 registers for
    // this form, but the driver's JIT still takes 251 (255 before). Capping
    // them (HL_CUDA_JIT_MAX_REGISTERS 184 / 168 / 128) is slower: 1.16 / 1.20
    // / 1.30 ms against 1.10. Smaller thread tiles: 8 rows x 4 channels
    // 1.298-1.309, 4 rows x 8 channels on 16x16 threads 1.287-1.299, 6 rows
    // on 16x11 1.491-1.495 (tiles 16 wide also narrow the output kernel's:
    // 1.623-1.626 with 8 rows x 8 channels).
    Stage upd = conv.update();
    upd.reorder(v.c, v.y, p.conv.r.x, p.conv.r.y, p.conv.r.w, p.conv.r.z)
        .vectorize(v.c, vec).unroll(v.c).unroll(v.y);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh});
    // The weights are first copied (a tiny kernel) into a global buffer with
    // the output channel innermost: a thread's cb channels of one tap are
    // then one 16-byte read-only vector load (the update is vectorized over
    // channels) instead of cb scalar loads. Measured (H200, one run): 1.35 ms;
    // staging them per block in shared memory instead: 1.31 ms, but a block
    // has 48 KB of it (Halide 14 sets no larger limit), so models with more
    // weights would fail to launch; per-block global scratch: 1.41 ms.
    Func w = p.conv.weight;  // w(kx, ky, kz, ci, co)
    Var wf("wf"), wo("wo"), wi("wi");
    w.compute_root().reorder_storage(v.n, v.x, v.y, v.z, v.c)
        .bound(v.n, 0, channels).align_storage(v.n, cb)
        .fuse(v.x, v.y, wf).fuse(wf, v.z, wf).fuse(wf, v.c, wf).fuse(wf, v.n, wf)
        .gpu_tile(wf, wo, wi, 256, TailStrategy::GuardWithIf);

    // (2) Column statistics: threads over (x, depth), blocks over (x tiles,
    // channel blocks, samples); each thread walks the rest of the depth and a
    // block of channels. A wrapper keeps init and update in one kernel.
    // Measured instead (H200; code not kept in this repository): statistics
    // by pieces of 8 rows computed in the conv kernel from its registers
    // (compute_with fuses them into (1)'s depth loop; the conv's storage must
    // then be forced into registers), combined by Chan's formula in (3).
    // Correct, but 1.67 ms (Welford per piece) and 1.86 ms (two passes per
    // piece) against 1.15: the conv kernel spills and issues 42-48% of the
    // time instead of 61% (ncu: 1.17-1.50 ms against 0.84 + 0.13), and (3)
    // reads 8x more partial sums (143 us against 36).
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
    // The rows stay a rolled loop. Measured (H200), whole pipeline: 1.175 ms
    // rolled, 1.242 ms with the rows unrolled by 2 (so that the next rows'
    // loads need not wait for the Welford steps); by 4 slower still.
    s.cols.update().reorder(v.c, s.r_col.x).unroll(v.c);

    // (3) One block per (group, sample). Each sum over a group's columns is
    // split by rfactor into 64 partial sums (x modulo 64), a thread each; one
    // thread then adds the partials. Measured (H200): one thread per (group,
    // sample), 8x8 threads per block (16 blocks in all), took 0.20 ms. The
    // partial sums' depth loop unrolled by 7 (loads in flight together):
    // 39 us against 36 (ncu), whole pipeline unchanged (1.151-1.154 ms).
    // Partials over (x modulo 64, depth modulo 4), 256 threads: 37.9 us
    // against 32.7 (ncu), pipeline 1.134-1.135 against 1.127-1.129 ms.
    Var u("u");
    RVar rxo("rxo"), rxi("rxi");
    s.groups.compute_root().gpu_blocks(v.g, v.n);
    for (auto [f, r] : {std::pair{s.mean, s.r_mean}, std::pair{s.m2, s.r_m2}}) {
        f.compute_at(s.groups, v.g);
        Func partial = f.update(0).split(r.x, rxo, rxi, 64).rfactor(rxi, u);
        partial.compute_at(s.groups, v.g).gpu_threads(u);
        partial.update().gpu_threads(u);
    }
    s.mean.update(1).unscheduled();  // the final division: one thread

    // (4) Element-wise over the kept conv: (x, y) tiles of threads, each
    // thread walking the depth; blocks over (tiles, channels * samples).
    // Measured (H200): one element per thread, blocks over (tiles, depth *
    // channels * samples), took 1.32 ms for 0.87 GB of DRAM traffic. The
    // depth loop unrolled by 2 (ShiftInwards, on a specialization for depth
    // >= 2) took 0.67 ms against 0.45 ms rolled (ncu, same build otherwise).
    // The kernel was compute-bound (ncu: SM throughput 76%, 0.45 ms) while
    // the dropout survivors' v / (1 - p) was an IEEE float32 division; with
    // the exact double-precision form in blocks.cpp it takes 0.34 ms (H200;
    // SM throughput 61%, memory 54%). Vectorizing it along x by 2 or 4
    // (the kept conv's rows padded to a multiple, so loads could be vectors)
    // measured slower: 1.25 / 1.52 ms against 1.18 (H200, one run; ncu: 7%
    // and 135% more instructions, the 62-wide rows falling into the guarded
    // scalar tail).
    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, t.gpu_tile_x, t.gpu_tile_y, TailStrategy::GuardWithIf)
        .fuse(v.c, v.n, cn)
        .reorder(v.z, xi, yi, xo, yo, cn)
        .gpu_blocks(xo, yo, cn)
        .gpu_threads(xi, yi);
    // The depth loop unrolled by gpu_output_depth_unroll, ShiftInwards: where
    // the depth is not a multiple, the last step overlaps the one before (a
    // few elements are written twice, with the same value). It needs a depth
    // of at least the factor, so it is a specialization; below, the loop
    // stays rolled. Measured (H200, default shape, two runs each, whole
    // pipeline): 7 (two steps of 7 at depth 14) 1.147 / 1.152 ms, rolled
    // 1.172 / 1.173, 2 1.187 / 1.187; another run: 7 1.152, 4 1.179-1.185,
    // 14 1.209-1.213. ncu: at 7 the kernel takes 72 registers
    // (32% of the warp slots active instead of 89%) and stalls on memory 6x
    // less per instruction; it issues ~61 instructions per element either way.
    // With min(x, min_value) and the clamp folded into one clamp
    // (blocks::min_then_clamp): 52 per element, 281 us against 313 (ncu),
    // whole pipeline 1.124-1.127 ms against 1.153-1.156 (H200, same runs);
    // then unrolled by 14: 1.148-1.153, by 4: 1.147-1.157, so 7 stays.
    // Several rows a thread (a tile 8 x rows high on the same 32x8 threads,
    // rows unrolled; the thread's index arithmetic, three integer divisions
    // among it, then serves more elements), H200, 2026-11-22, one tuning
    // run, whole pipeline against 1.102 ms: 2 rows 1.183, 4 rows 1.834
    // (depth unrolled by 14: 1 row 1.128, 2 rows 1.380, 4 rows 1.829). ncu
    // (at its locked clocks): warp instructions 177M -> 150M -> 133M, but
    // registers 72 -> 113 -> 241 and the kernel 333 -> 411 -> 1120 us: it is
    // bound by the loads in flight (fewer warps per SM), not by issue. Not
    // kept (code not in this repository).
    const int unroll = t.gpu_output_depth_unroll;
    if (unroll < 1) {
        throw CompileError("p83 GPU schedule: gpu_output_depth_unroll must be at least 1 (1 = "
                           "rolled), not " + std::to_string(unroll));
    }
    if (unroll > 1) {
        Var zo2("zo2"), zi2("zi2");
        out.specialize(out.output_buffer().dim(2).extent() >= unroll)
            .split(v.z, zo2, zi2, unroll, TailStrategy::ShiftInwards)
            .unroll(zi2);
    }
}

// CPU: three stages, each parallel over planes and vectorized over x; the
// conv is recomputed per vector in the column statistics and in the output.
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
    unroll_taps_of_size_3(conv_cols.update(), p.conv, {p.kw, p.kh, p.kd});

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
    unroll_taps_of_size_3(conv.update(), p.conv, {p.kw, p.kh, p.kd});
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
