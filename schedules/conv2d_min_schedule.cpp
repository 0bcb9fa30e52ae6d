#include "conv2d_min_schedule.h"
#include "conv_taps.h"
#include "warp_staging.h"

namespace fusedconv::schedules {

using namespace Halide;

namespace {

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

// GPU: ONE kernel, one warp per block, after the layout of Halide's
// conv_layer app. A block owns a gpu_tile_x x gpu_tile_y tile of output
// pixels. It walks the output channels 32 at a time, one channel per lane:
// each lane accumulates its channel's convolution for the whole tile in
// registers (every weight it loads feeds tile_x * tile_y FMAs; every input
// value is one broadcast shared-memory load feeding up to 9 * 32 FMAs across
// the warp). The input tile and the 32 channels' weights are staged in shared
// memory gpu_channel_chunk input channels at a time. Each round of 32
// channels goes to shared memory, where the lanes, now one per pixel, fold
// it into the running channel min; the epilogue follows. The tile is
// computed whole even past the right/bottom edge (the conv clamps its input
// coordinates and channel index; those values are never stored).
// Only the conv is on gpu_lanes (a per-lane register array); the other stages
// use gpu_threads over the same 32 threads, because Halide 14 inserts no
// barriers at all in a kernel whose thread loops are all gpu_lanes.
// Measured 2026-11-21, NVIDIA H200, default shapes: the defaults (16x6
// tile, chunk 8) p25 4.32 ms, p32 14.77 ms (41 TFLOP/s; ncu: FMA pipe 67%
// busy); before the staged weights were padded (below) 4.45 / 15.16, the
// tune.py round that chose them (other tiles in conv2d_min_schedule.h).
// 16x8 tile, chunk 4, round padded: p25 4.48, p32 15.75; ncu
// (p25): FMA pipe 56% busy, 80% of the instructions FFMA, 8 warps per SM
// (254 registers). Before the round's pixels were padded to 33 words
// (below), 16x8 chunk 4: p25 5.61 ms, p32 16.54 (572M shared-memory bank
// conflicts in p25, 52M after).
// Other layouts, measured and not kept (same runs, p25 / p32 ms):
//  - 2 channels per lane (64 per round; 8x8 tile 6.29 / 18.48 with chunk
//    8, 16x4 6.58 / 19.87, 8x4 6.82 / 20.89); 4 per lane (8x4) 14.5 / 29.5;
//    with the padding, 8x8 chunk 8: 5.25 / 17.68. 255 registers, spills.
//  - multi-warp blocks of 8 channel groups x 4x4 pixel groups, each thread
//    an outer product of 8 channels x 4x2 pixels in registers, input and
//    weights read through L1 (like p24): 11.42 / 41.29; with a
//    channel-innermost copy of the weights (16-byte loads) 6.15 / 21.61;
//    8x2 pixels per thread 7.67 / 25.96; 16 groups x 4 channels 22.1 / 81.2.
// Winograd F(4x4, 3x3) alternatives, both slower, kept on branches:
//  - one warp, a lane per output channel (winograd-lane-layout-experiment):
//    p25 7.13 ms, p32 21.1 ms;
//  - multi-warp blocks, products in shared memory, a thread per transform
//    element x 4 tiles x 4 channels (winograd-multiwarp): p25 7.49 ms,
//    p32 25.4 ms; ncu: FMA pipe 16%, stalls on global loads (U, input
//    windows) and on the barriers between its five phases per round.
void gpu(Conv2dMinPipeline &p, const Conv2dMinParams &t) {
    blocks::V v;
    const int lanes = kWarpLanes, tx = t.gpu_tile_x, ty = t.gpu_tile_y, chunk = t.gpu_channel_chunk;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), pix("pix"), pixo("pixo"), pixl("pixl");
    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, tx, ty, TailStrategy::GuardWithIf)
        .reorder(v.c, xi, yi, xo, yo, v.n)
        .fuse(xi, yi, pix)
        .split(pix, pixo, pixl, lanes, TailStrategy::GuardWithIf)
        .reorder(v.c, pixo, pixl)
        .unroll(pixo)
        .gpu_threads(pixl)
        .gpu_blocks(xo, yo, v.n);

    // Running channel min of the tile, in shared memory, one lane per pixel.
    Func mn = p.min_channels.f;
    RVar rk("rk"), rl("rl");
    mn.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, tx)
        .bound_extent(v.y, ty)
        .fuse(v.x, v.y, pix)
        .split(pix, pixo, pixl, lanes)
        .reorder(pixo, pixl)
        .unroll(pixo)
        .gpu_threads(pixl);
    mn.update()
        .split(p.min_channels.r.x, rk, rl, lanes, TailStrategy::GuardWithIf)
        .reorder(rl, v.x, v.y, rk)
        .fuse(v.x, v.y, pix)
        .split(pix, pixo, pixl, lanes)
        .reorder(rl, pixo, pixl, rk)
        .unroll(pixo)
        .gpu_threads(pixl);

    // One round of 32 channels: computed in registers (lane = channel), then
    // copied to shared memory for the min, channels innermost so the lanes
    // write consecutive words. Each pixel's 32 channels are padded to 33
    // words: the fold reads one channel of 32 pixels at a time, 32-way bank
    // conflicts at a stride of 32 words, none at 33.
    Func conv = p.conv.f;
    Func round = conv.in();
    round.compute_at(mn, rk)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, tx)
        .bound_extent(v.y, ty)
        .bound_extent(v.c, lanes)
        .reorder_storage(v.c, v.x, v.y, v.n)
        .align_storage(v.c, lanes + 1)
        .reorder(v.x, v.y, v.c, v.n)
        .gpu_lanes(v.c)
        .unroll(v.x)
        .unroll(v.y);
    conv.compute_at(mn, rk)
        .store_in(MemoryType::Register)
        .reorder(v.x, v.y, v.c, v.n)
        .gpu_lanes(v.c)
        .unroll(v.x)
        .unroll(v.y);
    RVar rzo("rzo"), rzi("rzi");
    Stage upd = conv.update();
    upd.split(p.conv.r.z, rzo, rzi, chunk, TailStrategy::GuardWithIf)
        .reorder(v.x, v.y, p.conv.r.x, p.conv.r.y, rzi, v.c, rzo)
        .gpu_lanes(v.c)
        .unroll(v.x)
        .unroll(v.y);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh});

    // Staged per chunk of input channels: the input window and the weights,
    // stored input-channel-outermost so that the lanes (output channels)
    // read weights kw * kh floats apart: conflict-free for odd kw * kh. Each
    // input channel's 32 output channels are padded to 33 (a stride of
    // 33 * kw * kh words): for 3x3 the lanes stage consecutive (kx, ky, ci)
    // and, at a stride of 288 words, every 9th lane hit the same bank (4-way
    // conflicts). Measured (H200, 16x6 chunk 8): p25 4.45 -> 4.32 ms, p32
    // 15.17 -> 14.77; ncu (p25): bank conflicts 71M -> 2.8M. For
    // 3x3 the staging loops are unrolled with the lanes over consecutive
    // addresses: every lane's loads are issued back to back, so the warp waits
    // for global memory once per chunk. Other kernel sizes take simple loops.
    Var fo("fo"), fl("fl");
    Func src = p.conv.source;
    src.compute_at(conv, rzo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, tx + p.kw - 1)
        .bound_extent(v.y, ty + p.kh - 1)
        .bound_extent(v.c, chunk);
    unrolled_over_warp(src, p.kw == 3 && p.kh == 3, {v.x, v.y, v.c});
    src.split(v.x, fo, fl, lanes, TailStrategy::GuardWithIf).reorder(fo, v.y, v.c, fl).gpu_threads(fl);
    Func w = p.conv.weight;  // w(kx, ky, ci, co)
    w.compute_at(conv, rzo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, p.kw)
        .bound_extent(v.y, p.kh)
        .bound_extent(v.z, chunk)
        .bound_extent(v.c, lanes)
        .reorder_storage(v.x, v.y, v.c, v.z)
        .align_storage(v.c, lanes + 1);
    unrolled_over_warp(w, p.kw == 3 && p.kh == 3, {v.x, v.y, v.z}, {v.c});
    w.reorder(v.x, v.y, v.z, v.c).gpu_threads(v.c);
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
    // The edge-clamped input window of the vector of pixels, staged once so
    // the conv's loads stay dense vector loads (the clamps would make gathers).
    p.conv.source.compute_at(out, xo).vectorize(v.x, vec, TailStrategy::GuardWithIf);
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
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh});
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
