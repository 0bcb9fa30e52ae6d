// What the p25 and p32 generators share around their pipelines: the output
// binding and the autoscheduler's estimates (and the tensor-core generators'
// form and output). Both generators declare the same Inputs (input, weight,
// bias, winograd) and Output (output), where `winograd` selects Winograd F(4,
// 3) along x when true and the kernel is 3x3, the direct form otherwise. A
// Winograd result is NaN wherever the input or its sums are not all finite
// (winograd.h); the runtime then calls again with false on the samples that
// hold such NaN (runtime/src/nan_check.h).
#pragma once

#include "pipelines.h"
#include "winograd2d_tensor_core.h"

namespace fusedconv {

// output(x, y, 1, n) = the pipeline's result, which the schedule then
// computes. Winograd tiles start at multiples of 4 from output column and
// row 0: the runtime's buffers always start at 0, and saying so lets the
// schedules fold the tile arithmetic.
template <typename OutputBuffer>
void bind_conv2d_min_output(Conv2dMinPipeline &p, OutputBuffer &output) {
    blocks::V v;
    output(v.x, v.y, v.c, v.n) = p.output(v.x, v.y, v.c, v.n);
    output.dim(0).set_min(0);
    output.dim(1).set_min(0);
    p.output = output;
}

// The tensor-core generators (p25_tensor_core, p32_tensor_core): the form on the generator's
// input, weight and bias, in `shape` (scale as winograd2d_tensor_core.h says); and output(x, y,
// 1, n) = value, the blocks at multiples of 64 x 4 pixels from 0, so that a block's tiles are
// one bx and ty.
template <typename TensorCoreGenerator>
blocks::ConvMinWinogradTensorCore tensor_core_form(TensorCoreGenerator &g, blocks::TensorCoreShape shape,
                                                   Halide::Expr scale = Halide::Expr()) {
    return blocks::conv2d_min_winograd_tensor_core(
        g.input, g.weight, g.bias, g.weight.dim(0).extent(), g.weight.dim(1).extent(),
        g.weight.dim(2).extent(), g.weight.dim(3).extent(), g.input.dim(0).extent(),
        g.input.dim(1).extent(), shape, scale);
}
template <typename OutputBuffer>
void bind_tensor_core_output(OutputBuffer &output, const Halide::Expr &value) {
    blocks::V v;
    output(v.x, v.y, v.c, v.n) = value;
    output.dim(0).set_min(0);
    output.dim(1).set_min(0);
}

// Estimates for an autoscheduler (bench/tune): a (batch, cin, 256, 256)
// input and cout 3x3 kernels, the models' default shapes.
template <typename ConvMinGenerator>
void set_conv2d_min_estimates(ConvMinGenerator &g, int batch, int cin, int cout) {
    g.input.set_estimates({{0, 256}, {0, 256}, {0, cin}, {0, batch}});
    g.weight.set_estimates({{0, 3}, {0, 3}, {0, cin}, {0, cout}});
    g.bias.set_estimates({{0, cout}});
    g.winograd.set_estimate(true);
    g.output.set_estimates({{0, 254}, {0, 254}, {0, 1}, {0, batch}});
}

}  // namespace fusedconv
