#include "winograd2d_schedule.h"
#include "conv_taps.h"

namespace fusedconv::schedules {

using namespace Halide;

// ONE kernel; a block of kThreadsX x kThreadsY threads owns a tile of
// kTilesX x kTilesY Winograd tiles (16 x 8 output pixels) of one sample.
// It stages the transformed input v of the tile's every input channel in
// shared memory once per round of output channels (Cin <= 16: 18 KB), then
// each thread accumulates, over all input channels, the 36 transform-domain
// sums of 2 tiles x 2 output channels in registers (144 sums; v read from
// shared memory, u from global memory through L1), applies the output
// transform and writes the round's conv values to shared memory; the
// threads, now one per pixel, fold the round into the running channel min.
// The direct form (other kernel sizes, Cin > 16, and the runtime's
// recomputation of NaN tiles) uses the same threads: 2 channels x 8 x 4
// pixels each, inputs and weights through L1.
// Measured (H100, 2026-11-25, p25, gpu_winograd_dims=xy): 5.39 ms against
// 3.40 for the form along x, so not the default; ncu: 255 registers, 64
// threads a block, 4 blocks (8 warps) per SM, SM throughput 37%, 1.47 IPC;
// per input channel a thread issues 144 FFMA against 72 scalar loads of u
// and 18 LDS.128 of v (schedules/NOTES.md).
namespace {
constexpr int kTile = 4, kPoints = 6;
constexpr int kTilesX = 4, kTilesY = 2;             // tiles per block
constexpr int kTilesPerThread = 2, kChannelsPerThread = 2;
// Threads: channel groups x tile groups along x x tile groups along y (a
// thread shape of three dimensions: Halide fuses every nest of the kernel
// into one shape, and a fused tile index would lose the bounds of each
// thread's tiles).
constexpr int kThreadsX = 16, kThreadsY = kTilesX / kTilesPerThread, kThreadsZ = kTilesY;
constexpr int kRound = kThreadsX * kChannelsPerThread;  // channels per round
constexpr int kThreads = kThreadsX * kThreadsY * kThreadsZ;
}  // namespace

void gpu_conv2d_min_winograd2d(Conv2dMinPipeline &p, const Conv2dMinParams &) {
    blocks::V v;
    blocks::ConvWinograd2D &w = p.winograd2d;
    const int bx = kTile * kTilesX, by = kTile * kTilesY;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), pix("pix"), pixo("pixo"), pabc("pabc"),
        pbc("pbc"), pa("pa"), pb("pb"), pc("pc");
    // Items `item` of a stage spread over the threads, kThreads at a time.
    auto over_threads = [&](auto &&stage, const VarOrRVar &item) {
        stage.split(item, pixo, pabc, kThreads)
            .split(pabc, pbc, pa, kThreadsX)
            .split(pbc, pc, pb, kThreadsY);
    };

    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, bx, by, TailStrategy::GuardWithIf).fuse(xi, yi, pix);
    over_threads(out, pix);
    out.reorder(v.c, pixo, pa, pb, pc, xo, yo, v.n)
        .unroll(pixo)
        .gpu_threads(pa, pb, pc)
        .gpu_blocks(xo, yo, v.n);

    // Running channel min of the block's pixels, in shared memory.
    Func mn = p.min_channels.f;
    RVar rk("rk"), rl("rl");
    mn.compute_at(out, xo).store_in(MemoryType::GPUShared).bound_extent(v.x, bx).bound_extent(v.y, by);
    mn.fuse(v.x, v.y, pix);
    over_threads(mn, pix);
    mn.reorder(pixo, pa, pb, pc).unroll(pixo).gpu_threads(pa, pb, pc);
    Stage fold = mn.update();
    fold.split(p.min_channels.r.x, rk, rl, kRound, TailStrategy::GuardWithIf)
        .reorder(rl, v.x, v.y, rk)
        .fuse(v.x, v.y, pix);
    over_threads(fold, pix);
    fold.reorder(pixo, rl, pa, pb, pc, rk).unroll(pixo).gpu_threads(pa, pb, pc);

    // One round of kRound channels' conv values, in shared memory, channels
    // innermost and padded to kRound + 1 words (the fold reads one channel
    // of consecutive pixels). Thread (pa, pb, pc): channels 2 pa, 2 pa + 1
    // of the round, tiles (2 pb, pc) and (2 pb + 1, pc) of the block.
    Var co("co"), cr("cr"), cc("cc"), tx("tx"), i("i"), j("j"), tt("tt"), tp("tp");
    Func round = p.conv_value;
    round.compute_at(mn, rk)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, bx)
        .bound_extent(v.y, by)
        .bound_extent(v.c, kRound)
        .reorder_storage(v.c, v.x, v.y, v.n)
        .align_storage(v.c, kRound + 1)
        .split(v.c, co, cr, kRound)
        .split(cr, pa, cc, kChannelsPerThread)
        .split(v.x, tx, i, kTile)
        .split(tx, pb, tp, kTilesPerThread)
        .split(v.y, pc, j, kTile)
        .reorder(i, j, cc, tp, pa, pb, pc, co, v.n)
        .unroll(i)
        .unroll(j)
        .unroll(cc)
        .unroll(tp)
        .gpu_threads(pa, pb, pc);
    round.specialize(p.use_winograd);

    // Winograd: per thread 2 tiles x 2 channels x 36 sums in registers.
    w.m.compute_at(round, pa)
        .store_in(MemoryType::Register)
        .bound_extent(w.k, kPoints)
        .bound_extent(w.l, kPoints)
        .reorder(w.k, w.l, w.tx, w.ty, v.c, v.n)
        .unroll(w.k)
        .unroll(w.l)
        .unroll(w.tx)
        .unroll(w.ty)
        .unroll(v.c);
    w.m.update()
        .reorder(w.k, w.l, w.tx, w.ty, v.c, w.r, v.n)
        .unroll(w.k)
        .unroll(w.l)
        .unroll(w.tx)
        .unroll(w.ty)
        .unroll(v.c);
    // v: every input channel's transformed tiles, a thread per (tile,
    // channel), its 36 points consecutive (vector loads in the sums).
    Var item("item");
    w.v.compute_at(round, co)
        .store_in(MemoryType::GPUShared)
        .bound_extent(w.k, kPoints)
        .bound_extent(w.l, kPoints)
        .bound_extent(w.tx, kTilesX)
        .bound_extent(w.ty, kTilesY)
        .bound_extent(v.c, kWinograd2DMaxCin)
        .fuse(w.tx, w.ty, tt)
        .fuse(tt, v.c, item);
    over_threads(w.v, item);
    w.v.reorder(w.k, w.l, pixo, pa, pb, pc)
        .unroll(w.k)
        .unroll(w.l)
        .gpu_threads(pa, pb, pc);
    // u = G g GT once per call by a small kernel, channels innermost: the
    // threads of a warp read consecutive output channels.
    Var zc("zc"), zcb("zcb"), zct("zct");
    w.u.compute_root()
        .bound(w.k, 0, kPoints)
        .bound(w.l, 0, kPoints)
        .reorder_storage(v.c, w.k, w.l, v.z)
        .reorder(w.k, w.l, v.z, v.c)
        .unroll(w.k)
        .unroll(w.l)
        .fuse(v.z, v.c, zc)
        .gpu_tile(zc, zcb, zct, 64, TailStrategy::GuardWithIf);

    // Direct form: per thread 2 channels x 8 x 4 pixels in registers.
    Func conv = p.conv.f;
    conv.compute_at(round, pa)
        .store_in(MemoryType::Register)
        .bound_extent(v.x, kTile * kTilesPerThread)
        .bound_extent(v.y, kTile)
        .bound_extent(v.c, kChannelsPerThread)
        .reorder(v.x, v.y, v.c, v.n)
        .unroll(v.x)
        .unroll(v.y)
        .unroll(v.c);
    Stage upd = conv.update();
    upd.reorder(v.x, v.y, v.c, p.conv.r.x, p.conv.r.y, p.conv.r.z, v.n)
        .unroll(v.x)
        .unroll(v.y)
        .unroll(v.c);
    unroll_taps_of_size_3(upd, p.conv, {p.kw, p.kh});
}

}  // namespace fusedconv::schedules
