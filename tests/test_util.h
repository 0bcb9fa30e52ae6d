// Helpers shared by the runtime tests (test_errors, test_numerics,
// test_randomized, test_gpu_faults): random host tensors, float64 reference
// views, whole-tensor comparisons with NaN and infinity placement, the
// CPU/GPU test parameter, and checks of fusedconv::Error messages.
#pragma once

#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "reference.h"
#include "run_tools.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace fusedconv {
// Readable test names in ctest ("... GetParam() = gpu").
inline void PrintTo(DeviceChoice d, std::ostream *os) {
    *os << (d == DeviceChoice::GPU ? "gpu" : d == DeviceChoice::CPU ? "cpu" : "auto");
}
}  // namespace fusedconv

namespace fusedconv::testutil {

using reference::HostTensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A host tensor of uniform [lo, hi) values drawn from `rng`; never exactly
// zero (a zero would look like an unwritten or dropped output).
inline Tensor random_tensor(const Shape &shape, std::mt19937_64 &rng, float lo = -1.0f,
                            float hi = 1.0f) {
    Tensor t = Tensor::empty(shape, Device::CPU);
    std::uniform_real_distribution<float> dist(lo, hi);
    float *p = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) {
        do {
            p[i] = dist(rng);
        } while (p[i] == 0.0f);
    }
    return t;
}

inline Tensor random_tensor(const Shape &shape, uint64_t seed, float lo = -1.0f,
                            float hi = 1.0f) {
    std::mt19937_64 rng(seed);
    return random_tensor(shape, rng, lo, hi);
}

// A tensor (either device) as a float64 reference tensor.
using tools::host_copy;

// "(n, c, z, y, x)" of flat index i in a PyTorch-contiguous tensor.
inline std::string index_string(const Shape &shape, int64_t i) {
    Shape idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    return shape_string(idx);
}

// Every element of `got` against the float64 reference: NaN exactly where
// the reference is NaN, infinities equal (same sign), and otherwise
// |got - ref| <= atol + rtol * max(1, |ref|) (relative above 1, absolute
// below), plus extra[i] per element when `extra` is given. Reports the first
// mismatch by index, the number of mismatches and the largest finite error.
inline ::testing::AssertionResult matches_values(const Shape &shape, const std::vector<float> &got,
                                                 const HostTensor &ref, double rtol,
                                                 double atol = 0.0,
                                                 const std::vector<double> &extra = {}) {
    if (shape != ref.shape) {
        return ::testing::AssertionFailure()
               << "shape " << shape_string(shape) << " vs reference " << shape_string(ref.shape);
    }
    if (!extra.empty() && extra.size() != got.size()) {
        return ::testing::AssertionFailure() << extra.size() << " extra tolerances for "
                                             << got.size() << " elements";
    }
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], r = ref.values[i];
        bool ok;
        if (std::isnan(r) || std::isnan(g)) {
            ok = std::isnan(r) && std::isnan(g);
        } else if (std::isinf(r) || std::isinf(g)) {
            ok = g == r;
        } else {
            const double err = std::abs(g - r);
            worst = std::max(worst, err / std::max(1.0, std::abs(r)));
            ok = err <= atol + rtol * std::max(1.0, std::abs(r)) + (extra.empty() ? 0.0 : extra[i]);
        }
        if (!ok) {
            if (first < 0) first = static_cast<int64_t>(i);
            ++bad;
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess() << "max scaled error " << worst;
    return ::testing::AssertionFailure()
           << bad << " of " << got.size() << " elements of " << shape_string(shape)
           << " differ; first at " << index_string(shape, first) << ": got " << got[first]
           << ", float64 reference " << ref.values[first] << " (rtol " << rtol << ", atol "
           << atol << ", max finite scaled error " << worst << ")";
}

inline ::testing::AssertionResult matches(const Tensor &got, const HostTensor &ref,
                                          double rtol = 2e-5, double atol = 0.0) {
    return matches_values(got.shape(), got.to_vector(), ref, rtol, atol);
}

// float32 unit roundoff, 2^-24.
constexpr double kU = 1.0 / (1 << 24);

// Per element of conv(x, w, b): the float32 rounding bound of a sum of
// n = Cin * k^d + 1 products accumulated in any order, n * kU * conv(|x|,
// |w|, |b|).
inline std::vector<double> conv_eps(const HostTensor &x, const HostTensor &w, const HostTensor &b) {
    auto absolute = [](HostTensor t) {
        for (double &v : t.values) v = std::abs(v);
        return t;
    };
    const HostTensor a = reference::conv(absolute(x), absolute(w), absolute(b));
    double n_terms = 1;
    for (size_t d = 1; d < w.shape.size(); ++d) n_terms *= static_cast<double>(w.shape[d]);
    n_terms += 1;
    std::vector<double> eps(a.values.size());
    for (size_t i = 0; i < eps.size(); ++i) eps[i] = n_terms * kU * a.values[i];
    return eps;
}

// Runs `f`; success when it throws fusedconv::Error whose message contains
// every one of `keywords`. Anything else (no exception, another exception
// type, a message missing a keyword) fails with what happened.
template <class F>
::testing::AssertionResult throws_error(F &&f, const std::vector<std::string> &keywords) {
    try {
        f();
    } catch (const Error &e) {
        const std::string msg = e.what();
        for (const std::string &k : keywords) {
            if (msg.find(k) == std::string::npos) {
                return ::testing::AssertionFailure()
                       << "fusedconv::Error \"" << msg << "\" does not mention \"" << k << "\"";
            }
        }
        return ::testing::AssertionSuccess() << "fusedconv::Error \"" << msg << "\"";
    } catch (const std::exception &e) {
        return ::testing::AssertionFailure()
               << "threw a std::exception that is not fusedconv::Error: " << e.what();
    } catch (...) {
        return ::testing::AssertionFailure() << "threw something that is not an exception";
    }
    return ::testing::AssertionFailure() << "no error was thrown";
}

// The test parameter of tests that run on the CPU, and on the GPU when one
// is usable (skipped with a message otherwise).
class OnDevice : public ::testing::TestWithParam<DeviceChoice> {
protected:
    void SetUp() override {
        if (GetParam() == DeviceChoice::GPU && !gpu_available()) {
            GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason()
                         << "); GPU libraries not exercised";
        }
    }
    Device device() const { return GetParam() == DeviceChoice::GPU ? Device::GPU : Device::CPU; }
    DeviceChoice choice() const { return GetParam(); }
    Tensor on_device(const Tensor &t) const { return t.to(device()); }
};

inline std::string device_name(const ::testing::TestParamInfo<DeviceChoice> &info) {
    return info.param == DeviceChoice::GPU ? "GPU" : "CPU";
}

// The float64 references of p24, p25 and p32 with the model's own conv
// parameters (and p32's scale factor).
inline HostTensor p24_reference(const Model &m, const Tensor &in) {
    return reference::p24(host_copy(in), host_copy(m.conv_weight()), host_copy(m.conv_bias()));
}
inline HostTensor p25_reference(const Model &m, const Tensor &in) {
    return reference::p25(host_copy(in), host_copy(m.conv_weight()), host_copy(m.conv_bias()));
}
inline HostTensor p32_reference(const Conv2dScaleMin &m, const Tensor &in) {
    return reference::p32(host_copy(in), host_copy(m.conv_weight()), host_copy(m.conv_bias()),
                          m.scale_factor());
}

// p24's allowance for its conv's rounding, per output element (n, c, y, x):
// each conv value is off by at most its worst-case bound (conv_eps), the min
// over depth by the same, and softmax moves p_c by at most
// 2 p_c (1 - p_c) eps (first order), eps taken per row (n, y, x) as its
// largest over channels and depths. `ref` is the float64 p24 output.
inline std::vector<double> p24_conv_allowance(const HostTensor &x, const HostTensor &w,
                                              const HostTensor &b, const HostTensor &ref) {
    const std::vector<double> eps = conv_eps(x, w, b);  // (N, Cout, OD, OH, OW)
    const int64_t N = ref.shape[0], cout = ref.shape[1], plane = ref.shape[2] * ref.shape[3];
    const int64_t per_sample = static_cast<int64_t>(eps.size()) / N;
    std::vector<double> row_eps(static_cast<size_t>(N * plane), 0.0);
    for (size_t i = 0; i < eps.size(); ++i) {
        const int64_t p = static_cast<int64_t>(i) % plane;
        const int64_t n = static_cast<int64_t>(i) / per_sample;
        double &e = row_eps[n * plane + p];
        e = std::max(e, eps[i]);
    }
    std::vector<double> extra(ref.values.size());
    for (size_t i = 0; i < extra.size(); ++i) {
        const int64_t p = static_cast<int64_t>(i) % plane;
        const int64_t n = static_cast<int64_t>(i) / (cout * plane);
        const double r = ref.values[i];
        extra[i] = 2.0 * r * (1.0 - r) * row_eps[n * plane + p];
    }
    return extra;
}

// p83's allowance for its conv's rounding, per output element. Each
// group's conv values move by at most e, the largest of their worst-case
// bounds (conv_eps; the F(4x4, 3x3) form that the GPU takes for 3x3x3
// kernels stays within half of it, tests/test_winograd_accuracy.cpp), plus
// the float32 rounding of the group's mean (4 kU |mean|). y = (x - mean) / s
// then moves by (2 + |y|) e / s (x and the mean move by e each, s by at most
// e, an RMS deviation), times |gamma_c| and dropout's 1 / (1 - p) in
// training. Where GroupNorm divides by a small spread this is what float32
// can promise; elsewhere it is far below matches()'s rtol.
inline std::vector<double> p83_conv_allowance(const Conv3dGroupNormMinClampDropout &m,
                                              const Tensor &in) {
    const HostTensor x = host_copy(in), w = host_copy(m.conv_weight()),
                     b = host_copy(m.conv_bias());
    const std::vector<double> eps = conv_eps(x, w, b);
    const HostTensor conv = reference::conv(x, w, b);
    const std::vector<float> gamma = m.norm_weight().to_vector();
    const int64_t n = x.shape[0], cout = w.shape[0], groups = m.groups();
    const int64_t group_size = conv.numel() / (n * groups);
    const int64_t spatial = group_size / (cout / groups);
    const double p = m.dropout_p();
    const double keep = m.training() && p < 1.0 ? 1.0 / (1.0 - p) : 1.0;
    std::vector<double> extra(conv.values.size());
    for (int64_t gi = 0; gi < n * groups; ++gi) {
        double mean = 0, var = 0, e = 0;
        for (int64_t j = 0; j < group_size; ++j) {
            mean += conv.values[gi * group_size + j];
            e = std::max(e, eps[gi * group_size + j]);
        }
        mean /= group_size;
        for (int64_t j = 0; j < group_size; ++j) {
            const double d = conv.values[gi * group_size + j] - mean;
            var += d * d;
        }
        var /= group_size;
        e += 4.0 * kU * std::abs(mean);
        const double s = std::sqrt(var + m.eps());
        for (int64_t j = 0; j < group_size; ++j) {
            const int64_t idx = gi * group_size + j;
            const int64_t c = (idx / spatial) % cout;
            const double y = std::abs(conv.values[idx] - mean) / s;
            extra[idx] = keep * (2.0 + y) * e / s * std::abs(gamma[c]);
        }
    }
    return extra;
}

// p83's float64 reference with the model's own parameters and settings.
inline HostTensor p83_reference(const Conv3dGroupNormMinClampDropout &m, const Tensor &in) {
    return reference::p83(host_copy(in), host_copy(m.conv_weight()), host_copy(m.conv_bias()),
                          host_copy(m.norm_weight()), host_copy(m.norm_bias()), tools::p83_args(m));
}

}  // namespace fusedconv::testutil

// Skips the current test (with the reason) when no GPU is usable.
#define FUSEDCONV_REQUIRE_GPU()                                                         \
    do {                                                                                \
        if (!::fusedconv::gpu_available()) {                                            \
            GTEST_SKIP() << "no usable CUDA device ("                                   \
                         << ::fusedconv::gpu_unavailable_reason() << "); GPU-only test"; \
        }                                                                               \
    } while (0)
