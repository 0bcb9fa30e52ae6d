#include "p83_schedule.h"
#include "conv3d_xy_schedule.h"
#include "conv_taps.h"

#include <algorithm>
#include <string>

namespace fusedconv::schedules {

using namespace Halide;

namespace {

// GPU: four kernels (three in p83_xy_cuda by default, (2) below), and the
// conv is KEPT, not recomputed: (1) the conv, into a global buffer: direct
// (each thread a block of channels over a few rows, in registers) or, in
// p83_xy_cuda, Winograd F(4x4, 3x3) over x and y (gpu_conv_xy below); (2)
// per column (x, z, c, n): Welford mean and M2 over y, reading (1),
// neighbouring threads on neighbouring x (in p83_xy_cuda, by default, the
// statistics' pieces are computed inside (1) instead, and (2) is no kernel);
// (3) tiny: per (group, sample) mean and 1/std; (4) per element: normalize,
// min, clamp, dropout, reading (1). Keeping the conv costs its 441 MB of
// memory and ~0.3 ms of DRAM traffic; recomputing it in (2) and (4)
// measured 4x slower. NVIDIA H200, default shape: 1.11 ms with the direct
// conv (ncu, 2026-11-22: weight copy 3 us, conv 0.64 ms at 43% of the
// float32 peak, column statistics 0.13 ms, group statistics 0.03, output
// 0.28 at 3.0 TB/s), 1.02 with F(4x4, 3x3) (2026-11-26); H100: 0.94 with the
// statistics in the conv kernel and its input channels unrolled by 3
// (fusedconv_bench, 2026-11-27); H200: 0.85 with the output kernel in
// float2s, 0.82 with the runtime's batch in two halves on two streams
// (runtime/src/batch_halves.h; 2026-11-28). schedules/NOTES.md has the
// alternatives measured at each stage.
void gpu_conv_direct(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), yii("yii"), co("co"), ci("ci");
    const int cb = t.gpu_channel_block;

    // (1) The conv: threads over an (x, y) tile, each thread owning
    // gpu_rows_per_thread rows; blocks over (tiles, samples); depth and
    // channel blocks serial in the thread, a block of channels' conv in
    // registers. A wrapper (global, read by (2) and (4)) keeps init and
    // update in one kernel. Block dimensions are never fused here: with a
    // fused block index Halide cannot prove that a per-thread producer covers
    // one point and puts its storage in global memory.
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
    // channels inside the depth taps, both rolled loops: fewer registers than
    // all 27 taps unrolled, and 1-5% faster.
    Stage upd = conv.update();
    upd.reorder(v.c, v.y, p.conv.r.x, p.conv.r.y, p.conv.r.w, p.conv.r.z)
        .vectorize(v.c, vec).unroll(v.c).unroll(v.y);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh});
    // The weights are first copied (a tiny kernel) into a global buffer with
    // the output channel innermost: a thread's cb channels of one tap are
    // then one 16-byte read-only vector load instead of cb scalar loads.
    // (Shared memory would be faster, but its 48 KB a block would limit the
    // models' weights.)
    Func w = p.conv.weight;  // w(kx, ky, kz, ci, co)
    Var wf("wf"), wo("wo"), wi("wi");
    w.compute_root().reorder_storage(v.n, v.x, v.y, v.z, v.c)
        .bound(v.n, 0, channels).align_storage(v.n, cb)
        .fuse(v.x, v.y, wf).fuse(wf, v.z, wf).fuse(wf, v.c, wf).fuse(wf, v.n, wf)
        .gpu_tile(wf, wo, wi, 256, TailStrategy::GuardWithIf);
}

// (1) for gpu_conv_form "xy": Winograd F(4x4, 3x3) over x and y, summed over
// the depth taps and input channels in the transform domain (36 multiplies
// per 4x4 tile, tap plane and channel instead of 144). Blocks over (x
// tiles, y tiles, samples); in each block a serial loop over chunks of
// gpu_xy_depth output depths stages the transformed input of the chunk's
// depths (+ 2) and channels in shared memory, a thread per (tile, depth,
// channel). Then per output depth and round of gpu_xy_lanes channels each
// thread accumulates its tiles' 36 sums over the 27 taps' (depth tap,
// channel) pairs in registers (per pair and tile 36 FFMA and 9 LDS.128 of v;
// 9 LDG.128 of u through L1, 20 KB at p83) and writes the output transform
// to shared memory, which the block's threads then copy to the kept conv
// along x (whole 128-byte lines; a thread per channel would write 4 bytes of
// a line at a time). The direct form (other kernels, more channels, and the
// runtime's recomputation of NaN samples) is the other specialization of
// the per-thread stage, 1 channel x 4 x 4 tiles_per_thread pixels a thread.
// Measured (H200, 2026-11-26; the defaults are bench/tune's best): conv
// kernel 0.66 ms against the direct form's 0.83 at ncu's clocks, whole
// pipeline 1.02-1.04 ms against 1.11 (ncu: 255 registers, 8 warps per SM,
// issue 45%, FMA pipe 29%: the transforms, staging and copy issue as many
// instructions as the 9 (depth tap, channel) pairs' products). With the
// statistics' pieces in this kernel (gpu_xy_stats_in_conv) and blocks of 16
// x 1 tiles: p83 0.952-0.954 ms against 1.092-1.095 with the column kernel
// and 8 x 2 tiles (H100, bench/tune, one call): the kernel grows by less
// than the column kernel took. With the input channels unrolled by 3 (the
// defaults): 0.930-0.936 ms, the best of 18 points around them (H100).
void gpu_conv_xy(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    const Conv3dXYShape xy = t.xy_shape(p.xy_max_cin);
    const int lanes = xy.lanes, bx = xy.block_x(), by = xy.block_y(), cb = t.gpu_channel_block;
    check_conv3d_xy(xy, 4 * bx * by * (lanes + 1), "p83");
    if (bx * by * lanes % xy.threads() != 0) {
        throw CompileError("p83 GPU schedule (gpu_conv_form xy): a block's pixels x channels (" +
                           std::to_string(bx * by * lanes) + ") must be a multiple of its " +
                           std::to_string(xy.threads()) + " threads");
    }
    constexpr int kTile = 4;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), zo("zo"), zi("zi"), co("co"), ci("ci"),
        pa("pa"), pb("pb"), pc("pc"), tx("tx"), tp("tp"), i("i"), j("j"), item("item"),
        pixo("pixo");
    // Rounded up to whole channel blocks, as the direct kernel's: (2) reads
    // that many.
    Expr channels = (p.cout + cb - 1) / cb * cb;
    // The kept conv (global), written from the staged round along x. Rows
    // and columns from 0, so that every thread's pixels are whole tiles (the
    // per-thread extents are then constants).
    // With the statistics by pieces, they read the staged round too; only
    // the element-wise stage reads the kept conv.
    const bool pieces = p.piece_w > 0;
    Func kept = pieces ? p.conv_value.in(p.elementwise) : p.conv_value.in();
    // The copy's loop nest: blocks of fx x fy along x and y, serial chunks of
    // depths and rounds of channels, the block's (x, y, channel) items fused
    // and spread over the threads. (The statistics' pieces take the same
    // nest: compute_with fuses loops by name.)
    auto block_nest = [&](Func f, int fx, int fy) {
        f.split(v.x, xo, xi, fx, TailStrategy::GuardWithIf)
            .split(v.y, yo, yi, fy, TailStrategy::GuardWithIf)
            .split(v.z, zo, zi, xy.depth, TailStrategy::GuardWithIf)
            .split(v.c, co, ci, lanes, TailStrategy::GuardWithIf)
            .reorder(xi, yi, ci, zi, co, zo, xo, yo, v.n)
            .fuse(xi, yi, item)
            .fuse(item, ci, item);
        conv3d_xy_over_threads(f, item, xy, pixo, pa, pb, pc);
        f.reorder(pixo, pa, pb, pc, co, zi, zo, xo, yo, v.n)
            .gpu_threads(pa, pb, pc)
            .gpu_blocks(xo, yo, v.n);
    };
    // Its rows as wide as the output's (the same as out_w, which the shape
    // check requires): the output kernel's specialization on that width
    // being a multiple of its vector then proves the rows' vectors aligned.
    // (Rows padded to the vector instead, align_storage, left each row's last
    // sector partly written at odd widths, which costs the conv kernel a DRAM
    // read a row; NOTES, "The output kernel in float2s".)
    kept.compute_root()
        .bound(v.x, 0, p.output.output_buffer().dim(0).extent())
        .bound(v.y, 0, p.out_h)
        .bound(v.c, 0, channels);
    block_nest(kept, bx, by);
    // The copy unrolled: the fused item's pixel and channel then fold into
    // constants (a rolled loop spent ~30 integer instructions an element).
    kept.unroll(pixo);

    // One depth and round of channels of the block's conv in shared memory,
    // channels innermost and padded to lanes + 1 words (conflict-free for
    // the writes, a lane per channel, and the reads, a lane per pixel).
    // Thread (pa, pb, pc): channel pa, tiles (per_thread pb .. per_thread pb
    // + per_thread - 1, pc) of the block.
    Func round = p.conv_value;
    round.compute_at(kept, co)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, bx)
        .bound_extent(v.y, by)
        .bound_extent(v.z, 1)
        .bound_extent(v.c, lanes)
        .reorder_storage(v.c, v.x, v.y, v.z, v.n)
        .align_storage(v.c, lanes + 1)
        .split(v.x, tx, i, kTile)
        .split(tx, pb, tp, xy.per_thread)
        .split(v.y, pc, j, kTile)
        .reorder(i, j, tp, v.z, v.c, pb, pc, v.n)
        .unroll(i)
        .unroll(j)
        .unroll(tp)
        .gpu_threads(v.c, pb, pc);
    // Each branch computes its own form only (one kernel: its registers are
    // the larger branch's, the Winograd form's 255).
    round.specialize(p.use_winograd);
    if (pieces) {
        // The statistics' pieces (one conv thread's tiles of one channel and
        // depth), a thread each, read back from the staged round in the same
        // thread loop as the copy (compute_with: no phase or barrier of their
        // own), so the conv is written once and read once (by (4)).
        if (p.piece_w != kTile * xy.per_thread || p.piece_h != kTile) {
            throw CompileError("p83 GPU schedule: statistics pieces of " +
                               std::to_string(p.piece_w) + " x " + std::to_string(p.piece_h) +
                               " pixels, not one thread's " + std::to_string(kTile * xy.per_thread) +
                               " x " + std::to_string(kTile));
        }
        // Its loops take the copy's nest: a block's pieces, tiles_x /
        // per_thread x tiles_y x lanes, are one item a thread.
        Func pieces_f = p.stats.cols;  // (x, y) the piece's index
        pieces_f.compute_root()
            .bound(v.x, 0, (p.out_w + p.piece_w - 1) / p.piece_w)
            .bound(v.y, 0, (p.out_h + p.piece_h - 1) / p.piece_h)
            .bound(v.z, 0, p.out_d)
            .bound(v.c, 0, channels);
        block_nest(pieces_f, xy.threads_y(), xy.threads_z());
        pieces_f.compute_with(kept, pa);
        // The sums in registers, computed where the piece is one point (so
        // their extents are known); its rows unrolled, its columns a rolled
        // loop (all 64 pixels unrolled kept more values live and spilled
        // more of the conv's sums: 1.07 ms against 0.99, H100).
        Func sums = p.stats.piece_sums;
        sums.compute_at(pieces_f, pixo).store_in(MemoryType::Register);
        sums.update().reorder(p.stats.r_col.y, p.stats.r_col.x).unroll(p.stats.r_col.y);
    }
    schedule_conv3d_xy(p.winograd, p.conv, p.kw, p.kh, xy, LoopLevel(round, v.c),
                       LoopLevel(kept, zo));
}

// (2) Column statistics: threads over (x, depth), blocks over (x tiles,
// channel blocks, samples); each thread walks the rest of the depth and a
// block of channels. A wrapper keeps init and update in one kernel.
void gpu_column_stats(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    Var xo("xo"), xi("xi"), zo("zo"), zi("zi"), co("co"), ci("ci");
    auto &s = p.stats;
    const int cb = t.gpu_channel_block;
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
    // The rows stay a rolled loop (unrolled by 2 measured 6% slower).
    s.cols.update().reorder(v.c, s.r_col.x).unroll(v.c);
}

void gpu(P83Pipeline &p, const P83Params &t) {
    blocks::V v;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), cn("cn");
    auto &s = p.stats;
    if (p.xy_max_cin > 0) {
        gpu_conv_xy(p, t);
    } else {
        gpu_conv_direct(p, t);
    }

    // (2) Column statistics, unless the conv kernel computed the statistics'
    // pieces.
    if (p.piece_w == 0) {
        gpu_column_stats(p, t);
    }

    // (3) One block per (group, sample). Each sum over a group's columns is
    // split by rfactor into 64 partial sums (x modulo 64), a thread each,
    // accumulated in the thread's registers (14 depths unrolled, so their
    // loads are in flight together) and handed to shared memory once; one
    // thread then adds the partials. 10 us a call (H200, ncu; 12 with 7
    // depths unrolled).
    Var u("u");
    RVar rxo("rxo"), rxi("rxi");
    s.groups.compute_root().gpu_blocks(v.g, v.n);
    for (auto [f, r] : {std::pair{s.mean, s.r_mean}, std::pair{s.m2, s.r_m2}}) {
        f.compute_at(s.groups, v.g);
        RVar rx = r.x;
        if (p.piece_w > 0) {  // the pieces' (px, py) as one index
            RVar rxy("rxy");
            f.update(0).fuse(r.x, r.y, rxy);
            rx = rxy;
        }
        Func partial = f.update(0).split(rx, rxo, rxi, 64).rfactor(rxi, u);
        Func handed = partial.in();
        handed.compute_at(s.groups, v.g).gpu_threads(u);
        partial.compute_at(handed, u).store_in(MemoryType::Register);
        RVar ryo("ryo"), ryi("ryi");
        const RVar rz = p.piece_w > 0 ? r.z : r.y, rc = p.piece_w > 0 ? r.w : r.z;
        partial.update()
            .split(rz, ryo, ryi, 14, TailStrategy::GuardWithIf)
            .reorder(ryi, rxo, ryo, rc)
            .unroll(ryi);
    }
    s.mean.update(1).unscheduled();  // the final division: one thread

    // (4) Element-wise over the kept conv: (x, y) tiles of threads, each
    // thread walking the depth; blocks over (tiles, channels * samples).
    // A tile of 64 x 1 pixels by default: a warp a 62-wide row with float2s
    // (gpu_output_vector, the "xy" library's; H200, p83 0.834-0.836 ms
    // against 0.845-0.851 with 64 x 2 and 0.839-0.844 with 64 x 4; the
    // kernel then at L2's limit, ncu 90%), or two warps of floats.
    const int otx = t.gpu_output_tile_x, oty = t.gpu_output_tile_y;
    if (otx < 1 || oty < 1 || otx * oty > 1024) {
        throw CompileError("p83 GPU schedule: gpu_output_tile_x (" + std::to_string(otx) +
                           ") and gpu_output_tile_y (" + std::to_string(oty) +
                           ") must be positive, with at most 1024 threads a block");
    }
    const int unroll = t.gpu_output_depth_unroll;
    if (unroll < 1) {
        throw CompileError("p83 GPU schedule: gpu_output_depth_unroll must be at least 1 (1 = "
                           "rolled), not " + std::to_string(unroll));
    }
    // The vectors only in the "xy" library, whose output the runtime checks
    // for alignment (P83Params::output_alignment).
    const int vec = t.output_vector(p.xy_max_cin);
    if (vec > 1 && otx % vec != 0) {
        throw CompileError("p83 GPU schedule: gpu_output_tile_x (" + std::to_string(otx) +
                           ") must be a multiple of gpu_output_vector (" + std::to_string(vec) +
                           ")");
    }
    Func out = p.output;
    // Threads over an (x, y) tile of `xs` (x, or x's vectors), each walking
    // the depth; blocks over (tiles, channels * samples).
    auto output_nest = [&](Stage s, VarOrRVar xs, int tx) {
        s.tile(xs, v.y, xo, yo, xi, yi, tx, oty, TailStrategy::GuardWithIf)
            .fuse(v.c, v.n, cn)
            .reorder(v.z, xi, yi, xo, yo, cn)
            .gpu_blocks(xo, yo, cn)
            .gpu_threads(xi, yi);
        // The depth loop unrolled by gpu_output_depth_unroll, ShiftInwards:
        // where the depth is not a multiple, the last step overlaps the one
        // before (a few elements are written twice, with the same value). It
        // needs a depth of at least the factor, so it is a specialization;
        // below, the loop stays rolled. 7 (two steps at depth 14) measured
        // at least 2% faster than a rolled loop and than 2, 4 or 14 (ncu: 6x
        // fewer memory stalls per instruction than rolled, at 72 registers).
        if (unroll > 1) {
            Var zo2("zo2"), zi2("zi2");
            s.specialize(out.output_buffer().dim(2).extent() >= unroll)
                .split(v.z, zo2, zi2, unroll, TailStrategy::ShiftInwards)
                .unroll(zi2);
        }
    };
    if (vec > 1) {
        // Rows of whole vectors: x in vectors of `vec` floats, where the
        // output's width and strides are multiples of it (the kept conv's
        // rows are as wide as the output's: its bound in gpu_conv_xy), so
        // that every vector is aligned. The output's host alignment (the
        // generator's) says the same of its base, which the runtime checks.
        OutputImageParam ob = out.output_buffer();
        Expr whole = ob.dim(0).min() % vec == 0 && ob.dim(0).extent() % vec == 0;
        for (int d = 1; d < 5; d++) whole = whole && ob.dim(d).stride() % vec == 0;
        Var xv("xv"), xw("xw");
        Stage s = out.specialize(whole);
        s.split(v.x, xw, xv, vec, TailStrategy::RoundUp).vectorize(xv);
        output_nest(s, xw, otx / vec);
    }
    output_nest(out, v.x, otx);
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

Conv3dXYShape P83Params::xy_shape(int max_cin) const {
    return {gpu_xy_tiles_x, gpu_xy_tiles_y, gpu_xy_tiles_per_thread, gpu_xy_depth,
            gpu_xy_lanes, max_cin, gpu_xy_cin_unroll};
}

void P83Params::stats_pieces(int max_cin, int &piece_w, int &piece_h) const {
    const bool pieces = max_cin > 0 && gpu_xy_stats_in_conv;
    piece_w = pieces ? 4 * int(gpu_xy_tiles_per_thread) : 0;
    piece_h = pieces ? 4 : 0;
}

int P83Params::output_vector(int max_cin) const {
    const int vec = gpu_output_vector;
    if (vec != 1 && vec != 2 && vec != 4) {
        throw CompileError("p83 GPU schedule: gpu_output_vector must be 1, 2 or 4, not " +
                           std::to_string(vec));
    }
    return max_cin > 0 ? vec : 1;
}

int P83Params::output_alignment(const Target &target) const {
    return 4 * output_vector(xy_max_cin(target));
}

int P83Params::xy_max_cin(const Target &target) const {
    const std::string form = gpu_conv_form;
    if (form != "direct" && form != "xy") {
        throw CompileError("p83 GPU schedule: gpu_conv_form must be direct or xy, not \"" + form +
                           "\"");
    }
    if (gpu_xy_max_cin < 1) {
        throw CompileError("p83 GPU schedule: gpu_xy_max_cin must be at least 1, not " +
                           std::to_string(int(gpu_xy_max_cin)));
    }
    return target.has_gpu_feature() && form == "xy" ? int(gpu_xy_max_cin) : 0;
}

void schedule_p83(P83Pipeline &p, const P83Params &t, const Target &target) {
    if (target.has_gpu_feature()) {
        gpu(p, t);
    } else {
        cpu(p, t);
    }
}

}  // namespace fusedconv::schedules
