// One small generator per building block, so tests can check each block on
// its own (the p83 output is constant at its default parameters, so the
// convolution and GroupNorm must be checked directly). CPU targets only.
#include "blocks.h"
#include "blocks_schedule.h"
#include "winograd2d.h"

namespace fusedconv {

using namespace Halide;
using blocks::V;

class BlockConv2d : public Generator<BlockConv2d> {
public:
    Input<Buffer<float, 4>> input{"input"};
    Input<Buffer<float, 4>> weight{"weight"};
    Input<Buffer<float, 1>> bias{"bias"};
    Output<Buffer<float, 4>> output{"output"};
    void generate() {
        V v;
        conv = blocks::conv2d(input, weight, bias, weight.dim(0).extent(), weight.dim(1).extent(),
                              weight.dim(2).extent(), weight.dim(3).extent(),
                              input.dim(0).extent(), input.dim(1).extent());
        output(v.x, v.y, v.c, v.n) = conv.f(v.x, v.y, v.c, v.n);
    }
    void schedule() { schedules::schedule_block({conv.f}, output); }

private:
    blocks::Conv conv;
};

class BlockConv3d : public Generator<BlockConv3d> {
public:
    Input<Buffer<float, 5>> input{"input"};
    Input<Buffer<float, 5>> weight{"weight"};
    Input<Buffer<float, 1>> bias{"bias"};
    Output<Buffer<float, 5>> output{"output"};
    void generate() {
        V v;
        conv = blocks::conv3d(input, weight, bias, weight.dim(0).extent(), weight.dim(1).extent(),
                              weight.dim(2).extent(), weight.dim(3).extent(),
                              weight.dim(4).extent(), input.dim(0).extent(), input.dim(1).extent(),
                              input.dim(2).extent());
        output(v.x, v.y, v.z, v.c, v.n) = conv.f(v.x, v.y, v.z, v.c, v.n);
    }
    void schedule() { schedules::schedule_block({conv.f}, output); }

private:
    blocks::Conv conv;
};

// A 3x3 conv2d in one of the Winograd forms: "x" (F(4, 3) along x,
// winograd.h) or "xy" (F(4x4, 3x3), winograd2d.h), for the accuracy tests.
class BlockConv2dWinograd : public Generator<BlockConv2dWinograd> {
public:
    GeneratorParam<std::string> form{"form", "x"};
    Input<Buffer<float, 4>> input{"input"};
    Input<Buffer<float, 4>> weight{"weight"};
    Input<Buffer<float, 1>> bias{"bias"};
    Output<Buffer<float, 4>> output{"output"};
    void generate() {
        V v;
        Expr kw = weight.dim(0).extent(), kh = weight.dim(1).extent();
        Expr cin = weight.dim(2).extent(), cout = weight.dim(3).extent();
        Expr in_w = input.dim(0).extent(), in_h = input.dim(1).extent();
        Func f;
        if (form.value() == "x") {
            auto w = blocks::conv2d_winograd_x(input, weight, bias, kw, kh, cin, cout, in_w, in_h);
            f = w.f;
            roots = {w.u, w.m};
        } else if (form.value() == "xy") {
            auto w = blocks::conv2d_winograd_2d(input, weight, bias, kw, kh, cin, cout, in_w, in_h);
            f = w.f;
            roots = {w.u, w.v, w.m};
        } else {
            throw CompileError("block_conv2d_winograd: form must be x or xy, not \"" +
                               form.value() + "\"");
        }
        output(v.x, v.y, v.c, v.n) = f(v.x, v.y, v.c, v.n);
    }
    void schedule() { schedules::schedule_block(roots, output); }

private:
    std::vector<Func> roots;
};

// A 3x3x3 conv3d in the F(4x4, 3x3) form over x and y (winograd2d.h), for
// the accuracy tests.
class BlockConv3dWinogradXY : public Generator<BlockConv3dWinogradXY> {
public:
    Input<Buffer<float, 5>> input{"input"};
    Input<Buffer<float, 5>> weight{"weight"};
    Input<Buffer<float, 1>> bias{"bias"};
    Output<Buffer<float, 5>> output{"output"};
    void generate() {
        V v;
        auto w = blocks::conv3d_winograd_xy(
            input, weight, bias, weight.dim(0).extent(), weight.dim(1).extent(),
            weight.dim(2).extent(), weight.dim(3).extent(), weight.dim(4).extent(),
            input.dim(0).extent(), input.dim(1).extent(), input.dim(2).extent());
        output(v.x, v.y, v.z, v.c, v.n) = w.f(v.x, v.y, v.z, v.c, v.n);
        roots = {w.u, w.v, w.m};
    }
    void schedule() { schedules::schedule_block(roots, output); }

private:
    std::vector<Func> roots;
};

// min over depth (5D -> 4D) and over channels (4D -> (x, y, n)).
class BlockMinDepth : public Generator<BlockMinDepth> {
public:
    Input<Buffer<float, 5>> input{"input"};
    Output<Buffer<float, 4>> output{"output"};
    void generate() {
        V v;
        m = blocks::min_over_depth(input, input.dim(2).extent());
        output(v.x, v.y, v.c, v.n) = m.f(v.x, v.y, v.c, v.n);
    }
    void schedule() { schedules::schedule_block({m.f}, output); }

private:
    blocks::MinReduce m;
};

class BlockMinChannels : public Generator<BlockMinChannels> {
public:
    Input<Buffer<float, 4>> input{"input"};
    Output<Buffer<float, 3>> output{"output"};
    void generate() {
        V v;
        m = blocks::min_over_channels(input, input.dim(2).extent());
        output(v.x, v.y, v.n) = m.f(v.x, v.y, v.n);
    }
    void schedule() { schedules::schedule_block({m.f}, output); }

private:
    blocks::MinReduce m;
};

class BlockSoftmax : public Generator<BlockSoftmax> {
public:
    Input<Buffer<float, 4>> input{"input"};
    Output<Buffer<float, 4>> output{"output"};
    void generate() {
        V v;
        s = blocks::softmax_over_channels(input, input.dim(2).extent());
        output(v.x, v.y, v.c, v.n) = s.out(v.x, v.y, v.c, v.n);
    }
    void schedule() { schedules::schedule_block({s.max_c, s.sum_c}, output); }

private:
    blocks::Softmax s;
};

class BlockGroupNorm : public Generator<BlockGroupNorm> {
public:
    Input<Buffer<float, 5>> input{"input"};
    Input<Buffer<float, 1>> gamma{"gamma"};
    Input<Buffer<float, 1>> beta{"beta"};
    Input<int32_t> groups{"groups", 1, 1, 1 << 30};
    Input<float> eps{"eps"};
    Output<Buffer<float, 5>> output{"output"};
    void generate() {
        V v;
        Expr cpg = input.dim(3).extent() / groups;
        s = blocks::groupnorm_stats(input, input.dim(0).extent(), input.dim(1).extent(),
                                    input.dim(2).extent(), cpg, eps);
        output(v.x, v.y, v.z, v.c, v.n) =
            blocks::groupnorm_apply(input, s, gamma, beta, cpg, v.x, v.y, v.z, v.c, v.n);
    }
    void schedule() {
        schedules::schedule_block({s.cols, s.mean, s.m2, s.groups}, output);
    }

private:
    blocks::GroupNormStats s;
};

// The element-wise blocks on a flat tensor: out = dropout(clamp(min(in, m), lo, hi)),
// or tanh(in) when `op` is 1. One generator keeps the library count small.
class BlockElementwise : public Generator<BlockElementwise> {
public:
    Input<Buffer<float, 1>> input{"input"};
    Input<int32_t> op{"op"};  // 0: min/clamp/dropout chain, 1: tanh
    Input<float> min_value{"min_value"};
    Input<float> clamp_lo{"clamp_lo"};
    Input<float> clamp_hi{"clamp_hi"};
    Input<float> dropout_p{"dropout_p"};
    Input<bool> training{"training"};
    Input<uint32_t> seed{"seed"};
    Output<Buffer<float, 1>> output{"output"};
    void generate() {
        V v;
        Expr chain = blocks::dropout(
            blocks::min_then_clamp(input(v.x), min_value, clamp_lo, clamp_hi), v.x,
            seed, dropout_p, training);
        output(v.x) = select(op == 1, tanh(input(v.x)), chain);
    }
    void schedule() { schedules::schedule_block({}, output); }
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::BlockConv2d, block_conv2d)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockConv3d, block_conv3d)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockConv2dWinograd, block_conv2d_winograd)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockConv3dWinogradXY, block_conv3d_winograd_xy)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockMinDepth, block_min_depth)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockMinChannels, block_min_channels)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockSoftmax, block_softmax)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockGroupNorm, block_groupnorm)
HALIDE_REGISTER_GENERATOR(fusedconv::BlockElementwise, block_elementwise)
