// The init arguments of the models the CLI builds: channel counts and kernel
// size from KernelBench's problem, or from the shape of conv.weight in
// --weights (a user's own model); the other init arguments from flags whose
// defaults are KernelBench's.
#pragma once

#include "fusedconv/tensor.h"

#include <map>
#include <string>

namespace fusedconv::cli {

struct ConvArgs {
    int in_channels = 0, out_channels = 0, kernel_size = 0;
    Shape weight_shape;  // (Cout, Cin, k, k[, k])
    std::string source;  // where they come from, for messages
};

// The init arguments other than the convolution's (KernelBench's defaults).
struct InitArgs {
    int dim = 2;             // p24: the dimension of the min (only 2, the depth)
    float scale = 2.0f;      // p32: scale_factor
    int groups = 8;          // p83: GroupNorm groups
    float min_value = 0.0f;  // p83: torch.min(x, min_value) and the clamp's lower bound
    float max_value = 1.0f;  // p83: the clamp's upper bound
    float dropout_p = 0.2f;  // p83: Dropout(p)
    float eps = 1e-5f;       // p83: GroupNorm eps
};

// 2 for p25 and p32, 3 for p24 and p83.
int spatial_dims(const std::string &model);

// KernelBench's convolution of `model` when `weights` is null, else the one
// that conv.weight's shape (Cout, Cin, k, k[, k]) describes. Throws Error
// naming the file's shape when conv.weight is missing, of the wrong rank, or
// not square / cubic.
ConvArgs conv_args(const std::string &model, const std::map<std::string, Tensor> *weights);

// Throws Error naming the flag and value when an init argument is outside
// what the model takes (p24's dim, p83's groups against out_channels,
// dropout p, eps, non-finite values).
void check_init_args(const std::string &model, const ConvArgs &conv, const InitArgs &init);

// Throws Error naming both shapes when `input` (the --input tensor's shape)
// does not have the rank or the channel count that `conv` takes.
void check_input_shape(const std::string &model, const ConvArgs &conv, const Shape &input);

}  // namespace fusedconv::cli
