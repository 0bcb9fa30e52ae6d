// A conv2d with a 3x3 kernel and its minimum over output channels, in Winograd F(4x4, 3x3)
// (winograd2d.h) with the transform-domain product on tensor cores: for each of the 36 points,
// the sums over input channels are a matrix product (output channels x input channels times
// input channels x tiles), which warps compute in steps of mma.sync.m16n8k8 at float32 accuracy
// (3xTF32). Halide 14 emits no tensor-core instructions, so each step is written as the
// placeholder calls of mma_step.h, and the runtime splices them into mma.sync when the driver
// loads the module (runtime/src/mma_splice.h): the form compiles for CUDA targets only, and runs
// only where the splice is installed (runtime/src/cuda_context.cpp).
//
// The form is laid out for its one schedule (schedules/winograd2d_tensor_core_schedule.h): the
// operands' fragment layouts are the mma's, and a block of the GPU owns 16 tiles along x
// (64 x 4 output pixels) of one sample, summed by warps of a share of the 36 points each, in
// rounds of 16 or 32 output channels (TensorCoreShape below):
//  - uf: the transformed taps u = G g GT as each lane's A fragments, zero past the input and
//    output channels: split ahead into a tf32 value and its tf32 remainder, or (the shape's
//    split_u_at_steps) float32 values that each step splits as it splits v;
//  - vf: the transformed input v = BT d B as each lane's B fragments, zero past the input
//    channels;
//  - acc: a warp's sums of one point for 16 output channels x 8 tiles (an m-tile and a tile
//    group), over the steps of 8 input channels; mfrag, m: those sums as a round's (point,
//    channel, tile);
//  - ox, poison, tiles: the output transform, bias and NaN marking of winograd2d.h;
//  - part: per (channel group, tile, pixel) the running minimum over the rounds, the channels
//    past cout excluded; f: the minimum over the 8 channel groups.
// At most max_cin input channels, a multiple of the mma's k (8), all staged in shared memory:
// the runtime takes another form beyond. Any number of output channels, any width, height and
// batch.
//
// Non-finite values: as in winograd2d.h, every output of a tile whose 16 outputs are not all
// finite is NaN, and so is the minimum over channels of its pixels (nan_min); the caller
// recomputes those samples in the direct form. Float32 error: 3xTF32 drops the product of the
// two remainders (about 2^-22 of each product), below the transforms' own rounding
// (tests/test_winograd_accuracy.cpp's bound holds on the GPU: tests/test_tensor_core_form.cpp).
//
// Like blocks::conv2d this is an algorithm only.
#pragma once

#include "winograd2d.h"

namespace fusedconv::blocks {

constexpr int kTensorCoreMaxCin = 16;          // p25's library: two steps of the mma's k
constexpr int kTensorCoreMaxCinWide = 64;      // p32's: eight steps, v 147 KB a block
constexpr int kTensorCoreStep = 8;             // input channels of one mma step: its k
constexpr int kTensorCoreMTile = 16;           // output channels of one mma: its m
constexpr int kTensorCoreTileGroup = 8;        // tiles of one mma: its n
constexpr int kTensorCoreBlockTiles = 16;      // tiles along x a block owns: 2 tile groups

// The block's shape beyond the fixed one above:
//  - max_cin input channels staged, a multiple of the mma's k;
//  - round_mtiles blocks of 16 output channels a round (the mma's m); with 2, the warps are
//    split between the two tile groups too, each warp summing one;
//  - warp_points of the 36 points each warp sums (a divisor of 36);
//  - split_u_at_steps: u's fragments stored as float32 and split by each mma step (half the
//    bytes each block reads, about 10 more instructions a step), or split ahead.
// The block has 36 / warp_points x round_mtiles warps (4 at 9 points and one m-tile), at most
// 32, and round_mtiles x 36 KB of sums (54 KB with one, padded for conflict-free stores and
// reads). conv2d_min_winograd_tensor_core throws CompileError for any other shape.
struct TensorCoreShape {
    static constexpr int kPoints = kWinogradPoints * kWinogradPoints;
    int max_cin = kTensorCoreMaxCin;
    int round_mtiles = 1;
    int warp_points = 9;
    bool split_u_at_steps = false;
    int point_warps() const { return kPoints / warp_points; }  // warps over the points
    int warps() const { return point_warps() * round_mtiles; }
    // uf's parts a value (its h extent): the tf32 value and remainder, or the float32 value.
    int u_parts() const { return split_u_at_steps ? 1 : 2; }
};
constexpr TensorCoreShape kTensorCoreShape{kTensorCoreMaxCin, 1, 9, true};           // p25's
constexpr TensorCoreShape kTensorCoreWideShape{kTensorCoreMaxCinWide, 1, 3, true};   // p32's

struct ConvMinWinogradTensorCore : ConvWinograd2DVars {
    // Fragment indices (mma_splice.h's layout): lane = 4 g8 + t4; q the A element, h its tf32
    // value (0) or remainder (1); jb the B element; (el, eh) the accumulator element 2 eh + el
    // (tile 2 t4 + el, channel g8 + 8 eh of its m-tile), g8 = g4 + 4 g2 where the hand-off's
    // storage needs the two apart; ks the step of 8 input channels; tg the tile group (8 tiles)
    // of a block, bx the block along x; pi the point of warp wp (point warp_points wp + pi); mt
    // the m-tile of a round; ni the tile group of a warp's sums; rd the round of 16 round_mtiles
    // output channels (uf's last index is the m-tile overall, round_mtiles rd + mt); c8, k4: a
    // round's channel c8 + 8 k4. A block's tile is tx (0-15; the tile along x is 16 bx + tx),
    // its row of tiles ty.
    Var q{"tq"}, h{"tqh"}, lane{"tlane"}, t4{"tt4"}, g8{"tg8"}, jb{"tjb"}, el{"tel"}, eh{"teh"}, g4{"tg4"}, g2{"tg2"}, ks{"tks"}, tg{"ttg"},
        bx{"tbx"}, pi{"tpi"}, mt{"tmt"}, ni{"tni"}, wp{"twp"}, rd{"trd"}, c8{"tc8"}, k4{"tk4"};
    Func source;  // (x, y, ci, n): the input, edge-clamped, zero past cin
    Func weight;  // (kx, ky, ci, co): the weights, every index clamped
    Func ux, u;   // (k, ky, ci, co), (k, l, ci, co): G g GT (define_winograd2d_taps)
    Func uf;      // (q, lane, h, ks, p, rd): u's A fragments, tf32 values and remainders (h)
                  // or float32 values (h 0 only)
    Func uw;      // uf as a step reads it (the schedule loads it as vectors)
    Func vx, v;   // (k, tx, y, ci, n), (k, l, tx, ty, ci, n): BT d B
    Func vf;      // (jb, t4, g8, tg, ks, p, bx, ty, n): v's B fragments
    Func acc;     // (t4, g8, pi, mt, ni, wp, rd, bx, ty, n): Tuple of the 4 accumulator elements
    RDom rk;      // the steps of 8 input channels
    Func mfrag;   // (el, eh, t4, g4, g2, pi, mt, ni, wp, rd, bx, ty, n): acc's elements
    Func m;       // (p, tx, ty, k4, c8, rd, bx, n): the sums at point p of channel c8 + 8 k4
    Func ox, poison, tiles;  // define_winograd2d_output's, (.., tx, ty, k4, c8, rd, bx, n)
    RDom rc;      // the rounds a thread folds into part
    Func part;    // (c8, tx, i, j, bx, ty, n): the minimum over channels c8 + 8 k
    Func groups;  // (k, x, y, n): part's channel group k at pixel (x, y)
    Func f;       // (x, y, n): the minimum over output channels of the conv plus bias
    Expr rounds;  // ceil(cout / (16 round_mtiles))
    TensorCoreShape shape;
};
// kw, kh, cin, cout: the weight buffer's extents; in_w, in_h: the input's. The result is the
// convolution's minimum only for a 3x3 kernel and cin <= shape.max_cin (the caller selects).
// With `scale` defined, the minimum is of the conv plus bias times scale (p32; any sign).
ConvMinWinogradTensorCore conv2d_min_winograd_tensor_core(Func input, Func weight, Func bias,
                                                          Expr kw, Expr kh, Expr cin, Expr cout,
                                                          Expr in_w, Expr in_h, TensorCoreShape shape,
                                                          Expr scale = Expr(),
                                                          const std::string &name = "tc");

// x rounded to tf32 as cvt.rna.tf32.f32 does (to nearest, ties away from zero), as a float32.
Expr round_to_tf32(const Expr &x);

// One part of x's 3xTF32 split: where `value` holds, x rounded to tf32; elsewhere the remainder
// x minus that, rounded to tf32 too (the operands' layouts keep the two parts apart).
Expr tf32_split_part(const Expr &x, const Expr &value);

}  // namespace fusedconv::blocks
