// The four models as stateless functions: parameters are passed in each call
// (the caller owns them, as PyTorch does), nothing is copied, and the output
// is written into a tensor of the output shape. The Model classes
// (models.h) and the C ABI (fusedconv_c.h) call these.
//
// Every tensor of a call must be on one device (the CPU, or one CUDA device
// cuda:N), float32 in PyTorch's contiguous layout: input (N, Cin, [D,] H, W),
// weight (Cout, Cin, k, k[, k]) with equal kernel sizes, bias and norm
// parameters (Cout). The output must have the *_output_shape() shape and
// share no storage with any input. Each check throws fusedconv::Error naming
// the offending shape, value or device before any work.
//
// On the GPU the work is queued on options.stream of the tensors' device
// (ExecOptions, device.h) and the call returns: p25 and p32 with 3x3 kernels,
// and p83 with 3x3x3 kernels and at most 3 input channels, copy a NaN count
// per sample to the host (the Winograd form's check), so they wait for that
// stream (only); so does p24 on a GPU of compute capability 9.0 with 3x3x3
// kernels, at most 3 input and 24 output channels and an input height of at
// least 4 (its tensor-core form's check); otherwise p24 copies nothing to the
// host. p83 on a large batch (that form) runs half of it on a side stream of
// the device, which waits for options.stream's earlier work and which
// options.stream then waits for, so the call's work stays ordered on
// options.stream (FUSEDCONV_BATCH_HALVES=0 keeps it all there; README).
//
// CUDA graph capture: on a capturing stream p24 takes its kernel without
// tensor cores, which queues kernels only, so the call is recorded into the
// graph (run it once outside the capture first, so that its kernels are
// loaded). p25, p32 and p83 allocate device
// memory for intermediates inside the call (and may wait for the host, as
// above), which a graph cannot hold: on a capturing stream they throw Error
// before queuing anything, and the capture stays valid.
//
// Thread safety: every function here may be called from several threads at
// once, on the same or different devices and streams.
#pragma once

#include "fusedconv/device.h"
#include "fusedconv/error.h"
#include "fusedconv/tensor.h"

#include <cstdint>

namespace fusedconv {

// p24: conv3d -> min over `dim` (2 or -3, the depth; the only one supported)
// -> softmax over channels. Output (N, Cout, H', W').
Shape p24_output_shape(const Shape &input, const Shape &weight, int dim = 2);
void p24_forward(const Tensor &input, const Tensor &weight, const Tensor &bias, int dim,
                 Tensor &output, const ExecOptions &options = {});

// p25: conv2d -> min over channels (keepdim) -> tanh -> tanh. Output (N, 1, H', W').
Shape p25_output_shape(const Shape &input, const Shape &weight);
void p25_forward(const Tensor &input, const Tensor &weight, const Tensor &bias, Tensor &output,
                 const ExecOptions &options = {});

// p32: conv2d -> * scale_factor -> min over channels (keepdim). Output (N, 1, H', W').
Shape p32_output_shape(const Shape &input, const Shape &weight);
void p32_forward(const Tensor &input, const Tensor &weight, const Tensor &bias,
                 float scale_factor, Tensor &output, const ExecOptions &options = {});

// p83: conv3d -> GroupNorm(groups, eps, norm_weight, norm_bias) ->
// min(x, min_value) -> clamp(clamp_min, clamp_max) -> dropout(dropout_p) in
// training mode (identity otherwise), mask a pure function of (seed, index).
// Output (N, Cout, D', H', W').
struct P83Params {
    int groups = 8;
    float eps = 1e-5f;  // GroupNorm's, finite and > 0 (as the model's set_eps)
    float min_value = 0.0f, clamp_min = 0.0f, clamp_max = 1.0f;
    float dropout_p = 0.2f;  // in [0, 1]
    bool training = true;
    uint32_t seed = 0;
};
Shape p83_output_shape(const Shape &input, const Shape &weight, int groups);
void p83_forward(const Tensor &input, const Tensor &weight, const Tensor &bias,
                 const Tensor &norm_weight, const Tensor &norm_bias, const P83Params &params,
                 Tensor &output, const ExecOptions &options = {});

}  // namespace fusedconv
