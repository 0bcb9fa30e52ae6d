#include "conv2d_min_parts.h"
#include "warp_staging.h"

namespace fusedconv::schedules {

using namespace Halide;

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
void gpu_winograd_x(Conv2dMinPipeline &p, const Conv2dMinParams &t, const LoopLevel &at,
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

}  // namespace fusedconv::schedules
