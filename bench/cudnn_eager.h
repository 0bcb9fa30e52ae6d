// PyTorch-eager-like baselines for the four models: cuDNN for the convolution,
// then one plain CUDA kernel per PyTorch op, each writing its whole result to
// global memory (no fusion), as torch does without torch.compile.
//
// This header includes no CUDA header, so plain C++ code (the harness) can use
// it; bench/cudnn_eager.cu holds the cuDNN and kernel code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fusedconv::bench {

// Math of the convolution.
//   FP32: CUDNN_FMA_MATH, strict float32 FMA (torch.backends.cudnn.allow_tf32 = False).
//   TF32: CUDNN_TENSOR_OP_MATH, TF32 tensor cores allowed (PyTorch's cuDNN default).
enum class ConvMath { FP32, TF32 };

// One model's eager computation on device buffers owned by the caller (input,
// parameters, output: PyTorch contiguous layout, float32, device 0, cudaMalloc).
// The constructor (make_*) creates the cuDNN handle and descriptors, times the
// convolution algorithms on the real buffers (cudnnFindConvolutionForwardAlgorithmEx,
// i.e. torch.backends.cudnn.benchmark = True; it synchronizes and overwrites
// nothing of the caller's) and keeps the fastest, and allocates the workspace and
// every intermediate tensor. run() enqueues the whole forward on the legacy
// default stream (stream 0), without synchronizing and without allocating.
// The objects keep the caller's pointers: the buffers must outlive them.
// Every failure throws std::runtime_error naming the failing call.
class EagerModel {
public:
    virtual ~EagerModel();
    virtual void run() = 0;
    // Device bytes this object allocated (cuDNN workspace + intermediates,
    // including the int64 indices torch.min(dim) returns and the dropout bool
    // mask); the caller's input, parameters and output are not counted.
    virtual size_t device_bytes() const = 0;
    // Library calls + kernels run() enqueues (a cuDNN call counts once even if
    // cuDNN launches several kernels inside it).
    virtual int launches() const = 0;
    // The chosen convolution algorithm, e.g. "IMPLICIT_PRECOMP_GEMM/TENSOR_OP
    // ws=1.2MB 3.41ms" (the time is cuDNN's own measurement while picking).
    virtual std::string conv_algo() const = 0;
};

// p24: conv3d -> min over depth -> softmax over channels.
// in (N, Cin, D, H, W), w (Cout, Cin, k, k, k), b (Cout), out (N, Cout, H', W').
std::unique_ptr<EagerModel> make_p24(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, int cout, int k,
                                     float *out, ConvMath math);

// p32: conv2d -> * scale -> min over channels (keepdim).
// in (N, Cin, H, W), w (Cout, Cin, k, k), b (Cout), out (N, 1, H', W').
std::unique_ptr<EagerModel> make_p32(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, int cout, int k,
                                     float scale, float *out, ConvMath math);

// p25: conv2d -> min over channels (keepdim) -> tanh -> tanh.
// in (N, Cin, H, W), w (Cout, Cin, k, k), b (Cout), out (N, 1, H', W').
std::unique_ptr<EagerModel> make_p25(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, int cout, int k,
                                     float *out, ConvMath math);

// p83's runtime scalars (see /work/shared/PROBLEMS.md).
struct P83Scalars {
    int groups;
    float eps, min_value, clamp_lo, clamp_hi, p;
    bool training;
    uint32_t seed;
};

// p83: conv3d -> GroupNorm -> min(., min_value) -> clamp(lo, hi) -> dropout.
// in (N, Cin, D, H, W), w (Cout, Cin, k, k, k), b, gamma, beta (Cout),
// out (N, Cout, D', H', W').
std::unique_ptr<EagerModel> make_p83(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, const float *gamma,
                                     const float *beta, int cout, int k, const P83Scalars &s,
                                     float *out, ConvMath math);

}  // namespace fusedconv::bench
