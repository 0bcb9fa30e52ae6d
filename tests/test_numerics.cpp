// Numerics through the full models against the float64 reference:
// - GroupNorm (p83) when the mean is large against the spread (offsets 1e3, 1e4);
// - softmax (p24) of conv outputs around 1e3 and 1e4;
// - +inf / -inf inputs (p25, p32 with both signs of the scale, p24, p83):
//   element-wise as PyTorch, NaN exactly where PyTorch has NaN.
// On the CPU, and on the GPU when one is usable.
//
// Exact convolutions. A float32 convolution of inputs around 1e4 is itself
// inexact (each of its ~80 float32 additions rounds by up to half an ulp of
// ~1e4, 5e-4 to 1e-3), and that error, not GroupNorm's or softmax's, would
// dominate. So the stability tests use inputs and weights whose convolution
// is exact in float32 in any summation order: inputs offset + m/4 (|m| <= 32)
// and weights 1/64 or 2/64, so every product and partial sum is a multiple of
// 2^-8 below 2^15: 23 significant bits, which float32 holds exactly. Then the
// float32 pipeline and the float64 reference see the very same conv values
// and the comparison measures the normalization or the softmax alone. Every
// output channel has the same weight sum (121/64), so every channel carries
// the offset equally: the mean of a GroupNorm group is ~1.9 * offset while
// its spread is ~1.
#include "test_util.h"

#include "fusedconv/models.h"

#include "p25_cpu.h"
#include "p32_cpu.h"
#include "nan_check.h"
#include "p32_cuda.h"
#include "p32_tc_cuda.h"
#include "p32_xy_cuda.h"
#include "p83_cuda.h"
#include "p83_xy_cuda.h"
#include "winograd2d_limits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;

// offset + m/4 with m uniform in [-32, 32]: exact in float32 (16 significant
// bits for |offset| = 1e4).
Tensor dyadic_input(const Shape &shape, float offset, uint64_t seed) {
    Tensor t = Tensor::empty(shape);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> m(-32, 32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = offset + m(rng) / 4.0f;
    return t;
}

// (Cout, Cin, k...) weights: a positive constant 1.5/64 perturbed by +-0.5/64,
// with exactly `taps / 2` taps of 2/64 per output channel at random places,
// so every channel's weights sum to the same (taps + taps / 2) / 64.
Tensor dyadic_weight(const Shape &shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape);
    std::mt19937_64 rng(seed);
    const int64_t taps = t.numel() / shape[0];
    std::vector<float> row(static_cast<size_t>(taps));
    for (int64_t co = 0; co < shape[0]; ++co) {
        for (int64_t i = 0; i < taps; ++i) row[i] = (i < taps / 2 ? 2.0f : 1.0f) / 64.0f;
        std::shuffle(row.begin(), row.end(), rng);
        std::copy(row.begin(), row.end(), t.data() + co * taps);
    }
    return t;
}

// Bias: multiples of 1/256 in (-1, 1), exact sums with the above.
Tensor dyadic_bias(int64_t cout, uint64_t seed) {
    Tensor t = Tensor::empty({cout});
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> m(-255, 255);
    for (int64_t i = 0; i < cout; ++i) t.data()[i] = m(rng) / 256.0f;
    return t;
}

class Numerics : public OnDevice {};

// ---------------------------------------------------------------- GroupNorm, large mean

// p83 in eval mode with min_value and clamp out of the way: the output is
// GroupNorm's y = (x - mean) / sqrt(var + eps) * gamma + beta itself.
//
// Achievable accuracy. The conv values x are exact (see the top), so the
// float32 pipeline's error is GroupNorm's own. Its mean is a float32 number
// near 1.9 * offset, so even a perfectly rounded mean is off by up to half an
// ulp of it: 2^-24 * 2^14 = 9.8e-4 at offset 1e4 (1.2e-4 at 1e3), and the
// accumulation of the mean adds a few such roundings. In the output that
// error is divided by the group's standard deviation s (~1 here) and
// multiplied by |gamma|: |y - y_ref| <= K * ulp(|mean|)/2 / s * |gamma| with
// K = 4 (a few roundings), plus 1e-4 * max(1, |y|) for the variance and the
// final affine (relative float32 errors, as in test_blocks' GroupNorm tests).
// At offset 1e4 that is ~4e-3 absolute: the best any float32 GroupNorm can do
// here is ~1e-3 (measured on the CPU and on an H200: 9.6e-5 at 1e3, 1.6e-3
// at 1e4, with |gamma| up to 2 and s ~1.2). A one-pass float32 variance E[x^2] - E[x]^2 would be off by
// ~ulp(E[x^2]) = ulp(3.6e8) = 32 against var ~1, and a plain float32 sum of
// the group's 4080 values (~7.8e7, ulp 8) would put the mean off by ~1e-2:
// both fail this bound by far.
TEST_P(Numerics, GroupNormWithLargeMeanMatchesFloat64) {
    const int cin = 3, cout = 8, k = 3, groups = 4;
    const Shape in_shape = {2, cin, 10, 17, 19};  // conv (2, 8, 8, 15, 17): 4080 values per group
    for (float offset : {1e3f, 1e4f}) {
        SCOPED_TRACE("offset " + std::to_string(offset));
        Conv3dGroupNormMinClampDropout m(cin, cout, k, groups, 0.0f, 1.0f, 0.5f, choice(), 1);
        Tensor gamma = random_tensor({cout}, 11, 0.5f, 2.0f);
        Tensor beta = random_tensor({cout}, 12, -1.0f, 1.0f);
        m.set_parameters(dyadic_weight({cout, cin, k, k, k}, 13), dyadic_bias(cout, 14), gamma,
                         beta);
        m.set_min_value(1e30f);
        m.set_clamp(-1e30f, 1e30f);
        m.set_training(false);
        Tensor in = dyadic_input(in_shape, offset, 15);
        Tensor out = m.forward(on_device(in));
        const HostTensor ref = p83_reference(m, in);

        // The conv really is exact, and the group statistics as described.
        const HostTensor conv =
            reference::conv(host_copy(in), host_copy(m.conv_weight()), host_copy(m.conv_bias()));
        const int64_t per_group = conv.numel() / (2 * groups);
        std::vector<double> tol(static_cast<size_t>(conv.numel()));
        // The direct form (the CPU's) computes these convs exactly; the GPU
        // takes the F(4x4, 3x3) form for this 3x3x3 kernel
        // (runtime/src/ops.cpp), which rounds in its transforms, within the
        // conv's worst-case bound, which GroupNorm then divides by the spread.
        const std::vector<double> conv_allow =
            device() == Device::GPU ? p83_conv_allowance(m, in)
                                    : std::vector<double>(static_cast<size_t>(conv.numel()), 0.0);
        const std::vector<float> g = gamma.to_vector();
        double worst_ratio = 0;
        for (int64_t ng = 0; ng < 2 * groups; ++ng) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < per_group; ++i) {
                const double x = conv.values[ng * per_group + i];
                ASSERT_EQ(static_cast<double>(static_cast<float>(x)), x) << "conv not exact";
                mean += x;
            }
            mean /= per_group;
            for (int64_t i = 0; i < per_group; ++i) {
                const double d = conv.values[ng * per_group + i] - mean;
                var += d * d;
            }
            var /= per_group;
            const double sd = std::sqrt(var + m.eps());
            worst_ratio = std::max(worst_ratio, std::abs(mean) / sd);
            const double half_ulp = std::ldexp(1.0, std::ilogb(std::abs(mean)) - 24);
            for (int64_t i = 0; i < per_group; ++i) {
                const int64_t idx = ng * per_group + i;
                const int64_t c = (idx / (per_group / (cout / groups))) % cout;
                tol[idx] = 4.0 * half_ulp / sd * std::abs(g[c]) +
                           1e-4 * std::max(1.0, std::abs(ref.values[idx])) + conv_allow[idx];
            }
        }
        EXPECT_GT(worst_ratio, 1.5 * offset / 4);  // mean >> spread, as intended

        const std::vector<float> got = out.to_vector();
        double max_err = 0;
        int64_t bad = 0, first = -1;
        for (size_t i = 0; i < got.size(); ++i) {
            const double err = std::abs(got[i] - ref.values[i]);
            max_err = std::max(max_err, err);
            if (!(err <= tol[i])) {
                if (first < 0) first = static_cast<int64_t>(i);
                ++bad;
            }
        }
        const double max_allow = *std::max_element(conv_allow.begin(), conv_allow.end());
        std::printf("[ info     ] offset %.0e: mean/std up to %.3g, max |error| %.3g (conv "
                    "rounding allowance up to %.3g)\n",
                    offset, worst_ratio, max_err, max_allow);
        EXPECT_EQ(bad, 0) << "first at " << index_string(ref.shape, first) << ": got "
                          << got[first] << ", reference " << ref.values[first] << ", tolerance "
                          << tol[first];
        // What that bound means here, in numbers (see above), where the conv
        // is exact; a form that rounds in the conv (the GPU's F(4x4, 3x3) for
        // this 3x3x3 kernel) adds up to its allowance.
        EXPECT_LT(max_err, (offset < 5e3f ? 1e-3 : 5e-3) + max_allow);
    }
}

// ---------------------------------------------------------------- softmax, large values

// p24's softmax sees the min over depth of conv values ~1.9 * offset (1.9e3,
// 1.9e4): exp of those overflows float32 (above 88.7) unless the row maximum
// is subtracted first. With exact conv values the channels differ by O(1),
// so rows are far from one-hot and the comparison is a real one; float32 exp
// and normalization give ~1e-7 relative errors, so outputs (in [0, 1]) must
// match to 2e-6, rows sum to 1 within 1e-5 and be finite.
TEST_P(Numerics, SoftmaxOfLargeExactValuesIsFiniteAndMatches) {
    const int cin = 3, cout = 24, k = 3;
    for (float offset : {1e3f, 1e4f, -1e4f}) {
        SCOPED_TRACE("offset " + std::to_string(offset));
        Conv3dMinSoftmax m(cin, cout, k, 2, choice(), 2);
        m.set_parameters(dyadic_weight({cout, cin, k, k, k}, 21), dyadic_bias(cout, 22));
        Tensor in = dyadic_input({2, cin, 5, 9, 11}, offset, 23);
        Tensor out = m.forward(on_device(in));
        const HostTensor ref = p24_reference(m, in);
        EXPECT_TRUE(matches(out, ref, 0.0, 2e-6));
        const std::vector<float> v = out.to_vector();
        const int64_t hw = 7 * 9;
        double min_max_p = 1;
        for (int64_t n = 0; n < 2; ++n) {
            for (int64_t p = 0; p < hw; ++p) {
                double sum = 0, row_max = 0;
                for (int64_t c = 0; c < cout; ++c) {
                    const float x = v[(n * cout + c) * hw + p];
                    ASSERT_TRUE(std::isfinite(x));
                    sum += x;
                    row_max = std::max(row_max, static_cast<double>(x));
                }
                EXPECT_NEAR(sum, 1.0, 1e-5);
                min_max_p = std::min(min_max_p, row_max);
            }
        }
        EXPECT_LT(min_max_p, 0.9) << "every row one-hot: the test would not compare much";
    }
}

// The same with PyTorch's default init and inputs scaled so that conv values
// reach ~1e3 and ~1e4 with channel differences of that size too (rows mostly
// one-hot). Here the float32 conv is inexact: with n = Cin * k^3 + 1 terms
// each conv value is off by at most eps = n * 2^-24 * (sum |w x| + |b|)
// (recursive summation, any order), the min over depth by the same, and
// softmax moves p_c by at most 2 p_c (1 - p_c) * eps (first order). So each
// element may differ by that bound (eps taken per row as its largest) plus
// 2e-6; in one-hot rows that is ~0, in near-ties it is what float32 allows.
TEST_P(Numerics, SoftmaxOfLargeRandomConvValuesIsFiniteAndWithinTheConvError) {
    const int cin = 3, cout = 24, k = 3;
    const int64_t N = 2, D = 5, H = 9, W = 11, OH = H - k + 1, OW = W - k + 1, OD = D - k + 1;
    for (float scale : {2e3f, 2e4f}) {
        SCOPED_TRACE("input scale " + std::to_string(scale));
        Conv3dMinSoftmax m(cin, cout, k, 2, choice(), 3);
        Tensor in = random_tensor({N, cin, D, H, W}, 31, -scale, scale);
        Tensor out = m.forward(on_device(in));
        const HostTensor x = host_copy(in), w = host_copy(m.conv_weight()),
                         b = host_copy(m.conv_bias());
        const HostTensor ref = reference::p24(x, w, b);
        const std::vector<double> allow = p24_conv_allowance(x, w, b, ref);
        const HostTensor conv = reference::conv(x, w, b);
        double max_abs_conv = 0;
        for (double c : conv.values) max_abs_conv = std::max(max_abs_conv, std::abs(c));
        EXPECT_GT(max_abs_conv, scale / 4);  // conv values of the intended size
        const std::vector<float> v = out.to_vector();
        int64_t bad = 0;
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t p = 0; p < OH * OW; ++p) {
                double sum = 0;
                for (int64_t c = 0; c < cout; ++c) {
                    const int64_t i = (n * cout + c) * OH * OW + p;
                    ASSERT_TRUE(std::isfinite(v[i])) << index_string(ref.shape, i);
                    sum += v[i];
                    const double r = ref.values[i];
                    const double tol = allow[i] + 2e-6;
                    if (!(std::abs(v[i] - r) <= tol)) {
                        if (bad++ == 0) {
                            ADD_FAILURE() << "at " << index_string(ref.shape, i) << ": got " << v[i]
                                          << ", reference " << r << ", tolerance " << tol;
                        }
                    }
                }
                EXPECT_NEAR(sum, 1.0, 1e-5);
            }
        }
        EXPECT_EQ(bad, 0);
    }
}

// ---------------------------------------------------------------- infinities

// Plants +inf and -inf in sample 0 of `in` (N >= 2, sample 1 stays finite):
// one +inf and one -inf whose receptive fields overlap (conv outputs seeing
// both are inf - inf = NaN), and one of each far apart, in other channels.
void plant_infinities(Tensor &in) {
    const Shape &s = in.shape();
    const int64_t rank = in.dim();
    auto at = [&](int64_t c, int64_t a, int64_t bb) -> float & {
        // (0, c, [1,] a, bb): a, bb index the last two dimensions.
        int64_t off = c;
        if (rank == 5) off = off * s[2] + 1;
        off = (off * s[rank - 2] + a) * s[rank - 1] + bb;
        return in.data()[off];
    };
    const int64_t C = s[1], H = s[rank - 2], W = s[rank - 1];
    at(0, 2, 2) = kInf;
    at(C - 1, 3, 3) = -kInf;            // overlaps the +inf's windows
    at(C > 1 ? 1 : 0, H - 1, 0) = kInf;  // far corners
    at(0, 0, W - 1) = -kInf;
}

int64_t count_nan(const std::vector<float> &v) {
    return std::count_if(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}
int64_t count_nan(const HostTensor &t) {
    return std::count_if(t.values.begin(), t.values.end(), [](double x) { return std::isnan(x); });
}

// Sample n of a flattened result of `samples` samples.
std::vector<float> sample_of(const std::vector<float> &v, int64_t n, int64_t samples) {
    const size_t per_sample = v.size() / samples;
    return std::vector<float>(v.begin() + n * per_sample, v.begin() + (n + 1) * per_sample);
}

TEST_P(Numerics, InfinitiesInP25BehaveLikePyTorch) {
    Conv2dMinTanhTanh m(3, 5, 3, choice(), 41);
    Tensor in = random_tensor({2, 3, 9, 10}, 42);
    plant_infinities(in);
    const HostTensor ref = p25_reference(m, in);
    const std::vector<float> got = m.forward(on_device(in)).to_vector();
    EXPECT_TRUE(matches_values(ref.shape, got, ref, 2e-5));
    EXPECT_GT(count_nan(ref), 0);  // inf - inf happened
    // -inf reached tanh(tanh(-inf)) = tanh(-1) somewhere.
    EXPECT_GT(std::count(ref.values.begin(), ref.values.end(), std::tanh(-1.0)), 0);
}

// The Winograd form (generators/winograd.h) makes NaN every output of a tile
// whose outputs are not all finite, and the model then recomputes in the
// direct form. Every input 1e38 and every tap 1/27: each conv value is 1e38,
// finite, but the input transform's second point sums 6 of them and
// overflows, so the Winograd library alone leaves NaN that the model's
// result must not have.
TEST(WinogradFallback, TransformOverflowIsRecomputedInTheDirectForm) {
    Conv2dMinTanhTanh m(3, 5, 3, DeviceChoice::CPU, 51);
    m.set_parameters(Tensor::from_vector({5, 3, 3, 3}, std::vector<float>(135, 1.0f / 27)),
                     Tensor::from_vector({5}, std::vector<float>(5, 0.0f)));
    Tensor in = Tensor::from_vector({1, 3, 7, 13}, std::vector<float>(273, 1e38f));
    Tensor winograd_only = Tensor::empty(m.output_shape(in.shape()));
    ASSERT_EQ(fusedconv_p25_cpu(in.raw(), m.conv_weight().raw(), m.conv_bias().raw(), true,
                                winograd_only.raw()),
              0);
    EXPECT_GT(count_nan(winograd_only.to_vector()), 0);
    const HostTensor ref = p25_reference(m, in);
    EXPECT_EQ(count_nan(ref), 0);
    EXPECT_TRUE(matches(m.forward(in), ref));
}

// Only the samples whose Winograd result holds NaN are recomputed in the
// direct form, each run of consecutive ones on its own crop of the tensors:
// the model's output is, sample by sample, bit for bit either the Winograd
// form's alone or the direct form's alone. Of 5 samples, 0 holds a NaN and 2
// and 3 values up to 3e38, which overflow the Winograd transforms on either
// device; 1 and 4 keep the Winograd result. p32, whose output (unlike p25's
// tanh) shows any overflow. On the GPU, 3 input channels run the F(4x4, 3x3)
// library (on tensor cores where the GPU has them) and one more than its limit
// (kP32Winograd2DMaxInChannels) the form along x (the runtime's choice,
// runtime/src/nan_check.h), so all fall back alike.
class WinogradFallbackOnDevice : public ::testing::TestWithParam<std::tuple<DeviceChoice, int>> {
protected:
    DeviceChoice choice() const { return std::get<0>(GetParam()); }
    Device device() const { return choice() == DeviceChoice::GPU ? Device::GPU : Device::CPU; }
    int in_channels() const { return std::get<1>(GetParam()); }
    void SetUp() override {
        if (choice() == DeviceChoice::GPU && !gpu_available()) {
            GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason()
                         << "); GPU libraries not exercised";
        }
    }
};

TEST_P(WinogradFallbackOnDevice, P32RecomputesOnlyTheSamplesWhoseWinogradResultHasNaN) {
    const int cin = in_channels();
    Conv2dScaleMin m(cin, 5, 3, 1.0f, choice(), 61);
    const int64_t samples = 5, per_sample = cin * 7 * 13;
    Tensor in = random_tensor({samples, cin, 7, 13}, 62, -3.0f, 3.0f);
    in.data()[20] = kNaN;  // sample 0
    for (int64_t i = 2 * per_sample; i < 4 * per_sample; ++i) in.data()[i] *= 1e38f;
    const Tensor x = in.to(device());
    const Shape shape = m.output_shape(in.shape());
    auto gpu_fn = cin <= kP32Winograd2DMaxInChannels ? fusedconv_p32_xy_cuda : fusedconv_p32_cuda;
    auto fn = device() == Device::GPU ? gpu_fn : fusedconv_p32_cpu;
    const bool tensor_cores =
        device() == Device::GPU &&
        detail::tensor_core_form_applies(m.conv_weight(), kTensorCoreWideMaxInChannels);
    auto one_form = [&](bool winograd) {
        Tensor out = Tensor::empty(shape, device());
        const int rc = winograd && tensor_cores
                           ? fusedconv_p32_tc_cuda(x.raw(), m.conv_weight().raw(),
                                                   m.conv_bias().raw(), 1.0f, out.raw())
                           : fn(x.raw(), m.conv_weight().raw(), m.conv_bias().raw(), 1.0f,
                                winograd, out.raw());
        EXPECT_EQ(rc, 0);
        return out.to_vector();
    };
    const std::vector<float> winograd = one_form(true), direct = one_form(false);
    const std::vector<float> got = m.forward(x).to_vector();
    auto sample = [&](const std::vector<float> &v, int64_t n) { return sample_of(v, n, samples); };
    auto same_bits = [](const std::vector<float> &a, const std::vector<float> &b) {
        return std::equal(a.begin(), a.end(), b.begin(), [](float p, float q) {
            return std::memcmp(&p, &q, sizeof p) == 0 || (std::isnan(p) && std::isnan(q));
        });
    };
    for (int64_t n = 0; n < samples; ++n) {
        SCOPED_TRACE("sample " + std::to_string(n));
        const bool recomputed = n == 0 || n == 2 || n == 3;
        const std::vector<float> w = sample(winograd, n);
        EXPECT_EQ(count_nan(w) > 0, recomputed)
            << "infinities in the Winograd result: "
            << std::count_if(w.begin(), w.end(), [](float v) { return std::isinf(v); });
        EXPECT_TRUE(same_bits(sample(got, n), sample(recomputed ? direct : winograd, n)));
    }
    // The two forms round differently somewhere in the samples kept, so the
    // test tells them apart there.
    EXPECT_FALSE(same_bits(sample(winograd, 1), sample(direct, 1)) &&
                 same_bits(sample(winograd, 4), sample(direct, 4)));
    EXPECT_EQ(count_nan(sample(got, 2)) + count_nan(sample(got, 3)), 0);
    // Samples 2 and 3 are the direct form's bit for bit (above); against
    // float64 their outputs are ill-conditioned (terms near 1e37 cancel to
    // 1e33 with 17 channels and more), so the float64 check takes the others.
    for (int64_t n : {0, 1, 4}) {
        SCOPED_TRACE("sample " + std::to_string(n) + " against float64");
        const Tensor one = in.batch_range(n, n + 1);
        EXPECT_TRUE(matches(m.forward(one.to(device())), p32_reference(m, one)));
    }
}

// p83 on the GPU: a 3x3x3 kernel with at most 3 input channels takes the
// F(4x4, 3x3) library over x and y, whose input transform overflows float32
// on inputs near 1e38 (sample 1 of 3 here) where the direct conv does not
// (weights near 1e-22 keep its sums near 1e16, and GroupNorm's squares
// finite). The runtime's probe, one element a (sample, channel), must find
// that sample, and only it is recomputed in the direct form: bit for bit the
// direct library's result there, the Winograd library's elsewhere.
TEST(WinogradFallbackOnGpu, P83RecomputesOnlyTheSamplesWhoseWinogradResultHasNaN) {
    if (!gpu_available()) {
        GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason()
                     << "); p83 has no Winograd form on the CPU";
    }
    Conv3dGroupNormMinClampDropout m(3, 8, 3, 4, 10.0f, -10.0f, 0.0f, DeviceChoice::GPU, 111);
    m.set_clamp(-10.0f, 10.0f);
    m.set_training(false);
    m.set_parameters(random_tensor({8, 3, 3, 3, 3}, 112, -1e-22f, 1e-22f),
                     random_tensor({8}, 113, -1e-6f, 1e-6f), random_tensor({8}, 114, 0.5f, 2.0f),
                     random_tensor({8}, 115));
    const int64_t samples = 3, per_sample = 3 * 6 * 13 * 9;
    // Inputs near 1e20 in samples 0 and 2 (conv values near 1, transforms
    // near 1e22), near 1e38 in sample 1.
    Tensor in = random_tensor({samples, 3, 6, 13, 9}, 116);
    for (int64_t i = 0; i < samples * per_sample; ++i) {
        in.data()[i] *= i / per_sample == 1 ? 1e38f : 1e20f;
    }
    const Tensor x = in.to(Device::GPU);
    const Shape shape = m.output_shape(in.shape());
    auto one_form = [&](bool winograd) {
        Tensor out = Tensor::empty(shape, Device::GPU);
        auto fn = winograd ? fusedconv_p83_xy_cuda : fusedconv_p83_cuda;
        EXPECT_EQ(fn(x.raw(), m.conv_weight().raw(), m.conv_bias().raw(), m.norm_weight().raw(),
                     m.norm_bias().raw(), m.groups(), m.eps(), m.min_value(), m.clamp_min(),
                     m.clamp_max(), m.dropout_p(), m.training(), m.dropout_seed(), out.raw()),
                  0);
        return out.to_vector();
    };
    const std::vector<float> winograd = one_form(true), direct = one_form(false);
    const Tensor result = m.forward(x);
    const std::vector<float> got = result.to_vector();
    auto sample = [&](const std::vector<float> &v, int64_t n) { return sample_of(v, n, samples); };
    for (int64_t n = 0; n < samples; ++n) {
        SCOPED_TRACE("sample " + std::to_string(n));
        EXPECT_EQ(count_nan(sample(winograd, n)) > 0, n == 1);
        EXPECT_EQ(count_nan(sample(got, n)), 0);
        EXPECT_EQ(sample(got, n), sample(n == 1 ? direct : winograd, n));
    }
    EXPECT_TRUE(matches(result, p83_reference(m, in)));
}

// The F(4x4, 3x3) library called directly (as the tuner does) with more
// input channels than its staging holds takes its direct form, Winograd
// requested or not: correct values, no trap (its direct kernel used to keep
// the form's staging and its channel bound). The runtime itself sends such
// shapes to the form along x.
TEST(Winograd2DLibrary, P32PastItsChannelLimitTakesTheDirectForm) {
    if (!gpu_available()) {
        GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason()
                     << "); GPU library not exercised";
    }
    const int cin = int(kP32Winograd2DMaxInChannels) + 3;
    Conv2dScaleMin m(cin, 6, 3, 1.5f, DeviceChoice::GPU, 71);
    const Tensor in = random_tensor({2, cin, 11, 21}, 72);
    const HostTensor ref = p32_reference(m, in);
    const Tensor x = in.to(Device::GPU);
    for (bool winograd : {true, false}) {
        SCOPED_TRACE(winograd ? "Winograd requested" : "direct requested");
        Tensor out = Tensor::empty(m.output_shape(in.shape()), Device::GPU);
        ASSERT_EQ(fusedconv_p32_xy_cuda(x.raw(), m.conv_weight().raw(), m.conv_bias().raw(), 1.5f,
                                        winograd, out.raw()),
                  0);
        EXPECT_TRUE(matches(out, ref));
    }
}

TEST_P(Numerics, InfinitiesInP32BehaveLikePyTorchForEitherSignOfScale) {
    // scale 0: inf * 0 is NaN in PyTorch, so every position seeing an
    // infinity becomes NaN.
    for (float scale : {2.0f, -1.5f, 0.0f}) {
        SCOPED_TRACE("scale " + std::to_string(scale));
        Conv2dScaleMin m(3, 5, 3, scale, choice(), 43);
        Tensor in = random_tensor({2, 3, 9, 10}, 44);
        plant_infinities(in);
        const HostTensor ref = p32_reference(m, in);
        const std::vector<float> got = m.forward(on_device(in)).to_vector();
        EXPECT_TRUE(matches_values(ref.shape, got, ref, 2e-5));
        EXPECT_GT(count_nan(ref), 0);
        if (scale != 0.0f) {
            // The min picks an infinity of the right sign somewhere.
            EXPECT_NE(std::find(got.begin(), got.end(), -kInf), got.end());
        }
    }
}

TEST_P(Numerics, InfinitiesInP24BehaveLikePyTorch) {
    // A +inf in a softmax row makes the row NaN (exp(inf - inf)); -inf
    // entries give exactly 0. Kernels 2 and 3.
    for (int k : {2, 3}) {
        SCOPED_TRACE("kernel " + std::to_string(k));
        Conv3dMinSoftmax m(3, 6, k, 2, choice(), 45);
        Tensor in = random_tensor({2, 3, 4, 8, 9}, 46);
        plant_infinities(in);
        const HostTensor ref = p24_reference(m, in);
        const std::vector<float> got = m.forward(on_device(in)).to_vector();
        EXPECT_TRUE(matches_values(ref.shape, got, ref, 2e-5));
        // (With k 3 every row an infinity reaches is NaN here.)
        if (k == 2) EXPECT_GT(std::count(ref.values.begin(), ref.values.end(), 0.0), 0);
        // Sample 1 has no infinity: finite everywhere.
        const int64_t half = got.size() / 2;
        EXPECT_EQ(count_nan(std::vector<float>(got.begin() + half, got.end())), 0);
    }
}

TEST_P(Numerics, InfinitiesInP83MakeTheirGroupsNaN) {
    // Each infinity reaches every output channel of its sample, and GroupNorm
    // of a group holding an infinity is NaN throughout (mean inf, inf - inf):
    // all of sample 0 becomes NaN, sample 1 stays finite; in eval mode and in
    // training mode (a dropped NaN stays NaN).
    for (bool training : {false, true}) {
        SCOPED_TRACE(training ? "training" : "eval");
        Conv3dGroupNormMinClampDropout m(3, 8, 2, 4, 0.5f, -0.5f, 0.5f, choice(), 47);
        m.set_clamp(-1.0f, 0.75f);
        m.set_training(training);
        Tensor in = random_tensor({2, 3, 4, 6, 7}, 48);
        plant_infinities(in);
        const HostTensor ref = p83_reference(m, in);
        const std::vector<float> got = m.forward(on_device(in)).to_vector();
        EXPECT_TRUE(matches_values(ref.shape, got, ref, 2e-5));
        const int64_t half = got.size() / 2;
        EXPECT_EQ(count_nan(std::vector<float>(got.begin(), got.begin() + half)), half);
        EXPECT_EQ(count_nan(std::vector<float>(got.begin() + half, got.end())), 0);
    }
    // Only +inf in one group's reach is impossible (a conv mixes all input
    // channels), but an infinity confined to sample 1 leaves sample 0 alone.
    Conv3dGroupNormMinClampDropout m(2, 4, 1, 2, 10.0f, -10.0f, 0.0f, choice(), 49);
    m.set_clamp(-10.0f, 10.0f);
    Tensor in = random_tensor({2, 2, 3, 4, 5}, 50);
    in.data()[in.numel() - 1] = -kInf;
    const HostTensor ref = p83_reference(m, in);
    const std::vector<float> got = m.forward(on_device(in)).to_vector();
    EXPECT_TRUE(matches_values(ref.shape, got, ref, 2e-5));
    const int64_t half = got.size() / 2;
    EXPECT_EQ(count_nan(std::vector<float>(got.begin(), got.begin() + half)), 0);
    EXPECT_EQ(count_nan(std::vector<float>(got.begin() + half, got.end())), half);
}

INSTANTIATE_TEST_SUITE_P(Devices, Numerics,
                         ::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU), device_name);

INSTANTIATE_TEST_SUITE_P(
    DevicesAndInChannels, WinogradFallbackOnDevice,
    ::testing::Combine(::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU),
                       ::testing::Values(3, int(kP32Winograd2DMaxInChannels) + 1)),
    [](const ::testing::TestParamInfo<std::tuple<DeviceChoice, int>> &info) {
        return std::string(std::get<0>(info.param) == DeviceChoice::GPU ? "GPU" : "CPU") +
               "_Cin" + std::to_string(std::get<1>(info.param));
    });

}  // namespace
