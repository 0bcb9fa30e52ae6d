// The schedules of p25 and p32: conv2d -> min over channels -> epilogue.
//
// GPU: one kernel, one warp per block, after Halide's apps/conv_layer. A block
// owns a tile of output pixels and walks the output channels 32 at a time,
// one channel per lane, each lane computing its channel's conv for the whole
// tile in registers: by Winograd F(4, 3) along x for 3x3 kernels
// (gpu_winograd), by the direct form otherwise (gpu_direct). Each round of 32
// channels goes to shared memory, where the lanes, now one per pixel, fold it
// into the running channel min; the epilogue follows.
// NVIDIA H200, 2026-11-22, default shapes: p25 3.39 ms, p32 11.80 ms (ncu:
// the Winograd kernel at 209 / 254 registers, 8 warps per SM, FMA pipe
// 40% / 42%, latency-bound). schedules/NOTES.md has what else was measured.
#include "conv2d_min_schedule.h"
#include "conv_taps.h"
#include "warp_staging.h"
#include "winograd2d_schedule.h"

#include <string>

namespace fusedconv::schedules {

using namespace Halide;

namespace {

// Where the Winograd form's transformed taps u (per output and input
// channel: 6 points x 3 tap rows) lie in global memory. Channels innermost:
// a warp's load of one (point, row) is 128 consecutive bytes. Points
// innermost: a lane's 18 loads per input channel share 3 addresses (fewer
// instructions and registers), but a warp's load spans 6 cache lines.
enum class WinogradTapsLayout { ChannelsInnermost, PointsInnermost };

// Whether the pipeline holds the Winograd form (Conv2dMinParams::winograd_form).
bool has_winograd(const Conv2dMinPipeline &p) { return !Internal::is_const_zero(p.use_winograd); }

// The Winograd form (winograd.h) of one round: the same layout, but each
// lane accumulates the 6 transform-domain sums of each 4-pixel tile row of
// the block (6 * tile_x / 4 * tile_y registers, 144 for 16x6): per input
// channel 18 multiplies per tile row instead of 36. Per chunk of
// gpu_winograd_chunk input channels the warp stages the transformed input
// rows v in shared memory (a lane per (tile, row, channel), read straight
// from global memory). The transformed taps u are computed once per call by
// a small kernel, and each lane reads its channel's from that global buffer
// through L1 (a shared-memory copy measured 3% slower). The output
// transform runs per lane, in registers.
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
    // laid out as `taps` says. Points innermost measured 2% faster for p25;
    // p32 measured faster on some H200s and slower on others, so it keeps
    // the channels innermost (schedules/NOTES.md).
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
    // input channel's 32 output channels are padded to 33 words, or for 3x3
    // every 9th lane staging them hits the same bank (ncu: 25x the
    // conflicts, 3% slower). For 3x3 the staging loops are unrolled with
    // the lanes over consecutive addresses, so the warp waits for global
    // memory once per chunk; other kernel sizes take simple loops.
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

// The kernel (see the top of this file). It holds both forms: the direct one
// serves other kernel sizes and the runtime's recomputation of NaN samples
// (pipelines.h), and a Winograd-only kernel measured no faster. The tile is
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
    // independent min chains in flight, 2% faster for p25 than one pixel
    // after the other. (A running min in registers stops Halide 14 with an
    // internal error.)
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

// Each model\'s measured taps layout (schedules/NOTES.md).
void schedule_p25(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    schedule_conv2d_min(p, t, target, taps_layout(t, WinogradTapsLayout::PointsInnermost));
}

void schedule_p32(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    schedule_conv2d_min(p, t, target, taps_layout(t, WinogradTapsLayout::ChannelsInnermost));
}

}  // namespace fusedconv::schedules
