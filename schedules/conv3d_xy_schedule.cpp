#include "conv3d_xy_schedule.h"
#include "conv_taps.h"

namespace fusedconv::schedules {

using namespace Halide;

void check_conv3d_xy(const Conv3dXYShape &s, int other_shared, const std::string &who) {
    auto fail = [&](const std::string &why) {
        throw CompileError(who + " GPU schedule (gpu_conv_form xy): " + why);
    };
    if (s.tiles_x < 1 || s.tiles_y < 1 || s.per_thread < 1 || s.tiles_x % s.per_thread != 0 ||
        s.depth < 1 || s.lanes < 1 || s.cin_unroll < 1) {
        fail("gpu_xy_tiles_x (" + std::to_string(s.tiles_x) + ") must be a multiple of "
             "gpu_xy_tiles_per_thread (" + std::to_string(s.per_thread) + "); gpu_xy_tiles_y (" +
             std::to_string(s.tiles_y) + "), gpu_xy_depth (" + std::to_string(s.depth) +
             "), gpu_xy_lanes (" + std::to_string(s.lanes) + ") and gpu_xy_cin_unroll (" +
             std::to_string(s.cin_unroll) + ") positive");
    }
    if (s.threads() > 256) fail(std::to_string(s.threads()) + " threads a block (at most 256)");
    const int shared = s.staged_bytes() + other_shared;
    if (shared >= 48 * 1024) {
        fail(std::to_string(shared) + " bytes of shared memory a block (less than 48 KB): " +
             std::to_string(s.tiles_x) + " x " + std::to_string(s.tiles_y) + " tiles, " +
             std::to_string(s.depth) + " depths, " + std::to_string(s.max_cin) +
             " input channels, " + std::to_string(other_shared) + " bytes of the consumer's");
    }
}

void schedule_conv3d_xy(blocks::ConvWinograd3D &w, const blocks::Conv &conv, const Expr &kw,
                        const Expr &kh, const Conv3dXYShape &s, const LoopLevel &sums,
                        const LoopLevel &chunk) {
    blocks::V v;
    constexpr int kTile = 4, kPoints = 6;
    // The sums: per thread per_thread tiles x 1 channel x 36 points in
    // registers, the points read 4 at a time (vector loads of u and v), the
    // 3 depth taps unrolled.
    w.m.compute_at(sums)
        .store_in(MemoryType::Register)
        .bound_extent(w.p, kPoints * kPoints)
        .reorder(w.p, w.tx, w.ty, v.z, v.c, v.n)
        .unroll(w.p)
        .unroll(w.tx)
        .unroll(w.ty)
        .unroll(v.z)
        .unroll(v.c);
    Var po("po"), pi("pi");
    RVar rco("rco"), rci("rci");
    w.m.update()
        .reorder(w.p, w.tx, w.ty, v.z, v.c, w.r.x, w.r.y, v.n)
        .split(w.p, po, pi, blocks::kWinograd2DPointGroup)
        .vectorize(pi)
        .unroll(po)
        .unroll(w.tx)
        .unroll(w.ty)
        .unroll(v.z)
        .unroll(v.c)
        .unroll(w.r.x)
        .split(w.r.y, rco, rci, s.cin_unroll, TailStrategy::GuardWithIf)
        .unroll(rci);
    // v: the chunk's transformed input planes, a thread per (tile, depth,
    // channel), its 36 points consecutive (vector loads in the sums).
    Var item("item"), pixo("pixo"), pa("pa"), pb("pb"), pc("pc");
    w.v.compute_at(chunk)
        .store_in(MemoryType::GPUShared)
        .bound_extent(w.k, kPoints)
        .bound_extent(w.l, kPoints)
        .bound_extent(w.tx, s.tiles_x)
        .bound_extent(w.ty, s.tiles_y)
        .bound_extent(v.z, s.depth + 2)
        .bound_extent(v.c, s.max_cin)
        .fuse(w.tx, w.ty, item)
        .fuse(item, v.z, item)
        .fuse(item, v.c, item);
    conv3d_xy_over_threads(w.v, item, s, pixo, pa, pb, pc);
    w.v.reorder(w.k, w.l, pixo, pa, pb, pc)
        .unroll(w.k)
        .unroll(w.l)
        .gpu_threads(pa, pb, pc);
    // u = G g GT once per call by a small kernel, stored as ug: 4 points of
    // consecutive output channels together (lanes on consecutive channels
    // read consecutive 16-byte pieces), the point groups, depth taps and
    // input channels constant strides apart within a group of 32 channels.
    Var q = w.ug.args()[0], cl = w.ug.args()[1], g = w.ug.args()[2], kz = w.ug.args()[3],
        zc("zc"), zcb("zcb"), zct("zct");
    w.ug.compute_root()
        .bound(q, 0, blocks::kWinograd2DPointGroup)
        .bound(cl, 0, blocks::kWinograd2DChannelGroup)
        .bound(g, 0, kPoints * kPoints / blocks::kWinograd2DPointGroup)
        .bound(kz, 0, blocks::kWinogradTaps)
        .reorder(q, g, cl, kz, v.z, v.c)
        .unroll(q)
        .unroll(g)
        .fuse(cl, kz, zc)
        .fuse(zc, v.z, zc)
        .fuse(zc, v.c, zc)
        .gpu_tile(zc, zcb, zct, 64, TailStrategy::GuardWithIf);

    // Direct form: per thread 1 channel x 4 per_thread x 4 pixels of one
    // depth in registers, inputs and weights through L1.
    Func f = conv.f;
    f.compute_at(sums)
        .store_in(MemoryType::Register)
        .bound_extent(v.x, kTile * s.per_thread)
        .bound_extent(v.y, kTile)
        .bound_extent(v.z, 1)
        .bound_extent(v.c, 1)
        .reorder(v.x, v.y, v.z, v.c, v.n)
        .unroll(v.x)
        .unroll(v.y);
    Stage upd = f.update();
    upd.reorder(v.x, v.y, v.z, v.c, conv.r.x, conv.r.y, conv.r.z, conv.r.w, v.n)
        .unroll(v.x)
        .unroll(v.y);
    unroll_taps_of_size_3(upd, conv, {kw, kh});
}

}  // namespace fusedconv::schedules
