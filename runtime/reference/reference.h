// Plain float64 references of the building blocks and the four models, in
// PyTorch's layout and semantics (see ../shared/PROBLEMS.md). Used by the CLI
// to check outputs on sampled positions and by the tests on whole tensors.
// Written for clarity, not speed: direct loops, no blocking.
//
// Tensors are host arrays in PyTorch's contiguous (N, C, [D,] H, W) order,
// described by HostTensor. NaN semantics follow PyTorch: min, max, clamp and
// softmax propagate NaN; a NaN anywhere in a GroupNorm group makes the whole
// group NaN.
#pragma once

#include <cstdint>
#include <vector>

namespace fusedconv::reference {

struct HostTensor {
    std::vector<int64_t> shape;
    std::vector<double> values;  // contiguous, PyTorch order
    int64_t numel() const;
    // Index of a multi-index (size == shape.size()).
    int64_t offset(const std::vector<int64_t> &index) const;
    double at(const std::vector<int64_t> &index) const { return values[offset(index)]; }
};
HostTensor from_float(const std::vector<int64_t> &shape, const float *data);

// NaN-propagating min / max, PyTorch's clamp (min(max(v, lo), hi): hi wins
// when lo > hi).
double nan_min(double a, double b);
double nan_max(double a, double b);
double torch_clamp(double v, double lo, double hi);

// Convolution (stride 1, no padding, bias) at one output position.
// input (N, Cin, H, W) or (N, Cin, D, H, W); weight (Cout, Cin, k...); bias (Cout).
// `spatial` is (y, x) or (z, y, x).
double conv_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
               int64_t n, int64_t co, const std::vector<int64_t> &spatial);
// The whole convolution output.
HostTensor conv(const HostTensor &input, const HostTensor &weight, const HostTensor &bias);

// min over depth of a 5D tensor -> 4D; min over channels of a 4D tensor with keepdim -> (N,1,H,W).
HostTensor min_over_depth(const HostTensor &t);
HostTensor min_over_channels(const HostTensor &t);
// softmax over channels (dim 1) of a 4D tensor.
HostTensor softmax_channels(const HostTensor &t);
// GroupNorm of a 5D tensor: mean and biased variance over (channels of the
// group, all spatial positions), exact two-pass in float64.
HostTensor group_norm(const HostTensor &t, int groups, const HostTensor &gamma,
                      const HostTensor &beta, double eps);

// The dropout mask of the project: the element at contiguous index `index` is
// kept when uniform01(seed, index) >= p. Same hash as generators/blocks.cpp.
double uniform01(uint32_t seed, uint32_t index);
double dropout(double v, uint32_t index, uint32_t seed, double p, bool training);

// Whole models.
HostTensor p24(const HostTensor &input, const HostTensor &weight, const HostTensor &bias);
HostTensor p32(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
               double scale);
HostTensor p25(const HostTensor &input, const HostTensor &weight, const HostTensor &bias);
struct P83Args {
    int groups;
    double eps, min_value, clamp_lo, clamp_hi, p;
    bool training;
    uint32_t seed;
};
HostTensor p83(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
               const HostTensor &gamma, const HostTensor &beta, const P83Args &args);

// Models at sampled positions (for the CLI on full-size problems).
// p24: the softmax over channels at pixel (n, y, x): Cout values.
std::vector<double> p24_pixel(const HostTensor &input, const HostTensor &weight,
                              const HostTensor &bias, int64_t n, int64_t y, int64_t x);
double p32_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
              double scale, int64_t n, int64_t y, int64_t x);
double p25_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
              int64_t n, int64_t y, int64_t x);
// GroupNorm statistics of one (sample, group) of the conv output: {mean, var}.
struct GroupStats {
    double mean, var;
};
GroupStats p83_group_stats(const HostTensor &input, const HostTensor &weight,
                           const HostTensor &bias, int groups, int64_t n, int64_t g);
// The p83 output at (n, c, z, y, x) given that element's group statistics.
double p83_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
              const HostTensor &gamma, const HostTensor &beta, const P83Args &args,
              const GroupStats &stats, int64_t n, int64_t c, int64_t z, int64_t y, int64_t x);

}  // namespace fusedconv::reference
