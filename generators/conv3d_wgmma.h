// A conv3d with a 3x3x3 kernel and its minimum over depth (p24's) as an implicit GEMM on
// Hopper's warpgroup mma: for each output depth, the 64 output pixels of a block (32 columns of
// a pair of rows) x the taps times the taps x 24 output channels, in k-steps of
// wgmma.m64n24k8 at float32 accuracy (3xTF32). Halide 14 emits no tensor-core instructions: each
// step is written as the placeholder calls of mma_step.h's wgmma_step, which the runtime splices
// into wgmma when the driver loads the module (runtime/src/mma_splice.h); the form compiles for
// CUDA targets only and runs only on sm_90 GPUs with the splice installed.
//
// Layout (bench/tensor_core_probe's tc_p24_wgmma measured it: README there, and
// schedules/NOTES.md, "The conv on wgmma"):
//  - taps k = kx' + 4 j with j = ky + 3 kz + 9 ci and kx' = 3 a zero weight: 112 taps, 14
//    k-steps of 8, for at most kWgmmaMaxCin input channels. A thread's A elements of a step are
//    then its two pixels' input at x + t plus constants (t its lane's column; lanes with t = 3
//    read x + 2 again, their weight being 0). Its two pixels are vertical neighbours, so the
//    lower one's rows ky = 0, 1 are the upper one's ky = 1, 2 (36 loads a depth, not 54); the
//    k-steps are update definitions of acc, so that those rows are one expression each;
//  - bw: the weights as wgmma's B (K-major core matrices of 8 channels x 4 taps), split into tf32
//    values and remainders, in the block's shared memory: the kernel's only shared allocation,
//    so at address 0, where the steps' descriptors point;
//  - acc: a thread's 12 accumulator elements (2 pixel rows x 6 channels) at one depth;
//  - dmin: their running minimum over depth (NaN-aware); mins: element 4 j + 2 h + e of thread
//    (t, g, w) = wgmma row 16 w + 8 h + g, pixel (32 xb + 8 w + g, y0 + h) of block
//    pb = xb + (out_w + 31) / 32 * pair, y0 = min(2 pair, out_h - 2), channel 8 j + 2 t + e, plus
//    bias; f: mins at pixel (x, y).
// At most kWgmmaMaxCout output channels (zero weights pad fewer) and an output height of at least
// 2 (the caller selects); any width, depth and batch. Non-finite inputs: the split turns an
// infinity into NaN, so the sums can be NaN where the direct form's are infinite; the caller
// recomputes samples holding NaN in the direct form.
// Like blocks::conv3d this is an algorithm only (schedules/conv3d_wgmma_schedule.h).
#pragma once

#include "blocks.h"

namespace fusedconv::blocks {

constexpr int kWgmmaMaxCout = 24;  // wgmma's n
constexpr int kWgmmaMaxCin = 3;    // 27 rows of taps in 14 k-steps
constexpr int kWgmmaSteps = 14;
constexpr int kWgmmaColumns = 32;  // a block's output columns: 2 rows of them are wgmma's m (64)
// The output height the form needs (its blocks pair rows; the caller selects).
constexpr int kWgmmaMinOutHeight = 2;
constexpr int kWgmmaElements = 12; // accumulator elements a thread
constexpr int kWgmmaStepBytes = 2 * kWgmmaMaxCout * 8 * 4;  // B of one step: values, remainders

struct ConvMinDepthWgmma {
    Var e{"we"}, co{"wco"}, kc{"wkc"}, part{"wpart"}, s{"ws"};    // bw's
    Var t{"wt"}, g{"wg"}, w{"ww"}, h{"wh"}, j{"wj"}, pb{"wpb"}, z{"wz"};
    Func bw;    // (e, co, kc, part, s): tap 8 s + 4 kc + e of channel co, value (part 0) or remainder
    Func acc;   // (t, g, w, z, pb, n): Tuple of the 12 sums at depth z, a k-step an update
    Func dmin;  // (t, g, w, pb, n): Tuple of the 12 minima over depth
    RDom rz;
    Func mins;  // (e, h, j, t, g, w, pb, n)
    Func f;     // (x, y, c, n): the minimum over depth of the conv plus bias
    Expr cin;   // the input channels (the schedule specializes on 3)
};

// cin, cout: the weight buffer's channel extents; in_w, in_h, in_d: the input's. The result is
// the conv's only for 3x3x3 kernels, cin <= kWgmmaMaxCin and cout <= kWgmmaMaxCout (the caller
// selects).
ConvMinDepthWgmma conv3d_min_depth_wgmma(Func input, Func weight, Func bias, Expr cin, Expr cout,
                                         Expr in_w, Expr in_h, Expr in_d, const std::string &name = "wg");

}  // namespace fusedconv::blocks
