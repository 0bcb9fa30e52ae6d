// The schedules of p25 and p32: conv2d -> min over channels -> epilogue.
//
// GPU: one kernel, one warp per block, after Halide's apps/conv_layer. A block
// owns a tile of output pixels and walks the output channels 32 at a time,
// one channel per lane, each lane computing its channel's conv for the whole
// tile in registers: by Winograd F(4, 3) along x for 3x3 kernels
// (gpu_winograd_x, winograd_x_schedule.cpp), by the direct form otherwise (gpu_direct). Each round of 32
// channels goes to shared memory, where the lanes, now one per pixel, fold it
// into the running channel min; the epilogue follows.
// NVIDIA H200, 2026-11-22, default shapes: p25 3.39 ms, p32 11.80 ms (ncu:
// the Winograd kernel at 209 / 254 registers, 8 warps per SM, FMA pipe
// 40% / 42%, latency-bound). schedules/NOTES.md has what else was measured.
#include "conv2d_min_schedule.h"
#include "conv_taps.h"
#include "conv2d_min_parts.h"
#include "warp_staging.h"
#include "winograd2d_schedule.h"

#include <string>

namespace fusedconv::schedules {

using namespace Halide;

namespace {

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
        gpu_winograd_x(p, t, at, taps);
    }
    gpu_direct(p, t, at);
}

void schedule_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target,
                         WinogradTapsLayout taps, Winograd2DChoice model) {
    if (target.has_gpu_feature() && p.form.dims == WinogradDims::XY) {
        gpu_conv2d_min_winograd2d(p, t, t.wino2d_tiles_x(model), t.wino2d_lanes(model));
    } else if (target.has_gpu_feature()) {
        gpu(p, t, taps);
    } else {
        cpu_conv2d_min(p, t);
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

WinogradForm Conv2dMinParams::winograd_choice(const Target &target, Winograd2DChoice model) const {
    const std::string dims = gpu_winograd_dims;
    if (dims != "x" && dims != "xy") {
        throw CompileError("conv2d-min GPU schedule: gpu_winograd_dims must be x or xy, not \"" +
                           dims + "\"");
    }
    if (gpu_wino2d_max_cin < 0) {
        throw CompileError("conv2d-min GPU schedule: gpu_wino2d_max_cin must be at least 1 (or 0: "
                           "the model's choice), not " + std::to_string(int(gpu_wino2d_max_cin)));
    }
    WinogradForm form;
    form.dims = target.has_gpu_feature() && dims == "xy" ? WinogradDims::XY : WinogradDims::X;
    form.max_cin_2d = gpu_wino2d_max_cin == 0 ? model.max_cin : int(gpu_wino2d_max_cin);
    return form;
}

int Conv2dMinParams::wino2d_tiles_x(Winograd2DChoice model) const {
    return gpu_wino2d_tiles_x == 0 ? model.tiles_x : int(gpu_wino2d_tiles_x);
}

int Conv2dMinParams::wino2d_lanes(Winograd2DChoice model) const {
    return gpu_wino2d_lanes == 0 ? model.lanes : int(gpu_wino2d_lanes);
}

// Each model's measured taps layout and F(4x4, 3x3) choice (schedules/NOTES.md).
void schedule_p25(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    schedule_conv2d_min(p, t, target, taps_layout(t, WinogradTapsLayout::PointsInnermost),
                        kP25Winograd2D);
}

void schedule_p32(Conv2dMinPipeline &p, const Conv2dMinParams &t, const Target &target) {
    schedule_conv2d_min(p, t, target, taps_layout(t, WinogradTapsLayout::ChannelsInnermost),
                        kP32Winograd2D);
}

}  // namespace fusedconv::schedules
