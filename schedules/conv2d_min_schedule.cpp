#include "conv2d_min_schedule.h"
#include "conv_taps.h"
#include "warp_staging.h"
#include "winograd2d_schedule.h"

#include <string>

namespace fusedconv::schedules {

using namespace Halide;

namespace {

// Where the Winograd form's transformed taps u (per output channel and input
// channel: 6 points x 3 tap rows) lie in global memory, which each lane reads
// for its own output channel (gpu_winograd measures both):
// - ChannelsInnermost: a warp's load of one (point, row) is 128 consecutive
//   bytes, but each of the 18 loads per input channel needs its own address
//   arithmetic (runtime strides);
// - PointsInnermost: a lane's 6 points of a row are consecutive, so the 18
//   loads share 3 addresses (constant offsets; fewer instructions and
//   registers), but a warp's load spans 6 cache lines.
enum class WinogradTapsLayout { ChannelsInnermost, PointsInnermost };

// Whether the pipeline holds the Winograd form (Conv2dMinParams::winograd_form).
bool has_winograd(const Conv2dMinPipeline &p) { return !Internal::is_const_zero(p.use_winograd); }

// The Winograd form (winograd.h) of one round: the same layout, but each
// lane accumulates the 6 transform-domain sums of each 4-pixel tile row of
// the block (6 * tile_x / 4 * tile_y registers, 144 for 16x6): per input
// channel 18 multiplies per tile row instead of 36. Per chunk of
// gpu_winograd_chunk input channels the warp stages in shared memory the
// transformed input rows v (a lane per (tile, row, channel), read straight
// from global memory). The transformed taps u are computed once per call by a
// small kernel, and each lane reads its channel's straight from that global
// buffer (through L1: 32 lanes, 128 consecutive bytes). The output transform
// runs per lane, in registers.
// Measured (H200, same runs, p25 / p32 ms): copying each chunk's taps of the
// round's 32 channels to shared memory first (the former form): 3.70 / 12.30
// against 3.59 / 11.90 reading them from L1. ncu on the former form (p25):
// the load/store unit's data pipe 77% busy (shared loads 48% of its
// wavefronts, shared stores 17%, the staging's global loads 34%), FMA pipe
// 38%, 53% of cycles issuing; the copy made 3 passes over each tap value.
// Two channels per lane (rounds of 64, each staged input row feeding twice
// the FMAs; 144 sums in 16x3 or 8x6 tiles, 192 in 8x8 or 16x4), with the
// taps from L1: p25 3.90-3.92 / p32 12.66-12.73 (16x3, 8x6), 3.89 / 14.2
// (8x8, spills), 3.70 / 13.4 (16x4); not kept. Chunks of 8 or 2 (taps from
// L1): 3.62-3.66 / 13.8 and 3.75 / 13.4. Copying the chunk's input window to
// shared memory first (lanes along x, coalesced) and computing v from that
// copy: 4.31 / 16.3 (chunk 8: 4.22-4.26 / 16.6) against 3.58 / 11.89.
// Staging the transformed rows of ALL input channels once per block (at the
// block level, so the rounds share them; its shared memory grows with Cin,
// so it needed the form limited to small Cin), H200, two runs, p25: 16x6
// 4.16 / 4.18 ms against 3.62 / 3.59 (the block's 32 KB leave 7 blocks per
// SM instead of 8, and the staging no longer overlaps a round); 16x4 3.52 /
// 3.55 against the same 3.62 / 3.59. p32 (64 channels: 37 KB at 16x4) gave
// no result. Not kept: 2% for a Cin limit on the form. The same staging
// shared by two warps, a round of 32 output channels each (64-thread blocks;
// the lanes must stay thread x, so every stage's threads became 32 x 2;
// Halide 14 allows no shared staging inside a loop over warps, hence all
// channels at the block level), 2026-11-22, H200, p25: 5.73 ms against 3.39
// (offline ptxas: 255 registers and 868 bytes of spills; code not kept).
// Other tiles with the taps from L1 (H200, two runs, p25 / p32 ms, against
// 3.58 / 11.90 for 16x6): 16x4 4.04 / 14.79, 8x8 4.47 / 18.3, 8x12 4.71 /
// 15.45 (ptxas: 228, 216 and 254 registers).
// The update's loops otherwise ordered (H200, medians of two runs, p25 / p32
// ms, against 3.59-3.60 / 11.90-11.91): the chunk's channel loop rzi
// unrolled 4.41-4.42 / 17.21-17.28; the tap rows r.x outside rzi 4.98 /
// 23.20-23.29.
// Measured earlier the same day, with the taps still copied to shared memory
// (NVIDIA H200, default shapes, median of 10, same runs; direct form: p25
// 4.72 ms, p32 15.28): 16x6, Winograd chunk 4: p25 4.04,
// p32 12.88 (max abs error vs float64 1.3e-7 / 1.4e-6, direct 1.9e-7 /
// 1.6e-6); with constant staging extents (so the two forms share their
// shared memory) 3.94 / 12.81, and with the direct form's chunk at 4 too
// (the defaults) 3.76 / 12.40 (one later run); 16x4: 4.39 / 14.91; 32x3:
// 6.80 / 25.6; 8x12: 6.94 / 23.4; 24x4: 6.95 / 25.7; 12x8: 9.43 / 35.6.
// Winograd chunk 8, with either direct chunk: failed to launch while the two
// forms' staging sizes were not constants (Halide reserved more than 48 KB);
// once they shared: 4.23 / 13.23. u computed per block from the weights
// instead of copied (16x6, chunk 4): 4.78 / 15.69. Capping registers
// (HL_CUDA_JIT_MAX_REGISTERS=168 for 12 warps per SM) spills: 6.30 / 24.7
// (16x4). 2026-11-22, 16x6 with the taps then channels innermost (254
// registers), two alternating runs against 3.59-3.60 / 11.92-11.94 uncapped:
// caps 216 / 200 / 184 (9 / 10 / 11 warps per SM by registers) 3.80-3.83 /
// 3.92 / 4.08-4.10 for p25, 14.29-14.34 / 14.98 / 16.05-16.14 for p32.
// The kernel's inner loop is 364 instructions for 288 FFMAs per input
// channel (16x4) against 657 for 576 in the direct form; the staging per
// chunk (transformed rows and taps, 6/4 and 2x the direct form's) and 255
// registers (8 warps per SM, the direct-only kernel has 168 and 12) take
// back most of the difference.
// Winograd F(6, 3) along x instead (8 points per 6 outputs: 4 multiplies per
// output and row of taps against 4.5; interpolation points 0, +-1, +-2,
// +-1/2; the tile a GeneratorParam, the schedule unchanged; code not kept in
// this repository), tiles of 96 pixels (F(6, 3) needs tile_x % 6, the fold
// tile_x * tile_y % 32), 128 sums a lane, H200, 2026-11-22, one tuning run,
// p25 / p32 ms against 3.39 / 11.78 for these defaults: 24x4 5.29 / 16.40,
// 12x8 5.76 / 17.82, 48x2 5.72 / 15.93 (Winograd chunk 8: 5.44 / 16.58,
// 5.84 / 17.90, 5.44 / 13.55); max abs difference from the defaults' output
// 8.9e-7 / 7.2e-6. ncu (p25, 24x4): FFMAs only 7% fewer (tiles 24 wide
// waste 4% of a row; more transform and tap loads), warp instructions 1.83G
// against 1.85G, 255 registers against 209 (8 warps per SM either way),
// shared-store bank conflicts 123M against 19M (8 points a tile put the
// lanes' transformed rows 32 words apart), issue 34% of cycles against 54%.
// With the instruction count no lower, it could at best tie.
// Winograd F(4x4, 3x3) (in both x and y) instead, both slower than the direct
// form then (their code is not kept in this repository):
//  - one warp, a lane per output channel:
//    p25 7.13 ms, p32 21.1 ms;
//  - multi-warp blocks, products in shared memory, a thread per transform
//    element x 4 tiles x 4 channels: p25 7.49 ms,
//    p32 25.4 ms; ncu: FMA pipe 16%, stalls on global loads (U, input
//    windows) and on the barriers between its five phases per round.
// Where the time goes (ncu source counters, p25 with its taps then stored
// channels innermost, as p32's still are; H200, 2026-11-22; shares of the
// warps' stall samples): the inner loop per input channel (432 FFMA, 48
// LDS.128 of v, 18 loads of u, 54 integer ops addressing u) 59%; the
// staging of v per chunk 20%, most of it waiting for its global loads (long
// scoreboard); the fold of each round into the channel min 14%; the output
// transform 6%. Per issued instruction a warp waits 0.65 cycles on
// fixed-latency dependencies, 0.63 on global loads, 0.32 on dispatch, 0.31
// on shared loads; issue 55%, FMA pipe 41%, LSU data pipe 60% (1.83
// wavefronts per shared load: a broadcast LDS.128 costs about 2). So at 2
// warps per scheduler (254 registers) the limit is latency, not the load
// path: nothing overlaps a warp's staging loads but the other warp's FMAs.
// Halide 14 cannot prefetch the next chunk: its prefetch directive stops
// with an internal error on the PTX backend (no _halide_prefetch there), and
// it would have every lane prefetch the whole window.
void gpu_winograd(Conv2dMinPipeline &p, const Conv2dMinParams &t, const LoopLevel &at,
                  WinogradTapsLayout taps) {
    blocks::V v;
    blocks::ConvWinogradX &w = p.winograd;
    const int lanes = kWarpLanes, tx = t.gpu_tile_x, ty = t.gpu_tile_y, chunk = t.gpu_winograd_chunk;
    const int T = blocks::kWinogradTile, K = blocks::kWinogradPoints, tiles = tx / T;
    _halide_user_assert(tx % T == 0) << "gpu_tile_x must be a multiple of " << T
                                     << " (Winograd tiles), got " << tx;
    // The form computes 3x3 kernels only, over a constant 3 tap rows: its
    // loops unroll without specializing, and its constant-size staging shares
    // the kernel's shared memory with the direct form's (Halide reserves the
    // larger of the two) instead of growing with the direct form's kernel size.
    const int kh = blocks::kWinogradTaps;

    // The output tiles and the transform-domain sums: per-lane register
    // arrays over (point or pixel of a tile, tile, row), lane = channel.
    auto in_lane_registers = [&](Func f, const Var &point, int points) {
        f.compute_at(at)
            .store_in(MemoryType::Register)
            .bound_extent(point, points)
            .bound_extent(w.t, tiles)
            .bound_extent(v.y, ty)
            .reorder(point, w.t, v.y, v.c, v.n)
            .gpu_lanes(v.c)
            .unroll(point)
            .unroll(w.t)
            .unroll(v.y);
    };
    in_lane_registers(w.tiles, w.i, T);
    Func m = w.m;
    in_lane_registers(m, w.k, K);
    RVar rzo("rzo"), rzi("rzi");
    Stage upd = m.update();
    upd.split(w.r.y, rzo, rzi, chunk, TailStrategy::GuardWithIf)
        .reorder(w.t, w.k, v.y, w.r.x, rzi, v.c, rzo)
        .gpu_lanes(v.c)
        .unroll(w.t)
        .unroll(w.k)
        .unroll(v.y)
        .unroll(w.r.x);

    // v: tiles innermost, so a lane's loads of one (k, row) for the tiles of
    // the row are adjacent (vector loads, broadcast to the warp).
    w.v.compute_at(m, rzo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(w.k, K)
        .bound_extent(w.t, tiles)
        .bound_extent(v.y, ty + kh - 1)
        .bound_extent(v.c, chunk)
        .reorder_storage(w.t, w.k, v.y, v.c, v.n)
        .reorder(w.k, w.t, v.y, v.c, v.n);
    unrolled_over_warp(w.v, Expr(), {w.t, v.y, v.c}, {w.k});
    // u, once per call by a small kernel of its own (a thread per (ci, co)),
    // laid out as `taps` says (WinogradTapsLayout): output channels
    // innermost, so a round's 32 channels of one (point, row, input channel)
    // are 128 consecutive bytes, or the points innermost, then the channels.
    // Measured (H200, 2026-11-22, alternating runs on four machines, medians
    // of 20): points innermost, p25 3.512-3.527 ms against 3.588-3.607 (the
    // kernel's instructions -6.5%, registers 254 -> 209, still 8 warps per
    // SM, now held there by shared memory too; LSU data pipe 60 -> 69%, L1
    // hit rate 84 -> 94%); p32 on two machines 11.47-11.49 against
    // 11.91-11.93, on the other two 12.83-12.88 against 11.91-11.94 (in
    // every call of the process: ncu 12.74-12.81 against 11.84-11.89), so
    // p32 keeps the channels innermost. Same runs, against points innermost
    // (p25 / p32 ms): the 6 points padded to 8 and read as vectors (16 + 8
    // bytes a row) 3.69 / 13.62 against 3.52 / 12.85; the tap rows innermost
    // instead (their 6 addresses a channel) 3.56 / 13.38-13.44 against
    // 3.52-3.53 / 11.47-11.48; Winograd chunks of 8 3.54-3.58 / 12.99
    // against 3.52 / 12.86. A tuning round over tiles x layouts (bench/tune,
    // gpu_winograd_taps; one H200, 2026-11-22, medians of 20, p25 / p32 ms,
    // points / channels innermost): 16x6 3.51 / 3.59 and 11.47-11.52 /
    // 11.90-11.93 (this machine one of the fast ones for p32's points);
    // 16x4 4.01 / 4.05 and 13.9 / 14.3-14.4; 24x4 4.41 / 4.57 and 15.8 /
    // 17.2; 8x8 4.70 / 4.48 and 16.3 / 18.4; 8x4 6.50 / 6.16 and 22.6-22.8 /
    // 22.1-22.5.
    Var zc("zc"), zcb("zcb"), zct("zct");
    w.u.compute_root()
        .bound(w.k, 0, K)
        .bound(v.c, 0, (p.cout + lanes - 1) / lanes * lanes);
    if (taps == WinogradTapsLayout::PointsInnermost) {
        w.u.reorder_storage(w.k, v.c, v.y, v.z);
    } else {
        w.u.reorder_storage(v.c, w.k, v.y, v.z);
    }
    w.u.align_storage(v.c, lanes)
        .reorder(w.k, v.y, v.z, v.c)
        .unroll(w.k)
        .fuse(v.z, v.c, zc)
        .gpu_tile(zc, zcb, zct, 64, TailStrategy::GuardWithIf);
}

// The direct form of one round of conv values: each lane accumulates its
// channel's convolution for the whole tile in registers; every weight it
// loads feeds tile_x * tile_y FMAs, every input value is one broadcast
// shared-memory load feeding up to 9 * 32 FMAs across the warp. The input
// tile and the 32 channels' weights are staged in shared memory
// gpu_channel_chunk input channels at a time.
// Measured 2026-11-21, NVIDIA H200, default shapes, before the Winograd
// form: 16x6 tile, chunk 8 (the defaults then) p25 4.32 ms, p32 14.77 ms
// (41 TFLOP/s; ncu: FMA pipe 67% busy); before the staged weights were
// padded (below) 4.45 / 15.16, the tune.py round that chose them (other
// tiles in conv2d_min_schedule.h).
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
void gpu_direct(Conv2dMinPipeline &p, const Conv2dMinParams &t, const LoopLevel &at) {
    blocks::V v;
    const int lanes = kWarpLanes, tx = t.gpu_tile_x, ty = t.gpu_tile_y, chunk = t.gpu_channel_chunk;
    Func conv = p.conv.f;
    conv.compute_at(at)
        .store_in(MemoryType::Register)
        .bound_extent(v.x, tx)
        .bound_extent(v.y, ty)
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

// The kernel holds both forms (the direct one for other kernel sizes and the
// runtime's recomputation of NaN samples). A kernel with the Winograd form
// only (the direct one in a library of its own) measured no faster: H200,
// 2026-11-22, three alternating runs, p25 3.37-3.40 ms against 3.39-3.40
// (with Winograd chunks of 8: 3.27-3.29 against the tuned build's
// 3.29-3.33), p32 13.59-13.64 against 11.80. So they stay together.
// GPU: ONE kernel, one warp per block, after the layout of Halide's
// conv_layer app. A block owns a gpu_tile_x x gpu_tile_y tile of output
// pixels. It walks the output channels 32 at a time, one channel per lane,
// each lane computing its channel's conv values for the whole tile in
// registers, by the Winograd form for 3x3 kernels (gpu_winograd) or the
// direct form (gpu_direct). Each round of 32 channels goes to shared memory,
// where the lanes, now one per pixel, fold it into the running channel min;
// the epilogue follows. The direct form stays in the kernel for the other
// kernel sizes and for the runtime's recomputation (pipelines.h). The tile is
// computed whole even past the right/bottom edge (the conv clamps its input
// coordinates and channel index; those values are never stored).
// Only the conv is on gpu_lanes (a per-lane register array); the other stages
// use gpu_threads over the same 32 threads, because Halide 14 inserts no
// barriers at all in a kernel whose thread loops are all gpu_lanes.
void gpu(Conv2dMinPipeline &p, const Conv2dMinParams &t, WinogradTapsLayout taps) {
    blocks::V v;
    const int lanes = kWarpLanes, tx = t.gpu_tile_x, ty = t.gpu_tile_y;
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
    // Each lane folds its pixels together (pixo inside rl, unrolled): three
    // independent min chains in flight instead of one after the other.
    // Measured (H200, 2026-11-22, alternating runs, medians of 20), with
    // blocks::nan_min's one comparison and one select: p25 3.387-3.391 ms
    // against 3.456-3.465 one pixel after the other, p32 11.80-11.81 against
    // 11.83-11.85. With the former nan_min (three selects) the interleaved
    // order had measured slower: p25 3.640 against 3.592, p32 11.87 against
    // 11.91-11.92. The running min in registers instead (gpu_lanes,
    // MemoryType::Register, out on gpu_lanes too) stops Halide 14 with an
    // internal error (symbol not found).
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
        .reorder(pixo, rl, pixl, rk)
        .unroll(pixo)
        .gpu_threads(pixl);

    // One round of 32 channels' conv values: computed in registers (lane =
    // channel) by the direct or the Winograd form, then copied to shared
    // memory for the min, channels innermost so the lanes write consecutive
    // words. Each pixel's 32 channels are padded to 33 words: the fold reads
    // one channel of 32 pixels at a time, 32-way bank conflicts at a stride
    // of 32 words, none at 33. conv_value is specialized on use_winograd, and
    // each form's stages are computed inside its outer loop `co` (extent 1),
    // so each path holds only its own.
    Var co("co"), cl("cl");
    Func round = p.conv_value;
    round.compute_at(mn, rk)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, tx)
        .bound_extent(v.y, ty)
        .bound_extent(v.c, lanes)
        .reorder_storage(v.c, v.x, v.y, v.n)
        .align_storage(v.c, lanes + 1)
        .split(v.c, co, cl, lanes)
        .reorder(v.x, v.y, cl, co, v.n)
        .gpu_lanes(cl)
        .unroll(v.x)
        .unroll(v.y);
    const LoopLevel at(round, co);
    if (has_winograd(p)) {
        round.specialize(p.use_winograd);
        gpu_winograd(p, t, at, taps);
    }
    gpu_direct(p, t, at);
}

// CPU: rows in parallel; per vector of output pixels, the channel min of the
// convolution, a block of channels' conv values at a time (conv_value,
// specialized on use_winograd like the GPU's round).
void cpu(Conv2dMinPipeline &p, const Conv2dMinParams &t) {
    blocks::V v;
    Var yn("yn"), xo("xo"), xi("xi"), co("co"), cl("cl");
    const int vec = t.cpu_vector, block = t.cpu_channel_block;
    Func out = p.output;
    out.reorder(v.x, v.c, v.y, v.n)
        .fuse(v.y, v.n, yn)
        .parallel(yn)
        .split(v.x, xo, xi, vec, TailStrategy::GuardWithIf)
        .vectorize(xi);
    // The running min walks the channels in blocks of `block`; each block's
    // conv values are computed together (both forms clamp the channel index,
    // so the last block may run past Cout; those values are never consumed).
    Func mn = p.min_channels.f;
    RVar rco("rco"), rci("rci");
    mn.compute_at(out, xo).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    mn.update()
        .split(p.min_channels.r.x, rco, rci, block, TailStrategy::GuardWithIf)
        .reorder(v.x, rci, rco)
        .unroll(rci)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Func cv = p.conv_value;
    cv.compute_at(mn, rco)
        .bound_extent(v.x, vec)
        .bound_extent(v.c, block)
        .split(v.c, co, cl, block)
        .reorder(v.x, cl, co, v.y, v.n)
        .unroll(cl)
        .vectorize(v.x);
    const LoopLevel at(cv, co);

    // Direct: the block's conv vectors accumulate in registers over the whole
    // reduction (x outermost). The edge-clamped input window is staged first
    // so the conv's loads stay dense vector loads (the clamps would make
    // gathers).
    p.conv.source.compute_at(at).vectorize(v.x, vec, TailStrategy::GuardWithIf);
    Func conv = p.conv.f;
    conv.compute_at(at).bound_extent(v.c, block).unroll(v.c).vectorize(v.x, vec,
                                                                        TailStrategy::GuardWithIf);
    Stage upd = conv.update();
    upd.reorder(v.c, p.conv.r.x, p.conv.r.y, p.conv.r.z, v.x)
        .vectorize(v.x, vec, TailStrategy::GuardWithIf)
        .unroll(v.c);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh});

    if (!has_winograd(p)) return;
    cv.specialize(p.use_winograd);
    // Winograd (for correctness where there is no GPU, not speed): the
    // block's transform-domain sums vectorized over its channels; the
    // transformed taps once per call, channels innermost.
    blocks::ConvWinogradX &w = p.winograd;
    const int K = blocks::kWinogradPoints;
    w.u.compute_root()
        .reorder_storage(v.c, w.k, v.y, v.z)
        .reorder(v.c, w.k, v.y, v.z)
        .vectorize(v.c, block, TailStrategy::GuardWithIf);
    w.m.compute_at(at)
        .bound_extent(w.k, K)
        .bound_extent(v.c, block)
        .reorder(v.c, w.k, w.t, v.y, v.n)
        .vectorize(v.c)
        .unroll(w.k);
    w.m.update().reorder(v.c, w.k, w.t, w.r.x, w.r.y, v.y, v.n).vectorize(v.c).unroll(w.k);
    w.v.compute_at(at).bound_extent(w.k, K).reorder(w.k, w.t, v.y, v.c, v.n).unroll(w.k);
}

void schedule_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target,
                         WinogradTapsLayout taps) {
    if (target.has_gpu_feature() && p.dims == WinogradDims::XY) {
        gpu_conv2d_min_winograd2d(p, t);
    } else if (target.has_gpu_feature()) {
        gpu(p, t, taps);
    } else {
        cpu(p, t);
    }
}

// gpu_winograd_taps as a layout; "auto" is the model's measured one. schedules/search_space.json
// names it as an alias of that value; ctest tune_aliases checks that the two agree.
WinogradTapsLayout taps_layout(const Conv2dMinParams &t, WinogradTapsLayout measured) {
    const std::string taps = t.gpu_winograd_taps;
    if (taps == "auto") return measured;
    if (taps == "points") return WinogradTapsLayout::PointsInnermost;
    if (taps == "channels") return WinogradTapsLayout::ChannelsInnermost;
    throw CompileError("conv2d-min GPU schedule: gpu_winograd_taps must be auto, points or "
                       "channels, not \"" + taps + "\"");
}

}  // namespace

WinogradDims Conv2dMinParams::winograd_dims(const Target &target) const {
    const std::string dims = gpu_winograd_dims;
    if (dims != "x" && dims != "xy") {
        throw CompileError("conv2d-min GPU schedule: gpu_winograd_dims must be x or xy, not \"" +
                           dims + "\"");
    }
    return target.has_gpu_feature() && dims == "xy" ? WinogradDims::XY : WinogradDims::X;
}

// The taps layouts as measured (gpu_winograd's notes).
void schedule_p25(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    schedule_conv2d_min(p, t, target, taps_layout(t, WinogradTapsLayout::PointsInnermost));
}

void schedule_p32(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    schedule_conv2d_min(p, t, target, taps_layout(t, WinogradTapsLayout::ChannelsInnermost));
}

}  // namespace fusedconv::schedules
