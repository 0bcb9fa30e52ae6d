// Helpers shared by the model classes.
#pragma once

#include "fusedconv/error.h"
#include "fusedconv/tensor.h"

#include <cstdint>
#include <random>
#include <string>

namespace fusedconv::detail {

// Halide without the large_buffers feature indexes with 32-bit signed
// offsets: a buffer may hold at most 2^31 - 1 bytes.
constexpr int64_t kMaxElements = (int64_t{1} << 31) / int64_t{sizeof(float)} - 1;
// Elements of `shape`: 0 when a size is non-positive, -1 when past
// kMaxElements (computed without overflow).
int64_t bounded_numel(const Shape &shape);
// "more than <kMaxElements> elements (2 GiB), past Halide's 32-bit indexing":
// how every message about a too large shape ends.
std::string past_indexing_limit();

// U(-bound, bound) values of `shape` on `device`, as PyTorch's default
// kaiming-uniform(a = sqrt(5)) init and bias init draw them.
Tensor uniform_tensor(const Shape &shape, float bound, std::mt19937_64 &rng, Device device);
// A tensor filled with `value` on `device`.
Tensor filled_tensor(const Shape &shape, float value, Device device);
// Throws Error("<model>: <name> must be >= 1, got v") for v < 1.
void require_positive(const char *model, const char *name, int value);
// The conv weight shape (Cout, Cin, k...) with `spatial_dims` k's; throws
// Error("<model>: conv.weight shape ... has more than ... elements") when it
// is past Halide's 32-bit indexing. Arguments are already >= 1.
Shape conv_weight_shape(const char *model, int out_channels, int in_channels, int kernel_size,
                        int spatial_dims);
// PyTorch's default init bound 1/sqrt(fan_in), fan_in = Cin * k^spatial_dims
// (computed without int overflow).
float init_bound(int in_channels, int kernel_size, int spatial_dims);
// PyTorch's default conv init, seeded: the weight (Cout, Cin, k...) and then
// the bias, both U(-b, b) with b = init_bound, drawn from one mt19937_64(seed)
// in that order, on `device`. Throws as conv_weight_shape does.
void init_conv_parameters(const char *model, int out_channels, int in_channels, int kernel_size,
                          int spatial_dims, uint64_t seed, Device device, Tensor &weight,
                          Tensor &bias);
// Checks a rank-(2 + spatial) input (N, Cin, spatial...) against the model's
// channels and kernel size; returns the output shape with `out_channels`.
// `expects` names what fixes the channel count in the message ("the model
// expects 3", "conv.weight of shape (4, 3, 3, 3) expects 3").
Shape conv_output_shape(const char *model, const Shape &input, int spatial_dims,
                        int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                        const std::string &expects = "the model");
// Returns `output` after checking that it fits Halide's 32-bit indexing: an
// input that is fine can still have an output that is too large (more output
// than input channels). Throws Error naming the model, both shapes and the limit.
Shape checked_output_shape(const char *model, const Shape &input, Shape output);

}  // namespace fusedconv::detail
