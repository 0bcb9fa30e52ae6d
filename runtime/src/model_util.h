// Helpers shared by the model classes.
#pragma once

#include "fusedconv/error.h"
#include "fusedconv/tensor.h"

#include <random>
#include <string>

namespace fusedconv::detail {

// U(-bound, bound) values of `shape` on `device`, as PyTorch's default
// kaiming-uniform(a = sqrt(5)) init and bias init draw them.
Tensor uniform_tensor(const Shape &shape, float bound, std::mt19937_64 &rng, Device device);
// A tensor filled with `value` on `device`.
Tensor filled_tensor(const Shape &shape, float value, Device device);
// Throws Error("<model>: <name> must be >= 1, got v") for v < 1.
void require_positive(const char *model, const char *name, int value);
// Checks a rank-(2 + spatial) input (N, Cin, spatial...) against the model's
// channels and kernel size; returns the output shape with `out_channels`.
Shape conv_output_shape(const char *model, const Shape &input, int spatial_dims,
                        int in_channels, int out_channels, int kernel_size);

}  // namespace fusedconv::detail
