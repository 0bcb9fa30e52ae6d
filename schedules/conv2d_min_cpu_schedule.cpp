#include "conv2d_min_parts.h"
#include "conv_taps.h"

namespace fusedconv::schedules {

using namespace Halide;

// CPU: rows in parallel; per vector of output pixels, the channel min of the
// convolution, a block of channels' conv values at a time (conv_value,
// specialized on use_winograd like the GPU's round).
void cpu_conv2d_min(Conv2dMinPipeline &p, const Conv2dMinParams &t) {
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

}  // namespace fusedconv::schedules
