// Shared algorithm building blocks: what is computed, never how.
//
// Layout convention (Halide order, innermost first, PyTorch order reversed):
//   2D activations  f(x, y, c, n)         = PyTorch (N, C, H, W)
//   3D activations  f(x, y, z, c, n)      = PyTorch (N, C, D, H, W)
//   2D weights      w(kx, ky, ci, co)     = PyTorch (Cout, Cin, kH, kW)
//   3D weights      w(kx, ky, kz, ci, co) = PyTorch (Cout, Cin, kD, kH, kW)
//
// The Funcs returned here carry no schedule: schedules/ decides where each is
// computed. Pure Vars use the names in `V` so schedules can refer to them.
#pragma once

#include "Halide.h"

#include <string>

namespace fusedconv::blocks {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

// The pure variable names every block uses.
struct V {
    Var x{"x"}, y{"y"}, z{"z"}, c{"c"}, n{"n"}, g{"g"};
};

// PyTorch's min/max/clamp propagate NaN; Halide's min/max (and the PTX and
// x86 instructions behind them) may return the non-NaN operand.
Expr nan_min(Expr a, Expr b);
Expr nan_max(Expr a, Expr b);

// torch.clamp(torch.min(v, m), lo, hi) = min(max(min(v, m), lo), hi):
// when lo > hi every value becomes hi; NaN in v, m, lo or hi propagates.
// Two comparisons and selects per element, not three NaN-aware min/max:
// with scalar m, lo and hi the bounds fold into one clamp outside any loop.
Expr min_then_clamp(Expr v, Expr m, Expr lo, Expr hi);

// A 2D or 3D convolution with bias: stride 1, no padding, any kernel size.
// The sum starts from the bias (PyTorch adds it after the taps' sum: more
// accurate when |bias| is far above the products, the same error at the
// models' default init); p83's GPU pipeline measured 2.5-8% faster with
// the bias first (generators/NOTES.md).
struct Conv {
    Func f;       // f(x, y, c, n) or f(x, y, z, c, n); the update sums over r
    RDom r;       // (kx, ky, ci) or (kx, ky, kz, ci)
    Func source;  // the input as the update reads it, edge-clamped
    Func weight;  // the weights as the update reads them, channel-clamped
};
// kw, kh, (kd), cin, cout: extents of the weight buffer; in_w, in_h, (in_d):
// the input's width, height (and depth). `source` clamps the input column,
// row, (depth) and channel to [0, in_w) x [0, in_h) x ([0, in_d) x) [0, cin),
// `weight` and the bias clamp their channels to [0, cin) x [0, cout): a
// schedule may then compute (or stage) whole tiles of pixels, blocks of
// depths or blocks of channels past the last one (never consumed) without
// reading outside the buffers.
Conv conv2d(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr cin, Expr cout,
            Expr in_w, Expr in_h, const std::string &name = "conv");
// The 2D input as a conv reads it, (x, y, c, n) clamped to [0, in_w) x
// [0, in_h) x [0, cin): conv2d's `source`, and the Winograd form's.
Func clamped_input2d(Func input, Expr in_w, Expr in_h, Expr cin, const std::string &name);
// The 2D weights as a conv reads them, (kx, ky, ci, co) clamped to
// [0, kw) x [0, kh) x [0, cin) x [0, cout): conv2d's `weight` (whose taps stay
// inside the kernel anyway), and the Winograd form's (3 taps whatever kw, kh).
Func clamped_weight2d(Func weight, Expr kw, Expr kh, Expr cin, Expr cout,
                      const std::string &name);
// `xy_inside`: where this (scalar) condition holds, the caller's schedule
// computes no pixel past the right or bottom edge (its tiles shift inwards
// there), so `source` reads column x and row y as they are instead of
// clamped: a row of taps is then one address and constant offsets, not one
// clamped address per column (p24's GPU kernel: 8% fewer instructions).
// Reads outside the input still fail Halide's bounds check, never silently.
// The depth and channel stay clamped.
Conv conv3d(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr kd,
            Expr cin, Expr cout, Expr in_w, Expr in_h, Expr in_d,
            const std::string &name = "conv", Expr xy_inside = Expr());

// Minimum over one dimension of a reduction domain, NaN-propagating.
struct MinReduce {
    Func f;
    RDom r;
};
// 3D activation -> 2D activation: min over z in [0, depth).
MinReduce min_over_depth(Func f5, Expr depth, const std::string &name = "min_depth");
// 2D activation -> f(x, y, n): min over c in [0, channels).
MinReduce min_over_channels(Func f4, Expr channels, const std::string &name = "min_channels");

// Softmax over the channel dimension of a 2D activation f(x, y, c, n):
// out = exp(f - max_c f) / sum_c exp(f - max_c f).
struct Softmax {
    Func max_c;  // (x, y, n)
    Func exp_c;  // (x, y, c, n)
    Func sum_c;  // (x, y, n)
    Func out;    // (x, y, c, n)
    RDom r_max, r_sum;
};
Softmax softmax_over_channels(Func f4, Expr channels, const std::string &name = "softmax");

// GroupNorm statistics of a 3D activation f(x, y, z, c, n), computed in a
// numerically safe way: each column (fixed x, z, c, n; all y) gets its mean
// and its sum of squared deviations from that mean by Welford's one-pass
// update; columns (all of the same height h) are combined with Chan's
// parallel formula
//   mean = mean over columns of mean_col,
//   M2   = sum over columns of [ m2_col + h * (mean_col - mean)^2 ],
// so no E[x^2] - E[x]^2 cancellation happens in float32. Columns rather than
// rows: neighbouring columns read neighbouring addresses.
struct GroupNormStats {
    Func cols;      // (x, z, c, n) -> {column mean, column m2}; by pieces: (px, py, z, c, n)
    Func mean;      // (g, n)
    Func m2;        // (g, n)
    Func groups;    // (g, n) -> {mean, rstd = 1 / sqrt(m2 / count + eps)}
    RDom r_col, r_mean, r_m2;
    Func piece_sums;  // by pieces only: (px, py, z, c, n) -> {S1, S2}, over r_col
};
GroupNormStats groupnorm_stats(Func f5, Expr width, Expr height, Expr depth,
                               Expr channels_per_group, Expr eps,
                               const std::string &name = "gn");
// The same statistics from pieces of piece_w x piece_h pixels of one (z, c, n)
// plane, for a schedule that computes them where a kernel already holds such
// a piece (p83's GPU conv, from its staged output). Per piece (px, py, z, c,
// n): the sums of d = f - K and d^2 over its pixels inside the plane, K the
// piece's first pixel (so float32 holds deviations from a value of the
// piece, not the mean's magnitude), giving the piece's mean K + S1 / k and
// M2 = S2 - S1^2 / k (k its pixel count); pieces are then combined by Chan's
// formula weighted by k. A piece's value is NaN if any of its pixels is.
// `cols` is then the pieces' {mean, m2} over (px, py, z, c, n).
GroupNormStats groupnorm_stats_by_pieces(Func f5, Expr width, Expr height, Expr depth,
                                         Expr channels_per_group, Expr eps, int piece_w,
                                         int piece_h, const std::string &name = "gn");
// y = (x - mean) * rstd * gamma[c] + beta[c] at one element.
Expr groupnorm_apply(Func f5, const GroupNormStats &s, Func gamma, Func beta,
                     Expr channels_per_group, Expr x, Expr y, Expr z, Expr c, Expr n);

// A uint32 constant (Halide's Expr has no unsigned constructor).
Expr u32(uint32_t value);

// A 32-bit integer hash (lowbias32 by Chris Wellons): the dropout mask is a
// pure function of (seed, element index) through it.
Expr hash32(Expr v);
// The mask's 24-bit draw from (seed, index), uniform on [0, 2^24); the
// uniform in [0, 1) is draw24 * 2^-24 (exact in float32).
Expr draw24(Expr seed, Expr index);
// PyTorch dropout at one element. In training mode the element is kept when
// draw24(seed, index) * 2^-24 >= p and then scaled by 1/(1-p), else multiplied by 0
// (so NaN stays NaN, as with PyTorch's input * mask * scale); in eval mode it
// is the identity.
Expr dropout(Expr v, Expr index, Expr seed, Expr p, Expr training);

}  // namespace fusedconv::blocks
