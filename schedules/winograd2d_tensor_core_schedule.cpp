#include "winograd2d_tensor_core_schedule.h"

#include <algorithm>

namespace fusedconv::schedules {

using namespace Halide;

blocks::TensorCoreShape TensorCoreParams::shape(blocks::TensorCoreShape model) const {
    if (gpu_tc_round_mtiles != 0) model.round_mtiles = gpu_tc_round_mtiles;
    if (gpu_tc_warp_points != 0) model.warp_points = gpu_tc_warp_points;
    const std::string split = gpu_tc_u_split;
    if (split == "ahead" || split == "steps") {
        model.split_u_at_steps = split == "steps";
    } else if (split != "auto") {
        throw CompileError("gpu_tc_u_split must be auto, ahead or steps, not \"" + split + "\"");
    }
    return model;
}

int TensorCoreParams::step_unroll(const blocks::TensorCoreShape &shape) const {
    const int steps = shape.max_cin / blocks::kTensorCoreStep, u = gpu_tc_step_unroll;
    if (u == 0) return steps;
    if (u < 1 || u > steps) {
        throw CompileError("gpu_tc_step_unroll must be 1 to " + std::to_string(steps) +
                           " (the steps of " + std::to_string(blocks::kTensorCoreStep) + " of " +
                           std::to_string(shape.max_cin) +
                           " input channels; 0: the default), not " + std::to_string(u));
    }
    return u;
}

// One kernel. A block of 4 warps (8 with round_mtiles 2) owns 16 tiles along x of one sample,
// 64 x 4 output pixels:
//  1. v of its tiles and max_cin input channels (16 for p25, 64 for p32), staged once in
//     shared memory in B-fragment order (37 KB, p32 147 KB), its row transform in registers;
//  2. per round of 16 output channels (32 with round_mtiles 2), each warp's mma steps (9
//     points x 2 tile groups x max_cin / 8 steps, all unrolled by default) into registers,
//     handed to shared memory (54 KB with the padding; 72 KB with round_mtiles 2);
//  3. the output transform, a thread per (channel c8, tile), 4 warps, folded into the running
//     minimum of its channels c8 + 8 k (shared, 8 KB);
//  4. the output: the minimum over the 8 channel groups and the epilogue.
// p25: 98 KB of shared memory a block, past the 48 KB a launch gets without the kernel's
// attribute raised (the runtime's launch hook does it): 2 blocks, 8 warps per SM. p32: 209 KB,
// one block of 12 warps (3 points a warp). u's fragments are a small kernel of their own
// (float32 values, which the steps split: p25 147 KB for its 64 output channels, p32 1.2 MB
// for its 128), read by every block through L1.
// p25 (128 x 16 x 256 x 256), H200: 1.64 ms with u split at the steps (the split ahead was
// 7% slower, H100); ncu: 184 registers, issue 51%, L1 65%, L2 25%, tensor pipe 23%: bound by
// issuing the splits' and loads' instructions (schedules/NOTES.md, "The split in 3
// instructions").
// p32 (64 x 64 x 256 x 256), H200: 4.23 ms (bench/tune) with 12 warps of 3 points, u split at
// the steps and its 8 steps unrolled, against 4.83 with 4 warps of 9 points split ahead (NOTES,
// "The split in 3 instructions").
void gpu_conv2d_min_winograd_tensor_core(blocks::ConvMinWinogradTensorCore &w, Func out,
                                         const Target &target, int step_unroll) {
    if (!target.has_feature(Target::CUDA)) {
        throw CompileError("the tensor-core F(4x4, 3x3) form compiles for CUDA targets only, not " +
                           target.to_string());
    }
    blocks::V v;
    const int T = blocks::kWinogradTile, BT = blocks::kTensorCoreBlockTiles,
              steps = w.shape.max_cin / blocks::kTensorCoreStep, mtiles = w.shape.round_mtiles;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), xh("xh"), xl("xl"), xp("xp"), th("th"), tl("tl"),
        ql("ql"), kp("kp"), kt("kt"), kto("kto"), g8("g8"), wk("wk");
    RVar rko("rko"), rki("rki");

    // Threads: 4 x 8 over x (2 pixels each) and 4 rows of y.
    out.bound(v.c, 0, 1)
        .split(v.x, xo, xi, T * BT, TailStrategy::GuardWithIf)
        .split(v.y, yo, yi, T, TailStrategy::GuardWithIf)
        .split(xi, xi, xp, 2)
        .split(xi, xh, xl, 4)
        .reorder(xp, xl, xh, yi, v.c, xo, yo, v.n)
        .unroll(xp)
        .gpu_blocks(xo, yo, v.n)
        .gpu_threads(xl, xh, yi);
    // 4. A pixel's 8 channel groups read as two 16-byte vectors: read one at a time, a warp's
    // 32 pixels fell on 4 banks (8-way conflicts).
    w.groups.compute_at(out, xp).store_in(MemoryType::Register).bound(w.k, 0, 8).vectorize(w.k, 4);

    // 1. v staged once per block, a thread per (lane, tile group, step): 4 x 8 x 4 with 4 warps
    // (the items split by the most warps that divide them), past that each thread takes the
    // other steps in a serial loop (the steps a serial loop on half the threads was 5% slower
    // for p25).
    // Both shared allocations are one block's (bound_storage on bx and ty): else the host
    // computed their size by a loop over every block before the launch (p25 65 us, p32 34 us).
    int stagers = std::min(w.shape.warps(), 2 * steps);
    while ((2 * steps) % stagers != 0) stagers--;
    w.vf.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .bound(w.jb, 0, 2).bound(w.t4, 0, 4).bound(w.g8, 0, 8).bound(w.tg, 0, 2).bound(w.ks, 0, steps)
        .bound(w.p, 0, 36)
        .bound_storage(w.bx, 1).bound_storage(w.ty, 1)
        .reorder(w.p, w.jb, w.t4, w.g8, w.ks, w.tg)
        .fuse(w.ks, w.tg, kt)
        .split(kt, kto, kt, stagers)
        .reorder(w.p, w.jb, kto, w.t4, w.g8, kt)
        .unroll(w.jb)
        .unroll(w.p)
        .gpu_threads(w.t4, w.g8, kt);
    w.vx.compute_at(w.vf, w.jb).store_in(MemoryType::Register).unroll(w.k).unroll(v.y);

    // 3. The running minimum; its update's round loop (outermost, at block level) holds step 2.
    // c8 innermost in its storage: a warp's threads (4 tiles x 8 channels) touch 32 banks.
    w.part.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .bound(w.i, 0, T).bound(w.j, 0, T).bound(w.c8, 0, 8).bound(w.tx, 0, BT)
        .bound_storage(w.bx, 1).bound_storage(w.ty, 1)
        .split(w.tx, th, tl, 4)
        .reorder(w.i, w.j, tl, w.c8, th)
        .unroll(w.i)
        .unroll(w.j)
        .gpu_threads(tl, w.c8, th);
    // A thread's two channels of a round folded in registers before part's read-modify-write.
    w.part.update()
        .split(w.tx, th, tl, 4)
        .reorder(w.i, w.j, tl, w.c8, th, w.rc)
        .unroll(w.i)
        .unroll(w.j)
        .gpu_threads(tl, w.c8, th);
    const LoopLevel thread(w.part, tl);
    w.tiles.compute_at(thread).store_in(MemoryType::Register).unroll(w.i).unroll(w.j).unroll(w.k4);
    w.poison.compute_at(thread).store_in(MemoryType::Register).unroll(w.k4);
    w.ox.compute_at(thread).store_in(MemoryType::Register).unroll(w.i).unroll(w.l).unroll(w.k4);

    // 2. A round's sums, handed over in shared memory, a lane's two elements of a channel at a
    // time (8-byte stores), stored (el, t4, g2, g4, eh, ...) with t4 padded to 6, so at words
    // el + 2 t4 + 12 g2 + 24 g4: a half-warp's stores (t4, g4) and the output transform's reads of
    // one point (a warp: 4 tiles x 8 channels) each fall in 32 distinct banks. The input-channel
    // steps unrolled by step_unroll, by default all: p32's 8 in 5.10 ms against 6.01 in pairs
    // (one m-tile a round, H100), p25's 2 2% faster than rolled.
    w.mfrag.compute_at(w.part, w.rc)
        .store_in(MemoryType::GPUShared)
        .bound(w.el, 0, 2).bound(w.eh, 0, 2).bound(w.t4, 0, 4).bound(w.g4, 0, 4).bound(w.g2, 0, 2)
        .bound(w.pi, 0, w.shape.warp_points).bound(w.mt, 0, mtiles).bound(w.ni, 0, 2)
        .bound(w.wp, 0, w.shape.point_warps());
    VarOrRVar warp = w.wp;
    if (mtiles == 1) {
        // Each warp sums both tile groups, so that each u fragment it loads serves two steps.
        w.mfrag.reorder(w.el, w.eh, w.pi, w.mt, w.ni, w.t4, w.g4, w.g2, w.wp)
            .unroll(w.ni)
            .reorder_storage(w.el, w.t4, w.g2, w.g4, w.eh, w.pi, w.mt, w.ni, w.wp)
            .align_storage(w.t4, 6);
    } else {
        // Each warp sums one tile group for both m-tiles, so that each v fragment serves two
        // steps: 8 warps. p32 with the steps in pairs: 5.47-5.48 ms against 5.92-5.93 with one
        // m-tile a round (H200); all 8 unrolled, 5.43 against 5.10 (H100). Its 32 channels of
        // sums unpadded (72 KB), so that p32's block of 224 KB fits the 227 KB an H100's block
        // can have: stores conflict-free, the reads 2 to a bank.
        w.mfrag.reorder(w.el, w.eh, w.pi, w.mt, w.t4, w.g4, w.g2, w.ni, w.wp)
            .fuse(w.ni, w.wp, wk)
            .reorder_storage(w.el, w.t4, w.g4, w.g2, w.eh, w.pi, w.mt, w.ni, w.wp);
        warp = wk;
    }
    w.mfrag.fuse(w.g4, w.g2, g8)
        .vectorize(w.el)
        .unroll(w.eh)
        .unroll(w.pi)
        .unroll(w.mt)
        .gpu_threads(w.t4, g8, warp);
    w.acc.compute_at(w.mfrag, w.t4).store_in(MemoryType::Register).unroll(w.pi).unroll(w.mt).unroll(w.ni);
    w.acc.update().reorder(w.mt, w.pi, w.ni, w.rk).unroll(w.mt).unroll(w.pi).unroll(w.ni);
    if (step_unroll >= steps) {
        w.acc.update().unroll(w.rk);
    } else if (step_unroll > 1) {
        w.acc.update().split(w.rk, rko, rki, step_unroll).unroll(rki);
    }
    // u's fragments loaded as 16-byte vectors, a warp's 512 contiguous bytes each (against
    // 1 KB spans at a 32-byte stride: 10% faster): uf's strides are dense from 0 (bounded
    // below). Split at the steps, u has its float32 values only (h 0).
    w.uw.compute_at(w.acc, w.pi)
        .store_in(MemoryType::Register)
        .bound(w.q, 0, 4)
        .bound(w.h, 0, w.shape.u_parts())
        .vectorize(w.q)
        .unroll(w.h)
        .unroll(w.rd);

    // u's fragments: one small kernel, a thread per (element, lane, part) of a (step, point):
    // 256 threads, 128 split at the steps; a block row per round.
    w.uf.compute_root()
        .bound(w.q, 0, 4).bound(w.lane, 0, 32).bound(w.h, 0, w.shape.u_parts())
        .bound(w.ks, 0, steps).bound(w.p, 0, 36)
        .fuse(w.q, w.lane, ql)
        .fuse(ql, w.h, ql)
        .fuse(w.ks, w.p, kp)
        .gpu_blocks(kp, w.rd)
        .gpu_threads(ql);
}

}  // namespace fusedconv::schedules
