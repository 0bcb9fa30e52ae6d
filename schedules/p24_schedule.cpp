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
// weights are read from global memory through L1 (97.7% hit rate). A block
// walks the output channels in tiles of groups x channels_per_thread, so any
// Cout runs, and Cout = 24 (8 x 3) leaves no thread idle. Then one thread
// per pixel does the softmax over channels.
// Measured 2026-11-21, NVIDIA H200, default shape, medians:
// - the defaults (10x4 tile, 8 groups x 3 channels, 2x2 sub-tiles of 5x2
//   pixels, 2 depths a thread: 60 sums): 0.432-0.434 ms against 0.450 for
//   the former defaults (10x6 tile, 5x3 pixels, one depth) built from the
//   same source, three runs each. The 4-row tile wastes 2 of the 32 rows it
//   covers, but 5x3 pixels at 2 depths (90 sums) spill. Same runs: 2 depths
//   of 5x1 pixels x 6 channels 0.436; 2 depths on 10x8 tiles (64 threads)
//   0.443; 2 depths of 3x2 pixels 0.488; 3 depths of 5x2 0.444, of 3x2
//   0.465; 2 depths x 2 channels on 96 threads 0.653; 48-thread blocks
//   0.548. The input's depth clamp that blocked depths need
//   (generators/blocks.h) costs the one-depth form 1.5% (0.450 against
//   0.444).
// - the former defaults at one depth: 0.444 ms (22 TFLOP/s; ncu: 8 warps
//   per SM, limited by registers: the driver's JIT takes 255 for this PTX;
//   232M warp
//   instructions, 66% of them FMAs; L1 hit rate 98%); 6x10 0.462; 6x6
//   0.586 (3x3 pixels a thread: fewer FMAs per load).
// - The previous layout, one warp per block with one output channel per lane
//   (Cout <= 32; 8 of the 32 lanes idle at Cout 24) and the input planes and
//   weights staged in shared memory per input channel: 0.476 ms (301M warp
//   instructions).
// - Staging each depth's input planes in shared memory instead of reading
//   them through L1: 0.99 ms (6x10), 1.21 ms (6x6).
// - Unrolling fewer taps, for fewer registers: kx only 0.661 ms, kx and kz
//   0.643 (the driver's JIT then takes 168 registers, 14.7% of the warp
//   slots active instead of 12%, but 26% more instructions).
//   2026-11-22 (medians of two runs each): kx and ky unrolled with the
//   depth taps a rolled loop (as p83's conv has them), inside the input
//   channel loop 0.474 / 0.474, outside it 0.481 / 0.497, against 0.432 /
//   0.430 for the defaults (the thread's 2 depths then reload the input
//   planes they share); at one depth, where nothing is shared, with the depth
//   taps outside the channels: 5x3 pixels 0.458 / 0.456 (all taps unrolled:
//   0.450 / 0.448), 5x4 pixels 0.564 / 0.563, against 0.434 / 0.437.
// - ncu of the defaults (2026-11-22): the load path is not the limit (L1 35%
//   busy, 1.8 wavefronts per global load, 97% hits); per issued
//   instruction the warps stall on fixed-latency dependencies 0.55, dispatch
//   0.48, global loads 0.40: with 8 warps per SM (255 registers) too few
//   warps are ready. So a channel-innermost copy of the weights (p83's),
//   which would only merge the warp's weight loads, was not tried.
// - Winograd F(4, 3) along x (p25's transforms with a depth dimension; the
//   runtime recomputing NaN samples in the direct form; code not kept in
//   this repository), 2026-11-22, medians of three alternating runs
//   against 0.437-0.439 ms for these defaults: 8x4 tiles of 4x2 pixels x 2
//   depths x 3 channels (72 sums) 0.655-0.663; with the transformed taps
//   stored (k, ky, kz) innermost, so their 54 offsets per channel are
//   constants instead of 54 address registers (offline ptxas: 540 bytes of
//   spills -> 8) 0.565-0.581; plus the pixel groups innermost in the thread
//   index 0.536-0.543; 32x8 tiles, so a warp's tap loads are one address,
//   0.581-0.588. Per input channel a thread's PTX has 776 FMAs and 258 loads
//   for 48 outputs, against the direct form's 1620 FMAs for 60: the
//   transformed taps (54 per output channel) feed only 4 FMAs each. The
//   same source with the form left out measured 0.492-0.497: the conv
//   computed inside a split of the channel loop (which the two forms need,
//   to specialize) costs the direct form 12%. Pixel groups innermost for the
//   direct form (30x8 tiles): 0.585-0.589. Not kept.
// - Capping registers (HL_CUDA_JIT_MAX_REGISTERS 168 / 128 / 96, for more
//   warps per SM): 0.564 / 0.543 / 0.672 ms. 2026-11-22, two alternating
//   runs against 0.428-0.440 uncapped: 216 / 200 / 184 (9 / 10 / 11 warps
//   per SM) 0.442-0.445 / 0.442-0.453 / 0.455-0.459.
// - Without dense weights (generators/dense_layout.h), each tap's offset is
//   a runtime stride product held in a register: 0.477 ms (6x10). Requiring
//   a dense input as well changes nothing (0.445 against 0.443, the same
//   232M instructions; 13% of them are the loads' address arithmetic).
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
    out.tile(v.x, v.y, xo, yo, xi, yi, tx, ty, TailStrategy::GuardWithIf)
        .fuse(xi, yi, pix)
        .split(pix, pixo, pixl, threads, TailStrategy::GuardWithIf)
        .reorder(v.c, pixo, pixl, xo, yo, v.n)
        .gpu_threads(pixl)
        .gpu_blocks(xo, yo, v.n);
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

    // One thread's conv at gpu_depth_block depths, in registers. A block
    // of depths past the last one computes clamped planes no one consumes
    // (the min's guard skips them).
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

void schedule_p24(P24Pipeline &p, const P24Params &t, const Target &target) {
    if (target.has_gpu_feature()) {
        gpu(p, t);
    } else {
        cpu(p, t);
    }
}

}  // namespace fusedconv::schedules
