// The four benchmark problems: default shapes (KernelBench's), and the
// FLOP and byte counts the roofline uses. GPU-free.
#pragma once

#include "fusedconv/tensor.h"

#include <string>
#include <vector>

namespace fusedconv::bench {

struct Problem {
    std::string id;     // "p24"
    std::string name;   // "conv3d_min_softmax"
    Shape default_input;
    int cout, k, spatial_dims;  // cout, k and default_input[1]: tools::kernelbench_conv
    bool has_norm;      // p83: GroupNorm weight and bias
    bool channel_min;   // output keeps one channel (p25, p32)
};

const std::vector<Problem> &problems();
// Throws Error for an unknown id.
const Problem &find_problem(const std::string &id);
// "2,3,24,32,32" -> {2, 3, 24, 32, 32}; throws Error on a malformed list or
// a rank that does not fit the problem.
Shape parse_shape(const Problem &p, const std::string &text);
// Convolution output shape (N, Cout, spatial...).
Shape conv_shape(const Problem &p, const Shape &input);
Shape output_shape(const Problem &p, const Shape &input);
// 2 FLOPs per multiply-add of the convolution.
double conv_flops(const Problem &p, const Shape &input);
// Bytes that must move at least once: input, parameters and output (float32).
double unavoidable_bytes(const Problem &p, const Shape &input);

}  // namespace fusedconv::bench
