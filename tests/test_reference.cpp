// The float64 reference on small cases worked out by hand, and the sampled
// (*_at / *_pixel) functions against the whole-tensor ones.
#include "reference.h"
#include "sampled_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using namespace fusedconv::reference;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

HostTensor tensor(std::vector<int64_t> shape, std::vector<double> values) {
    HostTensor t;
    t.shape = std::move(shape);
    t.values = std::move(values);
    EXPECT_EQ(t.numel(), static_cast<int64_t>(t.values.size()));
    return t;
}

HostTensor random_tensor(std::vector<int64_t> shape, std::mt19937 &rng, double lo = -1.0,
                         double hi = 1.0) {
    std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(hi));
    HostTensor t;
    t.shape = std::move(shape);
    t.values.resize(static_cast<size_t>(t.numel()));
    for (double &v : t.values) {
        v = dist(rng);
    }
    return t;
}

void expect_values(const HostTensor &t, const std::vector<int64_t> &shape,
                   const std::vector<double> &expected, double tol = 1e-12) {
    ASSERT_EQ(t.shape, shape);
    ASSERT_EQ(t.values.size(), expected.size());
    for (size_t i = 0; i < expected.size(); i++) {
        if (std::isnan(expected[i])) {
            EXPECT_TRUE(std::isnan(t.values[i])) << "at flat index " << i;
        } else {
            EXPECT_NEAR(t.values[i], expected[i], tol) << "at flat index " << i;
        }
    }
}

// ---------------------------------------------------------------- HostTensor

TEST(ReferenceTensor, NumelAndOffsetAreRowMajor) {
    HostTensor t = tensor({2, 3, 4}, std::vector<double>(24, 0.0));
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.offset({0, 0, 0}), 0);
    EXPECT_EQ(t.offset({0, 0, 3}), 3);
    EXPECT_EQ(t.offset({0, 2, 0}), 8);
    EXPECT_EQ(t.offset({1, 2, 3}), 23);
    t.values[t.offset({1, 0, 2})] = 7.0;
    EXPECT_EQ(t.at({1, 0, 2}), 7.0);
}

TEST(ReferenceTensor, OffsetRejectsWrongRankAndOutOfBounds) {
    HostTensor t = tensor({2, 3}, std::vector<double>(6, 0.0));
    EXPECT_THROW(t.offset({1}), std::out_of_range);
    EXPECT_THROW(t.offset({1, 1, 0}), std::out_of_range);
    EXPECT_THROW(t.offset({2, 0}), std::out_of_range);
    EXPECT_THROW(t.offset({0, 3}), std::out_of_range);
    EXPECT_THROW(t.offset({-1, 0}), std::out_of_range);
    EXPECT_THROW(t.at({0, -1}), std::out_of_range);
}

TEST(ReferenceTensor, FromFloatCopiesValuesAndShape) {
    const float data[6] = {1.5f, -2.0f, 0.1f, 3.0f, -0.0f, 1e30f};
    HostTensor t = from_float({3, 2}, data);
    ASSERT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
    ASSERT_EQ(t.values.size(), 6u);
    for (int i = 0; i < 6; i++) {
        EXPECT_EQ(t.values[i], static_cast<double>(data[i]));
    }
}

// ---------------------------------------------------------------- scalar ops

TEST(ReferenceScalar, NanMinMaxPropagateNaN) {
    EXPECT_EQ(nan_min(1.0, 2.0), 1.0);
    EXPECT_EQ(nan_min(2.0, -1.0), -1.0);
    EXPECT_EQ(nan_max(1.0, 2.0), 2.0);
    EXPECT_EQ(nan_max(2.0, -1.0), 2.0);
    EXPECT_TRUE(std::isnan(nan_min(kNaN, 1.0)));
    EXPECT_TRUE(std::isnan(nan_min(1.0, kNaN)));
    EXPECT_TRUE(std::isnan(nan_max(kNaN, 1.0)));
    EXPECT_TRUE(std::isnan(nan_max(1.0, kNaN)));
    EXPECT_TRUE(std::isnan(nan_min(std::numeric_limits<double>::infinity(), kNaN)));
}

TEST(ReferenceScalar, TorchClampBasicsNaNAndLoAboveHiGivesHi) {
    EXPECT_EQ(torch_clamp(0.5, 0.0, 1.0), 0.5);
    EXPECT_EQ(torch_clamp(-3.0, 0.0, 1.0), 0.0);
    EXPECT_EQ(torch_clamp(3.0, 0.0, 1.0), 1.0);
    // lo > hi: every value becomes hi (PyTorch's min(max(v, lo), hi)).
    EXPECT_EQ(torch_clamp(0.5, 2.0, 1.0), 1.0);
    EXPECT_EQ(torch_clamp(5.0, 2.0, 1.0), 1.0);
    EXPECT_EQ(torch_clamp(-5.0, 2.0, 1.0), 1.0);
    EXPECT_TRUE(std::isnan(torch_clamp(kNaN, 0.0, 1.0)));
    EXPECT_TRUE(std::isnan(torch_clamp(kNaN, 2.0, 1.0)));
    EXPECT_TRUE(std::isnan(torch_clamp(0.5, kNaN, 1.0)));
    EXPECT_TRUE(std::isnan(torch_clamp(0.5, 0.0, kNaN)));
}

// ---------------------------------------------------------------- conv

TEST(ReferenceConv, Conv1x1IsPerPixelChannelMix) {
    // input (1, 2, 2, 2): channel 0 = 1..4, channel 1 = 10, 20, 30, 40.
    HostTensor in = tensor({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
    // weight (3, 2, 1, 1), bias (3).
    HostTensor w = tensor({3, 2, 1, 1}, {1, 0, 0.5, 0.1, -1, 2});
    HostTensor b = tensor({3}, {0, 1, -1});
    // co 0: x0; co 1: 0.5*x0 + 0.1*x1 + 1; co 2: -x0 + 2*x1 - 1.
    expect_values(conv(in, w, b), {1, 3, 2, 2},
                  {1, 2, 3, 4,                     //
                   1.5 + 1, 3 + 1, 4.5 + 1, 6 + 1,  //
                   18, 37, 56, 75});
}

TEST(ReferenceConv, Conv2x2On3x3ByHand) {
    // input 1..9 in a 3x3 grid, kernel [[1, 2], [3, 4]], bias 0.5:
    // (0,0): 1*1 + 2*2 + 3*4 + 4*5 = 37;  (0,1): 2 + 6 + 15 + 24 = 47;
    // (1,0): 4 + 10 + 21 + 32 = 67;      (1,1): 5 + 12 + 24 + 36 = 77.
    HostTensor in = tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    HostTensor w = tensor({1, 1, 2, 2}, {1, 2, 3, 4});
    HostTensor b = tensor({1}, {0.5});
    expect_values(conv(in, w, b), {1, 1, 2, 2}, {37.5, 47.5, 67.5, 77.5});
    EXPECT_EQ(conv_at(in, w, b, 0, 0, {1, 0}), 67.5);
}

TEST(ReferenceConv, Conv2dTwoInputChannelsBatchTwoNonSquareKernel) {
    // input (2, 2, 2, 3); kernel (1, 2, 1, 2): taps [1, -1] on ci 0 and [2, 0] on ci 1.
    HostTensor in = tensor({2, 2, 2, 3}, {1, 2, 4, 8, 16, 32,       // n0 ci0
                                          1, 1, 1, 2, 2, 2,         // n0 ci1
                                          0, 0, 0, 0, 0, 0,         // n1 ci0
                                          3, 5, 7, 9, 11, 13});     // n1 ci1
    HostTensor w = tensor({1, 2, 1, 2}, {1, -1, 2, 0});
    HostTensor b = tensor({1}, {-1});
    // out (2, 1, 2, 2): (x[i] - x[i+1]) of ci0 + 2 * ci1[i] - 1.
    expect_values(conv(in, w, b), {2, 1, 2, 2},
                  {-1 + 2 - 1, -2 + 2 - 1, -8 + 4 - 1, -16 + 4 - 1,  //
                   6 - 1, 10 - 1, 18 - 1, 22 - 1});
}

TEST(ReferenceConv, Conv3dByHand) {
    // input (1, 1, 2, 2, 2) = 1..8; all-ones 2x2x2 kernel: 36 + bias 1.
    HostTensor in = tensor({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    HostTensor ones = tensor({1, 1, 2, 2, 2}, std::vector<double>(8, 1.0));
    expect_values(conv(in, ones, tensor({1}, {1})), {1, 1, 1, 1, 1}, {37});
    // A depth-only kernel (2, 1, 1) of [1, -1]: front minus back = -4 everywhere;
    // a second output channel with [0, 1] and bias 2: back + 2.
    HostTensor wd = tensor({2, 1, 2, 1, 1}, {1, -1, 0, 1});
    expect_values(conv(in, wd, tensor({2}, {0, 2})), {1, 2, 1, 2, 2},
                  {-4, -4, -4, -4, 7, 8, 9, 10});
    EXPECT_EQ(conv_at(in, wd, tensor({2}, {0, 2}), 0, 1, {0, 1, 0}), 9);
}

TEST(ReferenceConv, Conv3dNonCubicKernelShape) {
    std::mt19937 rng(7);
    HostTensor in = random_tensor({2, 3, 4, 5, 6}, rng);
    HostTensor w = random_tensor({4, 3, 2, 3, 1}, rng);
    HostTensor b = random_tensor({4}, rng);
    HostTensor out = conv(in, w, b);
    ASSERT_EQ(out.shape, (std::vector<int64_t>{2, 4, 3, 3, 6}));
    // One position summed out explicitly.
    double sum = b.values[2];
    for (int64_t ci = 0; ci < 3; ci++)
        for (int64_t kz = 0; kz < 2; kz++)
            for (int64_t ky = 0; ky < 3; ky++)
                sum += w.at({2, ci, kz, ky, 0}) * in.at({1, ci, 1 + kz, 2 + ky, 5});
    EXPECT_NEAR(out.at({1, 2, 1, 2, 5}), sum, 1e-12);
}

TEST(ReferenceConv, ConvRejectsBadShapes) {
    HostTensor in = tensor({1, 2, 3, 3}, std::vector<double>(18, 1.0));
    HostTensor b = tensor({1}, {0});
    EXPECT_THROW(conv(in, tensor({1, 3, 1, 1}, {1, 1, 1}), b), std::invalid_argument);
    EXPECT_THROW(conv(in, tensor({1, 2, 4, 1}, std::vector<double>(8, 1.0)), b),
                 std::invalid_argument);
    EXPECT_THROW(conv(in, tensor({1, 2, 1, 1}, {1, 1}), tensor({2}, {0, 0})),
                 std::invalid_argument);
    EXPECT_THROW(conv_at(in, tensor({1, 2, 2, 2}, std::vector<double>(8, 1.0)), b, 0, 0, {2, 0}),
                 std::out_of_range);
}

TEST(ReferenceConv, NaNInputPoisonsExactlyItsReceptiveField) {
    HostTensor in = tensor({1, 1, 4, 4}, std::vector<double>(16, 1.0));
    in.values[in.offset({0, 0, 1, 2})] = kNaN;
    HostTensor w = tensor({1, 1, 2, 2}, {1, 0, 0, 0});  // zero weights still give NaN*0 = NaN
    HostTensor out = conv(in, w, tensor({1}, {0}));
    for (int64_t y = 0; y < 3; y++) {
        for (int64_t x = 0; x < 3; x++) {
            const bool hit = (y == 0 || y == 1) && (x == 1 || x == 2);
            EXPECT_EQ(std::isnan(out.at({0, 0, y, x})), hit) << "y=" << y << " x=" << x;
        }
    }
}

// ---------------------------------------------------------------- reductions

TEST(ReferenceReduce, MinOverDepthRemovesDepth) {
    // (1, 2, 3, 1, 2)
    HostTensor t = tensor({1, 2, 3, 1, 2}, {5, -1, 2, 7, 3, 0,  //
                                            1, 1, -2, 4, 9, -8});
    expect_values(min_over_depth(t), {1, 2, 1, 2}, {2, -1, -2, -8});
}

TEST(ReferenceReduce, MinOverDepthPropagatesNaNOnlyToItsColumn) {
    HostTensor t = tensor({1, 2, 3, 1, 2}, {5, -1, 2, 7, 3, 0,  //
                                            1, 1, -2, 4, 9, -8});
    t.values[t.offset({0, 1, 1, 0, 0})] = kNaN;
    expect_values(min_over_depth(t), {1, 2, 1, 2}, {2, -1, kNaN, -8});
}

TEST(ReferenceReduce, MinOverChannelsKeepsDim) {
    // (2, 3, 1, 2)
    HostTensor t = tensor({2, 3, 1, 2}, {1, 2, -3, 4, 5, -6,  //
                                         0, 0, 1, -1, kNaN, 2});
    expect_values(min_over_channels(t), {2, 1, 1, 2}, {-3, -6, kNaN, -1});
}

TEST(ReferenceReduce, SoftmaxChannelsKnownValues) {
    // One pixel, channels log(1), log(2), log(3): 1/6, 2/6, 3/6.
    HostTensor t = tensor({1, 3, 1, 1}, {0.0, std::log(2.0), std::log(3.0)});
    expect_values(softmax_channels(t), {1, 3, 1, 1}, {1.0 / 6, 2.0 / 6, 3.0 / 6});
}

TEST(ReferenceReduce, SoftmaxLargeValuesStayFinite) {
    // Two pixels: (1000, 1000) -> (0.5, 0.5); (1000, 0) -> (1, exp(-1000) = 0).
    HostTensor t = tensor({1, 2, 1, 2}, {1000, 1000, 1000, 0});
    expect_values(softmax_channels(t), {1, 2, 1, 2}, {0.5, 1.0, 0.5, 0.0});
    HostTensor neg = tensor({1, 4, 1, 1}, {-1000, -1000, -1000, -1000});
    expect_values(softmax_channels(neg), {1, 4, 1, 1}, {0.25, 0.25, 0.25, 0.25});
}

TEST(ReferenceReduce, SoftmaxNaNMakesOnlyItsRowNaN) {
    HostTensor t = tensor({1, 3, 1, 2}, {1, 0, kNaN, 0, 3, 0});
    expect_values(softmax_channels(t), {1, 3, 1, 2}, {kNaN, 1.0 / 3, kNaN, 1.0 / 3, kNaN, 1.0 / 3});
}

TEST(ReferenceReduce, GroupNormKnownValues) {
    // (1, 2, 1, 1, 2), channel 0 = (1, 2), channel 1 = (3, 4).
    HostTensor t = tensor({1, 2, 1, 1, 2}, {1, 2, 3, 4});
    HostTensor gamma = tensor({2}, {2, 3});
    HostTensor beta = tensor({2}, {10, 20});
    // Two groups, eps 0: each channel normalizes to (-1, 1).
    expect_values(group_norm(t, 2, gamma, beta, 0.0), {1, 2, 1, 1, 2}, {8, 12, 17, 23});
    // One group: mean 2.5, var (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, eps 0.75 -> std sqrt(2).
    const double s = std::sqrt(2.0);
    expect_values(group_norm(t, 1, tensor({2}, {1, 1}), tensor({2}, {0, 0}), 0.75),
                  {1, 2, 1, 1, 2}, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
}

TEST(ReferenceReduce, GroupNormLargeOffsetIsExact) {
    // Same data shifted by 1e4: float64 two-pass gives the same answer.
    HostTensor t = tensor({1, 2, 1, 1, 2}, {1e4 + 1, 1e4 + 2, 1e4 + 3, 1e4 + 4});
    const double s = std::sqrt(1.25);
    expect_values(group_norm(t, 1, tensor({2}, {1, 1}), tensor({2}, {0, 0}), 0.0),
                  {1, 2, 1, 1, 2}, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}, 1e-9);
}

TEST(ReferenceReduce, GroupNormNaNPoisonsOnlyItsGroup) {
    // (2, 4, 1, 1, 2) with 2 groups; NaN in sample 0, channel 1 (group 0).
    std::mt19937 rng(3);
    HostTensor t = random_tensor({2, 4, 1, 1, 2}, rng);
    t.values[t.offset({0, 1, 0, 0, 1})] = kNaN;
    HostTensor y = group_norm(t, 2, tensor({4}, {1, 1, 1, 1}), tensor({4}, {0, 0, 0, 0}), 1e-5);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 4; c++)
            for (int64_t x = 0; x < 2; x++)
                EXPECT_EQ(std::isnan(y.at({n, c, 0, 0, x})), n == 0 && c < 2)
                    << "n=" << n << " c=" << c << " x=" << x;
}

TEST(ReferenceReduce, GroupNormRejectsGroupsNotDividingChannels) {
    HostTensor t = tensor({1, 3, 1, 1, 1}, {1, 2, 3});
    HostTensor g = tensor({3}, {1, 1, 1});
    EXPECT_THROW(group_norm(t, 2, g, g, 1e-5), std::invalid_argument);
}

// ---------------------------------------------------------------- dropout

TEST(ReferenceDropout, Uniform01IsA24BitHashInUnitInterval) {
    // seed ^ 0x9e3779b9 == 0 and index 0: hash32(0 + hash32(0)) = hash32(0) = 0.
    EXPECT_EQ(uniform01(0x9e3779b9u, 0), 0.0);
    double sum = 0.0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        const double u = uniform01(1234u, static_cast<uint32_t>(i));
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        ASSERT_EQ(u * 16777216.0, std::floor(u * 16777216.0));  // a multiple of 2^-24
        EXPECT_EQ(u, uniform01(1234u, static_cast<uint32_t>(i)));
        sum += u;
    }
    // Mean 0.5, standard deviation of the mean sqrt(1/12/n) ~ 0.0009.
    EXPECT_NEAR(sum / n, 0.5, 0.005);
    int same = 0;
    for (int i = 0; i < 1000; i++) {
        same += uniform01(1u, i) == uniform01(2u, i);
    }
    EXPECT_LT(same, 5);
}

TEST(ReferenceDropout, ZeroProbabilityIsIdentity) {
    for (double v : {0.25, -1.5, 3.0e5, 0.0}) {
        for (uint32_t i = 0; i < 100; i++) {
            EXPECT_EQ(dropout(v, i, 42u, 0.0, true), v);
        }
    }
    EXPECT_TRUE(std::isnan(dropout(kNaN, 3, 42u, 0.0, true)));
}

TEST(ReferenceDropout, ProbabilityOneZeroesEverythingButNaNStaysNaN) {
    for (uint32_t i = 0; i < 1000; i++) {
        EXPECT_EQ(dropout(0.75, i, 9u, 1.0, true), 0.0);
        EXPECT_EQ(dropout(-2.0, i, 9u, 1.0, true), 0.0);
        EXPECT_TRUE(std::isnan(dropout(kNaN, i, 9u, 1.0, true)));
    }
}

TEST(ReferenceDropout, EvalModeIsIdentity) {
    for (double p : {0.0, 0.2, 0.5, 1.0}) {
        for (uint32_t i = 0; i < 100; i++) {
            EXPECT_EQ(dropout(0.123456789, i, 5u, p, false), 0.123456789);
        }
    }
    EXPECT_TRUE(std::isnan(dropout(kNaN, 0, 5u, 1.0, false)));
}

TEST(ReferenceDropout, HalfProbabilityKeepsAboutHalfScaledByTwo) {
    const int n = 100000;
    int dropped = 0;
    for (int i = 0; i < n; i++) {
        const double d = dropout(0.3, static_cast<uint32_t>(i), 77u, 0.5, true);
        const bool keep = uniform01(77u, static_cast<uint32_t>(i)) >= 0.5;
        if (keep) {
            EXPECT_EQ(d, static_cast<double>(0.3f / 0.5f));
        } else {
            EXPECT_EQ(d, 0.0);
            dropped++;
        }
    }
    // sd of the fraction: sqrt(0.25 / n) ~ 0.0016; allow 5 sd.
    EXPECT_NEAR(static_cast<double>(dropped) / n, 0.5, 0.008);
}

TEST(ReferenceDropout, SurvivorIsFloat32Division) {
    // p = 0.2: the survivor is float(v) / (1.0f - 0.2f), not v / 0.8 in double.
    uint32_t i = 0;
    while (uniform01(11u, i) < 0.2f) {
        i++;
    }
    const double v = 0.7;
    EXPECT_EQ(dropout(v, i, 11u, 0.2, true), static_cast<double>(0.7f / (1.0f - 0.2f)));
}

// ---------------------------------------------------------------- models

TEST(ReferenceModels, P32NegativeScaleTakesMaximumOfConv) {
    std::mt19937 rng(5);
    HostTensor in = random_tensor({1, 2, 4, 3}, rng);
    HostTensor w = random_tensor({3, 2, 2, 2}, rng);
    HostTensor b = random_tensor({3}, rng);
    HostTensor c = conv(in, w, b);
    HostTensor out = p32(in, w, b, -2.0);
    ASSERT_EQ(out.shape, (std::vector<int64_t>{1, 1, 3, 2}));
    for (int64_t y = 0; y < 3; y++) {
        for (int64_t x = 0; x < 2; x++) {
            double mx = -1e300;
            for (int64_t co = 0; co < 3; co++) mx = std::max(mx, c.at({0, co, y, x}));
            EXPECT_DOUBLE_EQ(out.at({0, 0, y, x}), -2.0 * mx);
        }
    }
}

TEST(ReferenceModels, P25IsTanhTanhOfChannelMin) {
    HostTensor in = tensor({1, 1, 1, 2}, {0.5, -3.0});
    HostTensor w = tensor({2, 1, 1, 1}, {1.0, 2.0});
    HostTensor b = tensor({2}, {0.0, 0.25});
    // channel values: (0.5, -3) and (1.25, -5.75); min: 0.5, -5.75.
    expect_values(p25(in, w, b), {1, 1, 1, 2},
                  {std::tanh(std::tanh(0.5)), std::tanh(std::tanh(-5.75))});
}

TEST(ReferenceModels, P83DefaultParametersGiveZeroAndLoAboveHiGivesHi) {
    std::mt19937 rng(8);
    HostTensor in = random_tensor({1, 3, 4, 5, 5}, rng, 0.0, 1.0);
    HostTensor w = random_tensor({4, 3, 3, 3, 3}, rng, -0.2, 0.2);
    HostTensor b = random_tensor({4}, rng, -0.2, 0.2);
    HostTensor gamma = tensor({4}, {1, 1, 1, 1});
    HostTensor beta = tensor({4}, {0, 0, 0, 0});
    P83Args args{2, 1e-5, 0.0, 0.0, 1.0, 0.2, true, 1u};
    HostTensor out = p83(in, w, b, gamma, beta, args);
    ASSERT_EQ(out.shape, (std::vector<int64_t>{1, 4, 2, 3, 3}));
    for (double v : out.values) EXPECT_EQ(v, 0.0);
    // lo > hi: clamp gives hi everywhere; eval mode keeps it.
    args.clamp_lo = 0.5;
    args.clamp_hi = -0.25;
    args.min_value = 10.0;
    args.training = false;
    for (double v : p83(in, w, b, gamma, beta, args).values) EXPECT_EQ(v, -0.25);
}

TEST(ReferenceModels, SampledFunctionsAgreeWithWholeTensors) {
    std::mt19937 rng(2024);
    // 3D: p24 and p83.
    HostTensor in3 = random_tensor({2, 3, 5, 6, 7}, rng);
    HostTensor w3 = random_tensor({6, 3, 3, 2, 3}, rng);
    HostTensor b3 = random_tensor({6}, rng);
    HostTensor c3 = conv(in3, w3, b3);
    for (int64_t i = 0; i < c3.numel(); i += 7) {
        int64_t r = i;
        std::vector<int64_t> idx(5);
        for (int d = 4; d >= 0; d--) {
            idx[d] = r % c3.shape[d];
            r /= c3.shape[d];
        }
        EXPECT_NEAR(conv_at(in3, w3, b3, idx[0], idx[1], {idx[2], idx[3], idx[4]}), c3.values[i],
                    1e-12);
    }
    HostTensor s24 = p24(in3, w3, b3);
    ASSERT_EQ(s24.shape, (std::vector<int64_t>{2, 6, 5, 5}));
    for (int64_t n = 0; n < 2; n++)
        for (int64_t y = 0; y < 5; y++)
            for (int64_t x = 0; x < 5; x++) {
                std::vector<double> px = p24_pixel(in3, w3, b3, n, y, x);
                ASSERT_EQ(px.size(), 6u);
                for (int64_t c = 0; c < 6; c++) EXPECT_NEAR(px[c], s24.at({n, c, y, x}), 1e-12);
            }

    HostTensor gamma = random_tensor({6}, rng, 0.5, 2.0);
    HostTensor beta = random_tensor({6}, rng);
    P83Args args{3, 1e-5, 0.5, -0.5, 0.3, 0.3, true, 99u};
    HostTensor s83 = p83(in3, w3, b3, gamma, beta, args);
    HostTensor gn = group_norm(c3, 3, gamma, beta, 1e-5);
    int zeros = 0, clamped = 0;
    for (int64_t n = 0; n < 2; n++)
        for (int64_t g = 0; g < 3; g++) {
            GroupStats st = p83_group_stats(in3, w3, b3, 3, n, g);
            for (int64_t c = 2 * g; c < 2 * g + 2; c++)
                for (int64_t z = 0; z < 3; z++)
                    for (int64_t y = 0; y < 5; y++)
                        for (int64_t x = 0; x < 5; x++) {
                            const double v = p83_at(in3, w3, b3, gamma, beta, args, st, n, c, z,
                                                    y, x);
                            EXPECT_NEAR(v, s83.at({n, c, z, y, x}), 1e-12);
                            zeros += v == 0.0;
                            clamped += std::fabs(gn.at({n, c, z, y, x})) > 0.5;
                        }
        }
    // The parameters exercise every branch: some dropped, some clamped.
    EXPECT_GT(zeros, 0);
    EXPECT_GT(clamped, 0);

    // 2D: p32 (both signs of scale) and p25.
    HostTensor in2 = random_tensor({2, 4, 7, 5}, rng);
    HostTensor w2 = random_tensor({5, 4, 3, 2}, rng);
    HostTensor b2 = random_tensor({5}, rng);
    for (double scale : {2.0, -1.5}) {
        HostTensor s32 = p32(in2, w2, b2, scale);
        ASSERT_EQ(s32.shape, (std::vector<int64_t>{2, 1, 5, 4}));
        for (int64_t n = 0; n < 2; n++)
            for (int64_t y = 0; y < 5; y++)
                for (int64_t x = 0; x < 4; x++)
                    EXPECT_NEAR(p32_at(in2, w2, b2, scale, n, y, x), s32.at({n, 0, y, x}), 1e-12);
    }
    HostTensor s25 = p25(in2, w2, b2);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t y = 0; y < 5; y++)
            for (int64_t x = 0; x < 4; x++)
                EXPECT_NEAR(p25_at(in2, w2, b2, n, y, x), s25.at({n, 0, y, x}), 1e-12);
}

TEST(ReferenceModels, GroupStatsMatchTwoPassOverTheGroup) {
    std::mt19937 rng(11);
    HostTensor in = random_tensor({2, 2, 4, 4, 4}, rng);
    HostTensor w = random_tensor({4, 2, 2, 2, 2}, rng);
    HostTensor b = random_tensor({4}, rng);
    HostTensor c = conv(in, w, b);  // (2, 4, 3, 3, 3)
    GroupStats st = p83_group_stats(in, w, b, 2, 1, 1);
    double sum = 0, sq = 0;
    int count = 0;
    for (int64_t ch = 2; ch < 4; ch++)
        for (int64_t i = 0; i < 27; i++) {
            sum += c.values[c.offset({1, ch, 0, 0, 0}) + i];
            count++;
        }
    const double mean = sum / count;
    for (int64_t ch = 2; ch < 4; ch++)
        for (int64_t i = 0; i < 27; i++) {
            const double d = c.values[c.offset({1, ch, 0, 0, 0}) + i] - mean;
            sq += d * d;
        }
    EXPECT_NEAR(st.mean, mean, 1e-12);
    EXPECT_NEAR(st.var, sq / count, 1e-12);
    EXPECT_THROW(p83_group_stats(in, w, b, 2, 0, 2), std::out_of_range);
    EXPECT_THROW(p83_group_stats(in, w, b, 3, 0, 0), std::invalid_argument);
}

}  // namespace

// ------------------------------------------------------- sampled checks

namespace sampled {

using namespace fusedconv::reference;

std::vector<float> as_floats(const HostTensor &t) {
    return std::vector<float>(t.values.begin(), t.values.end());
}

// With samples at least the number of positions, every position is checked
// once, so one wrong value anywhere is found; fewer samples check that many.
TEST(SampledCheck, EnoughSamplesCheckEveryPositionOnce) {
    std::mt19937 rng(31);
    HostTensor in = random_tensor({2, 3, 6, 7}, rng), w = random_tensor({4, 3, 3, 3}, rng),
               b = random_tensor({4}, rng);
    const std::vector<int64_t> s = {2, 1, 4, 5};  // 40 positions
    std::vector<float> out = as_floats(p25(in, w, b));
    SampleReport all = check_p25(in, w, b, out.data(), s, 1000000, 7);
    EXPECT_EQ(all.checked, 40);
    EXPECT_LT(all.max_abs_err, 1e-6);
    EXPECT_EQ(check_p25(in, w, b, out.data(), s, 40, 7).checked, 40);
    EXPECT_EQ(check_p25(in, w, b, out.data(), s, 39, 7).checked, 39);
    for (size_t bad = 0; bad < out.size(); ++bad) {
        std::vector<float> wrong = out;
        wrong[bad] += 0.5f;
        EXPECT_NEAR(check_p25(in, w, b, wrong.data(), s, 40, 7).max_abs_err, 0.5, 1e-6)
            << "position " << bad;
    }
    // p32 shares the (n, y, x) walk.
    std::vector<float> out32 = as_floats(p32(in, w, b, -1.5));
    EXPECT_EQ(check_p32(in, w, b, -1.5, out32.data(), s, 100, 1).checked, 40);
    EXPECT_LT(check_p32(in, w, b, -1.5, out32.data(), s, 100, 1).max_abs_err, 1e-6);
}

TEST(SampledCheck, P24AndP83CountWhatTheyCheck) {
    std::mt19937 rng(32);
    HostTensor in = random_tensor({3, 2, 4, 5, 6}, rng), w = random_tensor({4, 2, 3, 3, 3}, rng),
               b = random_tensor({4}, rng);
    std::vector<float> out24 = as_floats(p24(in, w, b));
    const std::vector<int64_t> s24 = {3, 4, 3, 4};  // 36 pixels
    SampleReport r24 = check_p24(in, w, b, out24.data(), s24, 500, 3);
    EXPECT_EQ(r24.checked, 36);
    EXPECT_LT(r24.max_row_sum_dev, 1e-6);
    out24.back() += 0.25f;
    EXPECT_NEAR(check_p24(in, w, b, out24.data(), s24, 500, 3).max_abs_err, 0.25, 1e-6);

    HostTensor gamma = tensor({4}, {1, 1, 1, 1}), beta = tensor({4}, {0, 0, 0, 0});
    P83Args args{2, 1e-5, 10.0, -10.0, 10.0, 0.0, false, 1u};
    std::vector<float> out83 = as_floats(p83(in, w, b, gamma, beta, args));
    const std::vector<int64_t> s83 = {3, 4, 2, 3, 4};  // the first 2 samples: 192 positions
    EXPECT_EQ(check_p83(in, w, b, gamma, beta, args, out83.data(), s83, 1000, 5).checked, 192);
    EXPECT_EQ(check_p83(in, w, b, gamma, beta, args, out83.data(), s83, 50, 5).checked, 50);
    out83[191] += 0.125f;  // the last position the check covers
    EXPECT_NEAR(check_p83(in, w, b, gamma, beta, args, out83.data(), s83, 1000, 5).max_abs_err,
                0.125, 1e-6);
}

}  // namespace sampled
