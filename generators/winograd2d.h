// Winograd F(4x4, 3x3) (Lavin and Gray, 2016): a conv2d with a 3x3 kernel
// computed on 4x4 output tiles with 36 multiplies per tile, input channel and
// output channel instead of 144 (the form along x, winograd.h, takes 72).
// With d the 6x6 input patch at (4 tx, 4 ty) and g the 3x3 taps,
//   out = AT [ (G g GT) * (BT d B) ] A,
// and the sum over input channels is taken in the transform domain,
// m(k, l) = sum over ci of u(k, l) * v(k, l), so each output transform runs
// once per tile and output channel. The sums are indexed by one point
// p = k + 6 l and read u regrouped as ug, the 36 points in 9 groups of 4
// with the output channel between group and point: a schedule can then
// store 4 points of consecutive channels together (one vector load each,
// consecutive across threads of consecutive channels). Each two-dimensional
// transform is the one-dimensional F(4, 3) transform (winograd.h) along x,
// then along y.
//
// Float32 error: the transforms' coefficients multiply along both axes
// (up to 8 x 8 in AT), so rounding grows more than in the form along x;
// tests/test_winograd_accuracy.cpp measures it against the direct form and
// bounds it by the conditioning of each output.
//
// Non-finite values: as in the form along x, every output of a tile whose
// 36 sums are not all finite, or could overflow in the output transform, is
// NaN on purpose, and the caller recomputes those in the direct form.
//
// Like blocks::conv2d this is an algorithm only.
#pragma once

#include "winograd.h"

namespace fusedconv::blocks {

// Points per group of ConvWinograd2D::ug (36 = 9 groups of 4).
constexpr int kWinograd2DPointGroup = 4;

struct ConvWinograd2D {
    // Transform points along x and y, tiles along x and y, output in the tile.
    Var k{"wk"}, l{"wl"}, tx{"wtx"}, ty{"wty"}, i{"wi"}, j{"wj"}, p{"wp"};
    Func source;  // (x, y, ci, n): the input, edge-clamped as in blocks::conv2d
    Func weight;  // (kx, ky, ci, co): the weights, every index clamped
    Func ux;      // (k, ky, ci, co): G along x of each row of taps
    Func u;       // (k, l, ci, co): G g GT
    Func ug;      // (q, co, g, ci): u of point k + 6 l = 4 g + q, in groups of 4 points
    Func vx;      // (k, tx, y, ci, n): BT along x of each input row of a tile
    Func v;       // (k, l, tx, ty, ci, n): BT d B
    Func m;       // (p, tx, ty, co, n): the transform-domain sums over r at point p = k + 6 l
    RDom r;       // ci
    Func ox;      // (i, l, tx, ty, co, n): AT along x of each row of m
    Func poison;  // (tx, ty, co, n): 0, or NaN for a tile to recompute
    Func tiles;   // (i, j, tx, ty, co, n): the conv plus bias at (4 tx + i, 4 ty + j)
    Func f;       // (x, y, co, n)
};
// Same arguments and clamping contract as conv2d_winograd_x: the result is
// the convolution only for a 3x3 kernel (the caller selects).
ConvWinograd2D conv2d_winograd_2d(Func input, Func weight, Func bias, Expr kw, Expr kh,
                                  Expr cin, Expr cout, Expr in_w, Expr in_h,
                                  const std::string &name = "wino2d");

}  // namespace fusedconv::blocks
