// Winograd F(4, 3) along x (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016, in one dimension): a conv2d whose
// kernel is 3 wide computed with 6 multiplies per 4 outputs and row of taps
// instead of 12. With d the six inputs 4t .. 4t + 5 of one input row and g
// one row of 3 taps,
//   out(4t + i) = sum over k of AT[i][k] * (G g)[k] * (BT d)[k],
// and the sum over the remaining taps (ky) and the input channels is taken
// in the transform domain, m(k) = sum over (ky, ci) of u(k) * v(k), so the
// output transform runs once per output and channel, not once per tap.
// Float32 error: a few times the direct form's (the transforms' coefficients
// reach 8); measured within 1e-5 of float64 at the models' default shapes.
//
// Non-finite values: a NaN or an infinity in an input window would reach the
// tile's outputs whose own 3-wide window does not hold it (and inf - inf
// makes NaN), and a float32 overflow inside the transforms could differ
// from the direct form's result. So every output of a tile whose outputs
// are not all finite (which a transform sum that is not finite, or an
// overflow inside the transforms, makes them) is NaN, on purpose: a caller
// that finds NaN in a result computed this way recomputes it in the direct
// form (see runtime/src/nan_check.h).
//
// Like blocks::conv2d this is an algorithm only.
#pragma once

#include "blocks.h"

#include <vector>

namespace fusedconv::blocks {

constexpr int kWinogradTile = 4;    // outputs per tile along x
constexpr int kWinogradPoints = 6;  // transform-domain points (and inputs) per tile
constexpr int kWinogradTaps = 3;    // the kernel width it computes

struct ConvWinogradX {
    Var k{"wk"}, t{"wt"}, i{"wi"};  // transform point, tile along x, output in the tile
    Func source;  // (x, y, ci, n): the input, edge-clamped as in blocks::conv2d
    Func weight;  // (kx, ky, ci, co): the weights, every index clamped
    Func u;       // (k, ky, ci, co): G g, the transformed rows of taps
    Func v;       // (k, t, y, ci, n): BT d, the transformed input rows
    Func m;       // (k, t, y, co, n): the transform-domain sums; the update sums over r
    RDom r;       // (ky, ci), ky over kWinogradTaps rows: a constant extent
    Func tiles;   // (i, t, y, co, n): the conv plus bias at x = 4t + i, or NaN (above)
    Func f;       // (x, y, co, n): tiles at (x % 4, x / 4)
};
// kw, kh, cin, cout: the weight buffer's extents; in_w, in_h: the input's
// width and height. Same clamping contract as blocks::conv2d, and the tap
// column and row are clamped to [0, kw) x [0, kh) too, so any weight buffer
// may be passed; the result is the convolution only for a 3x3 kernel (the
// caller selects; the tap rows' constant extent lets schedules unroll them).
ConvWinogradX conv2d_winograd_x(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr cin,
                                Expr cout, Expr in_w, Expr in_h,
                                const std::string &name = "wino");

// The three one-dimensional transforms of F(4, 3), shared by the form along
// x and the form in both dimensions (winograd2d.h): G g (3 taps -> 6
// points), BT d (6 inputs -> 6 points) and AT m (6 points -> 4 outputs).
std::vector<Expr> winograd_taps_transform(const Expr &g0, const Expr &g1, const Expr &g2);
std::vector<Expr> winograd_input_transform(const std::vector<Expr> &d);
std::vector<Expr> winograd_output_transform(const std::vector<Expr> &m);
// `bias` where the sum of a tile's outputs is finite, NaN otherwise: added to
// each of the tile's outputs, it marks the tiles the caller recomputes in
// the direct form. A transform-domain sum that is not finite makes some
// output inf or NaN (every point reaches an output with a nonzero
// coefficient of AT), and so does an overflow inside the transforms. The
// test and the NaN are integer operations: Halide 14 compiles PTX with
// no-NaN, no-inf fast-math for the whole kernel, which folds 0 * x to 0 even
// under strict_float (the poison's former form, 0 * sum |m|, was compiled
// away on the GPU).
Expr winograd_poison_bias(const Expr &bias, const std::vector<Expr> &outputs);

}  // namespace fusedconv::blocks
