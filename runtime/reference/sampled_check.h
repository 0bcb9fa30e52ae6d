// Checks a full-size model output against the float64 reference on randomly
// sampled positions (the reference at every position of a full-size problem
// would take minutes), or on every position when `samples` is at least their
// number. Used by the CLI and the benchmark harness.
#pragma once

#include "reference.h"

#include <cstdint>
#include <vector>

namespace fusedconv::reference {

// |got - ref| / max(1, |ref|): float32 accuracy relative to the value above 1,
// absolute below. NaN against NaN (and equal infinities) count as equal.
double scaled_error(double got, double ref);

struct SampleReport {
    double max_err = 0;           // largest scaled error over the samples
    double max_abs_err = 0;       // largest |got - ref| (0 where both are NaN)
    void add(double got, double ref);
    double max_row_sum_dev = 0;   // p24: largest |sum over channels - 1|
    int64_t checked = 0;          // positions checked (p24: pixels, all channels each)
};

// `out` is the model's float32 output in PyTorch layout with `out_shape`.
SampleReport check_p24(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       const float *out, const std::vector<int64_t> &out_shape, int samples,
                       uint64_t seed);
SampleReport check_p32(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       double scale, const float *out, const std::vector<int64_t> &out_shape,
                       int samples, uint64_t seed);
SampleReport check_p25(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       const float *out, const std::vector<int64_t> &out_shape, int samples,
                       uint64_t seed);
// Samples come from the first two samples of the batch only: each sampled
// (sample, group) costs a convolution over the whole group.
SampleReport check_p83(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       const HostTensor &gamma, const HostTensor &beta, const P83Args &args,
                       const float *out, const std::vector<int64_t> &out_shape, int samples,
                       uint64_t seed);

}  // namespace fusedconv::reference
