#include "pipelines.h"

namespace fusedconv {

using namespace Halide;
using namespace blocks;

P24Pipeline build_p24(Func input, Func weight, Func bias, Expr in_w, Expr in_h, Expr in_depth,
                      Expr kw, Expr kh, Expr kd, Expr cin, Expr cout, Expr xy_inside) {
    V v;
    P24Pipeline p;
    p.kw = kw, p.kh = kh, p.kd = kd, p.cin = cin, p.cout = cout;
    p.xy_inside = xy_inside;
    p.conv = conv3d(input, weight, bias, kw, kh, kd, cin, cout, in_w, in_h, in_depth, "conv",
                    xy_inside);
    p.min_depth = min_over_depth(p.conv.f, in_depth - kd + 1);
    p.softmax = softmax_over_channels(p.min_depth.f, cout);
    p.output = Func("p24_out");
    p.output(v.x, v.y, v.c, v.n) = p.softmax.out(v.x, v.y, v.c, v.n);
    return p;
}

static Conv2dMinPipeline conv2d_min(Func input, Func weight, Func bias, Expr in_w, Expr in_h,
                                    Expr kw, Expr kh, Expr cin, Expr cout, Expr winograd,
                                    WinogradForm wf) {
    V v;
    Conv2dMinPipeline p;
    p.kw = kw, p.kh = kh, p.cin = cin, p.cout = cout;
    p.conv = conv2d(input, weight, bias, kw, kh, cin, cout, in_w, in_h);
    p.conv_value = Func("conv_value");
    if (Internal::is_const_zero(winograd)) {
        // No select at all: the unused form would still have to be scheduled.
        p.use_winograd = Internal::const_false();
        p.conv_value(v.x, v.y, v.c, v.n) = p.conv.f(v.x, v.y, v.c, v.n);
        return p;
    }
    // Square 3x3 kernels only (the models' kernels are square): a constant
    // tap count lets the schedule give the form's staging constant sizes.
    p.use_winograd = winograd && kw == kWinogradTaps && kh == kWinogradTaps;
    p.form = wf;
    Func chosen;
    if (wf.dims == WinogradDims::XY) {
        // The form reads at most max_cin_2d channels (where it is used, cin
        // <= max_cin_2d): the schedule sizes its staging of the transformed
        // input by that bound, which Halide checks in every kernel that
        // holds the staging, the direct form's included (it trapped there
        // for cin > max_cin_2d).
        p.winograd2d = conv2d_winograd_2d(input, weight, bias, kw, kh, min(cin, wf.max_cin_2d),
                                          cout, in_w, in_h);
        p.use_winograd = p.use_winograd && cin <= wf.max_cin_2d;
        chosen = p.winograd2d.f;
    } else {
        p.winograd = conv2d_winograd_x(input, weight, bias, kw, kh, cin, cout, in_w, in_h);
        chosen = p.winograd.f;
    }
    p.conv_value(v.x, v.y, v.c, v.n) =
        select(p.use_winograd, chosen(v.x, v.y, v.c, v.n), p.conv.f(v.x, v.y, v.c, v.n));
    return p;
}

Conv2dMinPipeline build_p32(Func input, Func weight, Func bias, Expr in_w, Expr in_h, Expr scale,
                            Expr kw, Expr kh, Expr cin, Expr cout, Expr winograd,
                            WinogradForm form) {
    V v;
    Conv2dMinPipeline p =
        conv2d_min(input, weight, bias, in_w, in_h, kw, kh, cin, cout, winograd, form);
    Func scaled("scaled");
    scaled(v.x, v.y, v.c, v.n) = p.conv_value(v.x, v.y, v.c, v.n) * scale;
    p.min_channels = min_over_channels(scaled, cout);
    p.output = Func("p32_out");
    p.output(v.x, v.y, v.c, v.n) = p.min_channels.f(v.x, v.y, v.n);
    return p;
}

Expr p25_epilogue(const Expr &min_over_channels) { return tanh(tanh(min_over_channels)); }

Conv2dMinPipeline build_p25(Func input, Func weight, Func bias, Expr in_w, Expr in_h, Expr kw,
                            Expr kh, Expr cin, Expr cout, Expr winograd, WinogradForm form) {
    V v;
    Conv2dMinPipeline p =
        conv2d_min(input, weight, bias, in_w, in_h, kw, kh, cin, cout, winograd, form);
    p.min_channels = min_over_channels(p.conv_value, cout);
    p.output = Func("p25_out");
    p.output(v.x, v.y, v.c, v.n) = p25_epilogue(p.min_channels.f(v.x, v.y, v.n));
    return p;
}

// p83's conv_value: the direct conv, or where xy_max_cin > 0 the F(4x4, 3x3)
// form over x and y for 3x3x3 kernels with at most xy_max_cin input
// channels. The form reads at most xy_max_cin channels, so that its
// staging's bound holds in the direct form's kernel too (as in conv2d_min).
static void conv3d_value(P83Pipeline &p, Func input, Func weight, Func bias, Expr in_w,
                         Expr in_h, Expr in_depth, int xy_max_cin) {
    V v;
    p.xy_max_cin = xy_max_cin;
    if (xy_max_cin <= 0) {
        p.use_winograd = Internal::const_false();
        p.conv_value = p.conv.f;
        return;
    }
    p.winograd = conv3d_winograd_xy(input, weight, bias, p.kw, p.kh, p.kd,
                                    min(p.cin, xy_max_cin), p.cout, in_w, in_h, in_depth);
    p.use_winograd = p.kw == kWinogradTaps && p.kh == kWinogradTaps && p.kd == kWinogradTaps &&
                     p.cin <= xy_max_cin;
    p.conv_value = Func("conv_value");
    p.conv_value(v.x, v.y, v.z, v.c, v.n) =
        select(p.use_winograd, p.winograd.f(v.x, v.y, v.z, v.c, v.n),
               p.conv.f(v.x, v.y, v.z, v.c, v.n));
}

P83Pipeline build_p83(Func input, Func weight, Func bias, Func gamma, Func beta, Expr in_w,
                      Expr in_h, Expr in_depth, const P83Params &prm, Expr kw, Expr kh, Expr kd,
                      Expr cin, Expr cout, int xy_max_cin, int piece_w, int piece_h) {
    V v;
    P83Pipeline p;
    p.kw = kw, p.kh = kh, p.kd = kd, p.cin = cin, p.cout = cout;
    p.conv = conv3d(input, weight, bias, kw, kh, kd, cin, cout, in_w, in_h, in_depth);
    conv3d_value(p, input, weight, bias, in_w, in_h, in_depth, xy_max_cin);
    Expr out_w = in_w - kw + 1, out_h = in_h - kh + 1, out_d = in_depth - kd + 1;
    p.out_w = out_w, p.out_h = out_h, p.out_d = out_d;
    Expr cpg = cout / prm.groups;
    p.piece_w = piece_w, p.piece_h = piece_h;
    p.stats = piece_w > 0 ? groupnorm_stats_by_pieces(p.conv_value, out_w, out_h, out_d, cpg,
                                                      prm.eps, piece_w, piece_h)
                          : groupnorm_stats(p.conv_value, out_w, out_h, out_d, cpg, prm.eps);
    Expr normed =
        groupnorm_apply(p.conv_value, p.stats, gamma, beta, cpg, v.x, v.y, v.z, v.c, v.n);
    Expr clamped = min_then_clamp(normed, prm.min_value, prm.clamp_lo, prm.clamp_hi);
    // The dropout mask is keyed on the element's index in the contiguous
    // PyTorch (N, C, D, H, W) output tensor.
    Expr index = (((v.n * cout + v.c) * out_d + v.z) * out_h + v.y) * out_w + v.x;
    p.output = Func("p83_out");
    p.output(v.x, v.y, v.z, v.c, v.n) = dropout(clamped, index, prm.seed, prm.p, prm.training);
    p.elementwise = p.output;
    return p;
}

}  // namespace fusedconv
