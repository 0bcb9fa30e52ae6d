// The four models' algorithms, each composed once from the building blocks.
// A generator (one per model) feeds its Inputs in and hands the result to the
// model's schedule in schedules/.
#pragma once

#include "blocks.h"
#include "winograd.h"
#include "winograd2d.h"

namespace fusedconv {

// p24: conv3d -> min over depth -> softmax over channels.
struct P24Pipeline {
    blocks::Conv conv;
    blocks::MinReduce min_depth;
    blocks::Softmax softmax;
    Halide::Func output;  // (x, y, c, n)
    Halide::Expr kw, kh, kd, cin, cout;
    Halide::Expr xy_inside;  // blocks::conv3d's (undefined: x and y always clamped)
};
// in_w, in_h (and in_depth): the input's width, height (and depth).
P24Pipeline build_p24(Halide::Func input, Halide::Func weight, Halide::Func bias,
                      Halide::Expr in_w, Halide::Expr in_h, Halide::Expr in_depth,
                      Halide::Expr kw, Halide::Expr kh, Halide::Expr kd, Halide::Expr cin,
                      Halide::Expr cout, Halide::Expr xy_inside = Halide::Expr());

// p25 and p32: conv2d -> min over channels (keepdim) -> element-wise epilogue.
// The conv is computed in one of two forms: the direct one (any kernel size)
// or, where `winograd` holds and the kernel is 3x3, Winograd F(4, 3) along
// x (winograd.h), whose result is NaN on purpose wherever its input or its
// sums are not all finite; the caller then recomputes in the direct form.
// conv_value selects between them; a schedule specializes on use_winograd
// so that each path computes only its own form. With a constant-false
// `winograd` the Winograd Funcs are left undefined and use_winograd is false.
// Which Winograd form a build holds for 3x3 kernels: along x (F(4, 3),
// winograd.h) or in both dimensions (F(4x4, 3x3), winograd2d.h, for at
// most max_cin_2d input channels: its schedule stages the transformed input
// of every channel at once; more channels take the direct form).
enum class WinogradDims { X, XY };
struct WinogradForm {
    WinogradDims dims = WinogradDims::X;
    int max_cin_2d = 16;
};

struct Conv2dMinPipeline {
    blocks::Conv conv;
    WinogradForm form;
    blocks::ConvWinogradX winograd;      // defined when form.dims is X
    blocks::ConvWinograd2D winograd2d;   // defined when form.dims is XY
    Halide::Expr use_winograd;
    Halide::Func conv_value;  // (x, y, c, n)
    blocks::MinReduce min_channels;
    Halide::Func output;  // (x, y, c, n) with c of extent 1
    Halide::Expr kw, kh, cin, cout;
};
// `winograd`: a bool Expr (the generators' runtime Input, or constant false).
// p32: min over channels of conv * scale.
Conv2dMinPipeline build_p32(Halide::Func input, Halide::Func weight, Halide::Func bias,
                            Halide::Expr in_w, Halide::Expr in_h, Halide::Expr scale,
                            Halide::Expr kw, Halide::Expr kh, Halide::Expr cin, Halide::Expr cout,
                            Halide::Expr winograd, WinogradForm form = {});
// p25: tanh(tanh(min over channels of conv)); p25_epilogue is the part after the minimum
// (also the tensor-core generator's, p25_conv2d_min_tanh_tanh.cpp).
Halide::Expr p25_epilogue(const Halide::Expr &min_over_channels);
Conv2dMinPipeline build_p25(Halide::Func input, Halide::Func weight, Halide::Func bias,
                            Halide::Expr in_w, Halide::Expr in_h, Halide::Expr kw, Halide::Expr kh,
                            Halide::Expr cin, Halide::Expr cout, Halide::Expr winograd,
                            WinogradForm form = {});

// p83: conv3d -> GroupNorm -> min(., min_value) -> clamp(lo, hi) -> dropout.
struct P83Params {
    Halide::Expr groups, eps, min_value, clamp_lo, clamp_hi, p, training, seed;
};
struct P83Pipeline {
    blocks::Conv conv;
    // Where xy_max_cin > 0: Winograd F(4x4, 3x3) over x and y (winograd2d.h)
    // for 3x3x3 kernels with at most xy_max_cin input channels (a schedule
    // stages the transformed input of all of them), whose result is NaN on
    // purpose where its sums are not all finite (the caller recomputes those
    // samples in the direct form); conv_value selects it (use_winograd) or
    // the direct form. Otherwise conv_value is conv.f itself.
    int xy_max_cin = 0;
    blocks::ConvWinograd3D winograd;
    Halide::Expr use_winograd;
    Halide::Func conv_value;  // (x, y, z, c, n)
    blocks::GroupNormStats stats;
    // Where piece_w > 0 the statistics come from pieces of piece_w x piece_h
    // pixels (blocks::groupnorm_stats_by_pieces), else from columns.
    int piece_w = 0, piece_h = 0;
    Halide::Func elementwise;  // normalize, min, clamp, dropout (the output's definition)
    Halide::Func output;  // (x, y, z, c, n)
    Halide::Expr kw, kh, kd, cin, cout;
    Halide::Expr out_w, out_h, out_d;  // the output's extents
};
// in_w, in_h, in_depth: the input's extents; the output's are in - k + 1.
P83Pipeline build_p83(Halide::Func input, Halide::Func weight, Halide::Func bias,
                      Halide::Func gamma, Halide::Func beta, Halide::Expr in_w, Halide::Expr in_h,
                      Halide::Expr in_depth, const P83Params &params, Halide::Expr kw,
                      Halide::Expr kh, Halide::Expr kd, Halide::Expr cin, Halide::Expr cout,
                      int xy_max_cin = 0, int piece_w = 0, int piece_h = 0);

}  // namespace fusedconv
