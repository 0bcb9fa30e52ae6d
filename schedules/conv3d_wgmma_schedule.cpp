#include "conv3d_wgmma_schedule.h"

namespace fusedconv::schedules {

using namespace Halide;

// Three kernels.
// (0) bw: the weights as the steps' B, split, once a call (2 us).
// (1) mins: a block of 128 threads (one warpgroup: t, g, w as wgmma's fragment orders them) per
// 64 output pixels of one sample (32 columns of a pair of rows). Each thread walks the output
// depths; at each, its 12 sums in registers from the 14 k-steps (the placeholders spliced into
// wgmma), folded into its 12 running minima; then its 12 minima plus bias to global memory. B is
// copied first into the block's shared memory by the same 128 threads.
// Nothing may guard a step: the thread extents are the block's, and pixels past the plane are
// computed (clamped) and not stored. Specialized on 3 input channels (p24's), where every tap
// row's channel test folds. mins is stored with the pixel's column (g, w) innermost: a warp's
// store of one element is then 4 runs of 8 columns, and the softmax's load of one channel 32
// consecutive columns (the fragment's order put them 48 words apart).
// H100, p24's shape (ncu, the GPU's clocks): 253 us, 90 registers, 5 blocks an SM, tensor pipe
// 36%, issue 46%; the whole call 0.30-0.31 ms against 0.40-0.41 for the SIMT kernel. The
// generator turns LLVM's loop strength reduction off (p24_conv3d_min_softmax.cpp): with it each
// tap's input offset was an induction variable, 122 registers and 4 blocks an SM. More blocks an
// SM (the JIT capped at 80 or 64 registers) were not faster then. The runtime compiles the kernel
// again for each shape, its strides as constants (runtime/src/shape_variants.h): 238 us, 64
// registers. H200, with B split once a call and the variant capped at 80 registers (ops.cpp):
// 207 us at 77 registers; the call 0.250-0.255 ms.
// (2) out: the softmax over channels, a thread per pixel of a 32 x 8 block. Each thread's
// exponentials go to the block's shared memory (its pixel's maximum first, from mins), so that the
// sum and the output read them instead of computing each exp twice: 14.5 us (ncu, H100).
void gpu_conv3d_min_depth_wgmma(blocks::ConvMinDepthWgmma &m, blocks::Softmax &softmax, Func out,
                                const Target &target) {
    if (!target.has_feature(Target::CUDA)) {
        throw CompileError("the wgmma form (p24_wgmma) needs a CUDA target, got " + target.to_string());
    }
    blocks::V v;
    m.mins.compute_root()
        .bound(m.e, 0, 2)
        .bound(m.h, 0, 2)
        .bound(m.j, 0, blocks::kWgmmaMaxCout / 8)
        .bound(m.t, 0, 4)
        .bound(m.g, 0, 8)
        .bound(m.w, 0, 4)
        .reorder(m.e, m.h, m.j, m.t, m.g, m.w, m.pb, v.n)
        .reorder_storage(m.g, m.w, m.e, m.h, m.j, m.t, m.pb, v.n)
        .unroll(m.e)
        .unroll(m.h)
        .unroll(m.j)
        .gpu_threads(m.t, m.g, m.w)
        .gpu_blocks(m.pb, v.n);
    // Three input channels (p24's): every tap row's channel test folds away.
    m.mins.specialize(m.cin == blocks::kWgmmaMaxCin);
    m.dmin.compute_at(m.mins, m.t);
    m.acc.compute_at(m.dmin, m.rz);

    // B: 5376 words (4 taps x 24 channels x 2 k-cores x 2 parts x 14 steps), split once per
    // call by a small kernel of its own into global memory, then copied by each block into its
    // shared memory, 42 words a thread over the same (4, 8, 4) threads (a kernel's thread nests
    // share one block shape). Each block splitting its own B spent 20% of the kernel's
    // instructions and held 30% of its stall samples (H200, ncu).
    Var i("wi"), io("wio"), ii("wii"), i1("wi1"), tx("wtx"), ty("wty"), tz("wtz");
    // Both Funcs over all of B, its dimensions fused into i (Func is a handle: the copy schedules f).
    auto whole_b = [&](Func f) -> Func {
        f.bound(m.e, 0, 4)
            .bound(m.co, 0, blocks::kWgmmaMaxCout)
            .bound(m.kc, 0, 2)
            .bound(m.part, 0, 2)
            .bound(m.s, 0, blocks::kWgmmaSteps)
            .fuse(m.e, m.co, i)
            .fuse(i, m.kc, i)
            .fuse(i, m.part, i)
            .fuse(i, m.s, i);
        return f;
    };
    Func staged = m.bw.in();
    staged.compute_at(m.mins, m.pb).store_in(MemoryType::GPUShared);
    whole_b(staged)
        .split(i, io, ii, 128)
        .split(ii, i1, tx, 4)
        .split(i1, tz, ty, 8)
        .reorder(tx, ty, tz, io)
        .gpu_threads(tx, ty, tz);
    m.bw.compute_root();
    whole_b(m.bw).gpu_tile(i, io, ii, 128);

    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    constexpr int kBlockX = 32, kBlockY = 8;  // the softmax's pixels a block
    out.tile(v.x, v.y, xo, yo, xi, yi, kBlockX, kBlockY, TailStrategy::GuardWithIf)
        .reorder(v.c, xi, yi, xo, yo, v.n)
        .gpu_blocks(xo, yo, v.n)
        .gpu_threads(xi, yi);
    // One block's storage, stated (bound_storage): else the host sizes it by a loop over the blocks.
    softmax.exp_c.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .bound_storage(v.x, kBlockX)
        .bound_storage(v.y, kBlockY)
        .reorder(v.c, v.x, v.y, v.n)
        .gpu_threads(v.x, v.y);
    softmax.max_c.compute_at(softmax.exp_c, v.x);
    softmax.sum_c.compute_at(out, xi);
}

}  // namespace fusedconv::schedules
