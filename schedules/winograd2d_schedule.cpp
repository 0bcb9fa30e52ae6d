#include "winograd2d_schedule.h"
#include "conv_taps.h"

namespace fusedconv::schedules {

using namespace Halide;

// The Winograd kernel: a block of lanes x tiles_x / tiles_per_thread x
// tiles_y threads owns tiles_x x tiles_y Winograd tiles of one sample
// (defaults: p25 16 lanes, 8 x 1 tiles, one warp; p32 32 lanes, 4 x 1). It
// stages the transformed input v of every input channel of its tiles in
// shared memory once (Cin <= max_cin, p25 16: 18 KB, p32 64: 37 KB); then,
// per round of `lanes` output channels, each thread accumulates over the input
// channels the 36 transform-domain sums of its tiles (4) x 1 output channel
// in registers (per input channel and tile 36 FFMA, 9 LDS.128 of v; per input
// channel 9 LDG.128 of u through L1; with 16 lanes a warp's two tile groups
// load the same u), applies the output transform and writes its conv values
// to shared memory, where the threads, one per pixel, fold the round into
// the running channel min. The direct form (other kernel sizes, Cin >
// max_cin, and the runtime's recomputation of NaN tiles) is a second kernel
// (out is specialized) with the same threads: 1 channel x 4
// tiles_per_thread x 4 pixels each, inputs and weights through L1.
// Measured (the defaults are bench/tune's best on an H100 and an H200): p25
// 2.91 ms on an H200 (16 lanes 2% faster than 32 on both GPUs; the form
// along x 3.39-3.40); p32 9.61 ms against 11.9 along x (H200; ncu: one-warp
// blocks with 45.5 KB of shared memory, so 5 warps per SM; L1 85% and L2 59%
// busy: every block reads all of u from L2). Both are held by L1 wavefronts:
// 2 for each LDS.128 of v, 4 for each LDG.128 of u, so 108 per 144 FFMA and
// at most 33% of the FMA pipe in the sums (ncu: 28.5%); schedules/NOTES.md.
namespace {
constexpr int kTile = 4, kPoints = 6;
constexpr int kSharedBytes = 48 * 1024;          // static shared memory of a block
}  // namespace

void gpu_conv2d_min_winograd2d(Conv2dMinPipeline &p, const Conv2dMinParams &t, int tiles_x,
                               int lanes) {
    const int tiles_y = t.gpu_wino2d_tiles_y;
    const int per_thread = t.gpu_wino2d_tiles_per_thread, cin_unroll = t.gpu_wino2d_cin_unroll;
    const int max_cin = p.form.max_cin_2d;
    auto fail = [](const std::string &why) {
        throw CompileError("conv2d-min F(4x4, 3x3) GPU schedule: " + why);
    };
    if (lanes != 8 && lanes != 16 && lanes != 32) {
        fail("gpu_wino2d_lanes must be 8, 16 or 32 (or 0: the model's choice), not " +
             std::to_string(lanes));
    }
    // Each thread folds 16 per_thread / lanes of the block's pixels into the
    // min: a whole number.
    if (tiles_x < 1 || tiles_y < 1 || per_thread < 1 || 16 * per_thread % lanes != 0 ||
        tiles_x % per_thread != 0) {
        fail("gpu_wino2d_tiles_per_thread (" + std::to_string(per_thread) + ") x 16 pixels "
             "must be a multiple of the " + std::to_string(lanes) + " lanes (each thread folds "
             "whole pixels into the min), gpu_wino2d_tiles_x (" + std::to_string(tiles_x) +
             ") a multiple of gpu_wino2d_tiles_per_thread, gpu_wino2d_tiles_y (" +
             std::to_string(tiles_y) + ") positive");
    }
    if (cin_unroll < 1) fail("gpu_wino2d_cin_unroll must be positive, not " + std::to_string(cin_unroll));
    // Threads: channel lanes x tile groups along x x tile groups along y (a
    // thread shape of three dimensions: Halide fuses every nest of the kernel
    // into one shape, and a fused tile index would lose the bounds of each
    // thread's tiles). A round is one channel a lane: `lanes` channels.
    const int threads_x = lanes, threads_y = tiles_x / per_thread, threads_z = tiles_y,
              threads = threads_x * threads_y * threads_z;
    if (threads > 256) fail(std::to_string(threads) + " threads a block (at most 256)");
    const int shared = 4 * (tiles_x * tiles_y * max_cin * kPoints * kPoints +
                            (lanes + 1) * kTile * kTile * tiles_x * tiles_y +
                            kTile * kTile * tiles_x * tiles_y);
    if (shared >= kSharedBytes) {
        fail(std::to_string(shared) + " bytes of shared memory a block (" +
             std::to_string(tiles_x) + " x " + std::to_string(tiles_y) + " tiles, " +
             std::to_string(max_cin) + " input channels; less than " +
             std::to_string(kSharedBytes) + ")");
    }

    blocks::V v;
    blocks::ConvWinograd2D &w = p.winograd2d;
    const int bx = kTile * tiles_x, by = kTile * tiles_y;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), pix("pix"), pixo("pixo"), pabc("pabc"),
        pbc("pbc"), pa("pa"), pb("pb"), pc("pc");
    // Items `item` of a stage spread over the threads, kThreads at a time.
    auto over_threads = [&](auto &&stage, const VarOrRVar &item) {
        stage.split(item, pixo, pabc, threads)
            .split(pabc, pbc, pa, threads_x)
            .split(pbc, pc, pb, threads_y);
    };

    Func out = p.output;
    out.tile(v.x, v.y, xo, yo, xi, yi, bx, by, TailStrategy::GuardWithIf).fuse(xi, yi, pix);
    over_threads(out, pix);
    out.reorder(v.c, pixo, pa, pb, pc, xo, yo, v.n)
        .unroll(pixo)
        .gpu_threads(pa, pb, pc)
        .gpu_blocks(xo, yo, v.n);
    // Two kernels, so that v is staged (below, once per block) only where
    // the Winograd form runs, and the direct form gets its own registers.
    out.specialize(p.use_winograd);

    // Running channel min of the block's pixels, in shared memory.
    Func mn = p.min_channels.f;
    RVar rk("rk"), rl("rl");
    mn.compute_at(out, xo).store_in(MemoryType::GPUShared).bound_extent(v.x, bx).bound_extent(v.y, by);
    mn.fuse(v.x, v.y, pix);
    over_threads(mn, pix);
    mn.reorder(pixo, pa, pb, pc).unroll(pixo).gpu_threads(pa, pb, pc);
    Stage fold = mn.update();
    fold.split(p.min_channels.r.x, rk, rl, lanes, TailStrategy::GuardWithIf)
        .reorder(rl, v.x, v.y, rk)
        .fuse(v.x, v.y, pix);
    over_threads(fold, pix);
    fold.reorder(pixo, rl, pa, pb, pc, rk).unroll(pixo).gpu_threads(pa, pb, pc);

    // One round's conv values, in shared memory, channels innermost and
    // padded to lanes + 1 words (the fold reads one channel of
    // consecutive pixels). Thread (pa, pb, pc): channel pa of the round (lanes
    // on consecutive channels: their u loads are contiguous), tiles (4 pb ..
    // 4 pb + 3, pc) of the block.
    Var co("co"), tx("tx"), i("i"), j("j"), tt("tt"), tp("tp");
    Func round = p.conv_value;
    round.compute_at(mn, rk)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.x, bx)
        .bound_extent(v.y, by)
        .bound_extent(v.c, lanes)
        .reorder_storage(v.c, v.x, v.y, v.n)
        .align_storage(v.c, lanes + 1)
        .split(v.c, co, pa, lanes)
        .split(v.x, tx, i, kTile)
        .split(tx, pb, tp, per_thread)
        .split(v.y, pc, j, kTile)
        .reorder(i, j, tp, pa, pb, pc, co, v.n)
        .unroll(i)
        .unroll(j)
        .unroll(tp)
        .gpu_threads(pa, pb, pc);
    round.specialize(p.use_winograd);

    // Winograd: per thread 4 tiles x 1 channel x 36 sums in registers; the
    // points read 4 at a time (vector loads of u and v); input
    // channels unrolled (4), so the next channel's loads can be issued
    // while this one's FMAs run.
    w.m.compute_at(round, pa)
        .store_in(MemoryType::Register)
        .bound_extent(w.p, kPoints * kPoints)
        .reorder(w.p, w.tx, w.ty, v.c, v.n)
        .unroll(w.p)
        .unroll(w.tx)
        .unroll(w.ty)
        .unroll(v.c);
    Var po("po"), pi("pi");
    RVar rro("rro"), rri("rri");
    w.m.update()
        .reorder(w.p, w.tx, w.ty, v.c, w.r, v.n)
        .split(w.p, po, pi, blocks::kWinograd2DPointGroup)
        .vectorize(pi)
        .unroll(po)
        .unroll(w.tx)
        .unroll(w.ty)
        .unroll(v.c)
        .split(w.r, rro, rri, cin_unroll, TailStrategy::GuardWithIf)
        .unroll(rri);
    // v: every input channel's transformed tiles, once per block, a thread
    // per (tile, channel), its 36 points consecutive (vector loads in the
    // sums).
    Var item("item");
    w.v.compute_at(out, xo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(w.k, kPoints)
        .bound_extent(w.l, kPoints)
        .bound_extent(w.tx, tiles_x)
        .bound_extent(w.ty, tiles_y)
        .bound_extent(v.c, max_cin)
        .fuse(w.tx, w.ty, tt)
        .fuse(tt, v.c, item);
    over_threads(w.v, item);
    w.v.reorder(w.k, w.l, pixo, pa, pb, pc)
        .unroll(w.k)
        .unroll(w.l)
        .gpu_threads(pa, pb, pc);
    // u = G g GT once per call by a small kernel, stored as ug: 4 points of
    // consecutive output channels together, so a thread's 36 points of one
    // channel are 9 vector loads and a warp's lanes read consecutive 16-byte
    // pieces; within a group of 32 channels the point groups and input
    // channels are constant strides apart (loads at fixed offsets).
    Var zc("zc"), zcb("zcb"), zct("zct");
    Var q = w.ug.args()[0], cl = w.ug.args()[1], g = w.ug.args()[2];
    w.ug.compute_root()
        .bound(q, 0, blocks::kWinograd2DPointGroup)
        .bound(cl, 0, blocks::kWinograd2DChannelGroup)
        .bound(g, 0, kPoints * kPoints / blocks::kWinograd2DPointGroup)
        .reorder(q, g, cl, v.z, v.c)
        .unroll(q)
        .unroll(g)
        .fuse(cl, v.z, zc)
        .fuse(zc, v.c, zc)
        .gpu_tile(zc, zcb, zct, 64, TailStrategy::GuardWithIf);

    // Direct form: per thread 1 channel x 16 x 4 pixels in registers.
    Func conv = p.conv.f;
    conv.compute_at(round, pa)
        .store_in(MemoryType::Register)
        .bound_extent(v.x, kTile * per_thread)
        .bound_extent(v.y, kTile)
        .bound_extent(v.c, 1)
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
