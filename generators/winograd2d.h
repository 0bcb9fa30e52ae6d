// Winograd F(4x4, 3x3) (Lavin and Gray, 2016): a conv2d with a 3x3 kernel
// computed on 4x4 output tiles with 36 multiplies per tile, input channel and
// output channel instead of 144 (the form along x, winograd.h, takes 72).
// With d the 6x6 input patch at (4 tx, 4 ty) and g the 3x3 taps,
//   out = AT [ (G g GT) * (BT d B) ] A,
// and the sum over input channels is taken in the transform domain,
// m(k, l) = sum over ci of u(k, l) * v(k, l), so each output transform runs
// once per tile and output channel. The sums are indexed by one point
// p = k + 6 l and read u regrouped as ug, the 36 points in 9 groups of 4
// and the output channels in groups of 32: (point in group, channel in
// group, point group, input channel, channel group). Stored in that order,
// 4 points of consecutive channels lie together (one vector load each,
// consecutive across threads of consecutive channels), and the strides
// between point groups and input channels are constants, so a thread's
// loads along its input-channel loop are one address plus fixed offsets.
// Each two-dimensional transform is the one-dimensional F(4, 3) transform
// (winograd.h) along x, then along y.
//
// Float32 error: the transforms' coefficients multiply along both axes
// (up to 8 x 8 in AT), so rounding grows more than in the form along x;
// tests/test_winograd_accuracy.cpp measures it against the direct form and
// bounds it by the conditioning of each output.
//
// Non-finite values: as in the form along x, every output of a tile whose
// 36 sums are not all finite, or whose transforms overflow, is NaN on
// purpose (checked on the tile's 16 outputs, of which either leaves one inf
// or NaN), and the caller recomputes those in the direct form.
//
// Like blocks::conv2d this is an algorithm only.
#pragma once

#include "winograd.h"

namespace fusedconv::blocks {

// Points per group of ConvWinograd2D::ug (36 = 9 groups of 4), and output
// channels per group.
constexpr int kWinograd2DPointGroup = 4;
constexpr int kWinograd2DChannelGroup = 32;

// The Vars both forms below use.
struct ConvWinograd2DVars {
    // Transform points along x and y, tiles along x and y, output in the tile,
    // and the point index k + 6 l of the sums.
    Var k{"wk"}, l{"wl"}, tx{"wtx"}, ty{"wty"}, i{"wi"}, j{"wj"}, p{"wp"};
};

// The three steps of the forms, with the Vars of `rest` (the channels, the sample, ...) after
// the tile's own; the forms here and the tensor-core form (winograd2d_tensor_core.h) compose them.
// Taps: u = G g GT, rows of taps along x, then the columns of those along y.
// weight(kx, ky, rest...); ux(k, ky, rest...); u(k, l, rest...).
void define_winograd2d_taps(Func &ux, Func &u, Func weight, const Var &k, const Var &l,
                           const std::vector<Var> &rest);
// Input: v = BT d B, each of the patch's rows along x, then its columns along y.
// source(x, y, rest...); vx(k, tx, y, rest...); v(k, l, tx, ty, rest...).
void define_winograd2d_input(Func &vx, Func &v, Func source, const ConvWinograd2DVars &w,
                            const std::vector<Var> &rest);
// Output: AT m A, each row of m along x, then the columns along y, plus the bias of channel
// `co`, NaN for a tile to recompute (poison). m(p, tx, ty, rest...) with p = k + 6 l;
// ox(i, l, tx, ty, rest...); poison(tx, ty, rest...); tiles(i, j, tx, ty, rest...).
void define_winograd2d_output(Func &ox, Func &poison, Func &tiles, Func m, Func bias,
                             const Expr &co, const Expr &cout, const ConvWinograd2DVars &w,
                             const std::vector<Var> &rest);

struct ConvWinograd2D : ConvWinograd2DVars {
    Func source;  // (x, y, ci, n): the input, edge-clamped as in blocks::conv2d
    Func weight;  // (kx, ky, ci, co): the weights, every index clamped
    Func ux;      // (k, ky, ci, co): G along x of each row of taps
    Func u;       // (k, l, ci, co): G g GT
    Func ug;      // (q, cl, g, ci, cg): u of point 4 g + q = k + 6 l, channel 32 cg + cl
    Func vx;      // (k, tx, y, ci, n): BT along x of each input row of a tile
    Func v;       // (k, l, tx, ty, ci, n): BT d B
    Func m;       // (p, tx, ty, co, n): the transform-domain sums over r at point p = k + 6 l
    RDom r;       // ci
    Func ox;      // (i, l, tx, ty, co, n): AT along x of each row of m
    Func poison;  // (tx, ty, co, n): the bias, or NaN for a tile to recompute
    Func tiles;   // (i, j, tx, ty, co, n): the conv plus bias at (4 tx + i, 4 ty + j)
    Func f;       // (x, y, co, n)
};
// Same arguments and clamping contract as conv2d_winograd_x: the result is
// the convolution only for a 3x3 kernel (the caller selects).
ConvWinograd2D conv2d_winograd_2d(Func input, Func weight, Func bias, Expr kw, Expr kh,
                                  Expr cin, Expr cout, Expr in_w, Expr in_h,
                                  const std::string &name = "wino2d");

// The same form for a conv3d whose taps are 3 x 3 in x and y (and 3 in
// depth): each depth tap's plane is transformed, and the sums in the
// transform domain run over (depth tap, input channel), so one output
// transform serves 27 Cin taps. The activations keep the depth between y
// and the channel, as blocks::conv3d's do.
struct ConvWinograd3D : ConvWinograd2DVars {
    Func source;  // (x, y, z, ci, n): the input, edge-clamped as in blocks::conv3d
    Func weight;  // (kx, ky, kz, ci, co): the weights, every index clamped
    Func ux;      // (k, ky, kz, ci, co)
    Func u;       // (k, l, kz, ci, co): G g GT of each depth tap's plane
    Func ug;      // (q, cl, g, kz, ci, cg): as ConvWinograd2D::ug
    Func vx;      // (k, tx, y, z, ci, n)
    Func v;       // (k, l, tx, ty, z, ci, n): BT d B of each input plane
    Func m;       // (p, tx, ty, z, co, n): the sums over r at point p
    RDom r;       // (kz, ci), kz over 3 taps: a constant extent
    Func ox;      // (i, l, tx, ty, z, co, n)
    Func poison;  // (tx, ty, z, co, n)
    Func tiles;   // (i, j, tx, ty, z, co, n)
    Func f;       // (x, y, z, co, n)
};
// kw, kh, kd, cin, cout: the weight buffer's extents; in_w, in_h, in_d: the
// input's. The result is the convolution only for a 3x3x3 kernel (the caller
// selects).
ConvWinograd3D conv3d_winograd_xy(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr kd,
                                  Expr cin, Expr cout, Expr in_w, Expr in_h, Expr in_d,
                                  const std::string &name = "wino3d");

}  // namespace fusedconv::blocks
