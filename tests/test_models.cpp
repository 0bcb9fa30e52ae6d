// The four models through the runtime against the float64 reference: on the
// CPU libraries always, on the GPU libraries when a CUDA device is present
// (skipped with a message otherwise). Shapes are small and odd on purpose.
#include "test_util.h"

#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;  // random_tensor, host, matches, OnDevice, device_name
using reference::HostTensor;

// ---------------------------------------------------------------- p24

struct P24Case {
    Shape input;  // (N, Cin, D, H, W)
    int cout, k;
};

class P24 : public OnDevice {};

TEST_P(P24, MatchesReferenceOnOddShapes) {
    const P24Case cases[] = {
        {{1, 3, 5, 7, 9}, 24, 3},  {{3, 1, 4, 6, 5}, 5, 2},   {{1, 5, 6, 6, 11}, 1, 1},
        {{2, 2, 7, 9, 8}, 5, 5},   {{1, 3, 3, 3, 3}, 24, 3},  {{3, 3, 8, 19, 21}, 24, 3},
        // More output channels than the GPU schedule's channel tile (24):
        // a block walks a second, partial (29) or a third (50) tile.
        {{2, 3, 5, 8, 13}, 29, 3}, {{1, 2, 4, 12, 11}, 50, 2},
        // The GPU schedule's unclamped fast path (3x3 taps, a conv of at
        // least one 10 x 4 tile, the edge tiles shifted inwards): exactly one
        // tile, and one column or one row short of it (the clamped path).
        {{1, 3, 4, 6, 12}, 24, 3}, {{2, 3, 4, 6, 11}, 24, 3}, {{1, 3, 4, 5, 12}, 24, 3},
        // On sm_90 the wgmma form (3x3x3, Cin <= 3, Cout <= 24, an output of 2 rows or more; its
        // blocks are 32 columns of a pair of rows): fewer input channels than its specialized 3,
        // fewer output channels than its 24, odd output heights (the last pair shifted up),
        // widths of several blocks with a partial last one, and one output row (the SIMT kernel).
        {{2, 2, 5, 6, 7}, 7, 3}, {{1, 1, 4, 9, 5}, 24, 3}, {{2, 3, 4, 11, 13}, 17, 3},
        {{1, 3, 4, 8, 70}, 24, 3}, {{2, 3, 3, 5, 37}, 11, 3}, {{1, 3, 4, 3, 40}, 24, 3},
    };
    uint64_t seed = 1;
    for (const P24Case &c : cases) {
        SCOPED_TRACE("input " + shape_string(c.input) + " cout " + std::to_string(c.cout) +
                     " k " + std::to_string(c.k));
        Conv3dMinSoftmax m(c.input[1], c.cout, c.k, 2, choice(), seed++);
        Tensor in = random_tensor(c.input, seed++);
        Tensor out = m.forward(on_device(in));
        EXPECT_EQ(out.device(), device());
        EXPECT_TRUE(matches(out, p24_reference(m, in)));
    }
}

TEST_P(P24, NanPropagatesLikePyTorch) {
    Conv3dMinSoftmax m(2, 5, 3, 2, choice(), 7);
    Tensor in = random_tensor({2, 2, 6, 7, 8}, 8);
    in.data()[3 * 7 * 8 + 2 * 8 + 5] = kNaN;  // n 0, c 0, z 3, y 2, x 5
    Tensor out = m.forward(on_device(in));
    HostTensor ref = p24_reference(m, in);
    EXPECT_TRUE(std::isnan(ref.at({0, 0, 1, 4})));
    EXPECT_TRUE(matches(out, ref));
}

// NaN in the last input column and row of a shape on the GPU's fast path,
// whose last tiles shift inwards over their neighbours: the outputs that read
// it are NaN, the others not.
TEST_P(P24, NanAtTheEdgeOfShiftedTiles) {
    Conv3dMinSoftmax m(3, 24, 3, 2, choice(), 21);
    Tensor in = random_tensor({2, 3, 5, 9, 23}, 22);
    in.data()[((1 * 3 + 2) * 5 + 4) * 9 * 23 + 8 * 23 + 22] = kNaN;  // n 1, c 2, z 4, y 8, x 22
    Tensor out = m.forward(on_device(in));
    HostTensor ref = p24_reference(m, in);
    EXPECT_TRUE(std::isnan(ref.at({1, 0, 6, 20})));
    EXPECT_FALSE(std::isnan(ref.at({1, 0, 6, 19})));
    EXPECT_TRUE(matches(out, ref));
}

TEST_P(P24, RowsSumToOneAndLargeValuesStayFinite) {
    Conv3dMinSoftmax m(3, 24, 3, 2, choice(), 9);
    // Large inputs give conv values in the hundreds: exp must not overflow.
    Tensor in = random_tensor({1, 3, 5, 6, 7}, 10, 200.0f, 400.0f);
    Tensor out = m.forward(on_device(in));
    std::vector<float> v = out.to_vector();
    for (int64_t p = 0; p < 4 * 5; ++p) {
        double sum = 0;
        for (int c = 0; c < 24; ++c) {
            ASSERT_TRUE(std::isfinite(v[c * 20 + p]));
            sum += v[c * 20 + p];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
    }
    EXPECT_TRUE(matches(out, p24_reference(m, in)));
}

TEST_P(P24, ParametersFromPyTorchLayoutAreUsed) {
    Conv3dMinSoftmax m(2, 3, 2, 2, choice(), 11);
    Tensor w = random_tensor({3, 2, 2, 2, 2}, 12), b = random_tensor({3}, 13);
    m.set_parameters(w, b);
    Tensor in = random_tensor({1, 2, 4, 5, 6}, 14);
    EXPECT_TRUE(matches(m.forward(on_device(in)),
                        reference::p24(host_copy(in), host_copy(w), host_copy(b))));
}

INSTANTIATE_TEST_SUITE_P(Devices, P24, ::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU),
                         device_name);

// ---------------------------------------------------------------- p25 / p32

struct Conv2dCase {
    Shape input;  // (N, Cin, H, W)
    int cout, k;
};

const Conv2dCase kConv2dCases[] = {
    {{1, 3, 7, 9}, 24, 3},  {{3, 1, 6, 5}, 5, 2},     {{1, 5, 6, 11}, 1, 1},
    {{2, 2, 9, 8}, 5, 5},   {{3, 4, 37, 45}, 24, 3},  {{1, 16, 3, 3}, 5, 3},
    // 17 input channels: on the GPU the Winograd form along x (16 or fewer
    // take F(4x4, 3x3); runtime/src/nan_check.h).
    {{2, 17, 10, 9}, 6, 3},
};

class P32 : public OnDevice {};

TEST_P(P32, MatchesReferenceOnOddShapesAndSigns) {
    uint64_t seed = 100;
    for (float scale : {2.0f, -1.5f, 0.0f}) {
        for (const Conv2dCase &c : kConv2dCases) {
            SCOPED_TRACE("input " + shape_string(c.input) + " cout " + std::to_string(c.cout) +
                         " k " + std::to_string(c.k) + " scale " + std::to_string(scale));
            Conv2dScaleMin m(c.input[1], c.cout, c.k, scale, choice(), seed++);
            Tensor in = random_tensor(c.input, seed++);
            EXPECT_TRUE(matches(m.forward(on_device(in)), p32_reference(m, in)));
        }
    }
}

TEST_P(P32, NegativeScalePicksTheLargestConvValue) {
    Conv2dScaleMin m(1, 2, 1, -1.0f, choice(), 0);
    // conv = w * x + b per channel; with scale -1 the min picks -max(conv).
    m.set_parameters(Tensor::from_vector({2, 1, 1, 1}, {1.0f, 3.0f}),
                     Tensor::from_vector({2}, {0.5f, -0.5f}));
    Tensor in = Tensor::from_vector({1, 1, 1, 2}, {1.0f, -1.0f});
    std::vector<float> out = m.forward(on_device(in)).to_vector();
    EXPECT_FLOAT_EQ(out[0], -2.5f);  // max(1.5, 2.5)
    EXPECT_FLOAT_EQ(out[1], 0.5f);   // max(-0.5, -3.5) = -0.5
}

TEST_P(P32, NanPropagatesLikePyTorch) {
    Conv2dScaleMin m(3, 5, 3, 2.0f, choice(), 21);
    Tensor in = random_tensor({2, 3, 8, 9}, 22);
    in.data()[(1 * 3 + 2) * 72 + 4 * 9 + 4] = kNaN;
    HostTensor ref = p32_reference(m, in);
    EXPECT_TRUE(std::isnan(ref.at({1, 0, 3, 3})));
    EXPECT_TRUE(matches(m.forward(on_device(in)), ref));
}

// An overflow inside a Winograd transform that leaves no NaN: a constant
// input D and every tap 1 / (9 Cin) make each conv value D, finite, while
// the input transform's second point (-6 D along an axis, 36 D in both)
// reaches +-inf and every other point is 0, so every output of the form is
// +inf. Such tiles must be recomputed in the direct form. Cin 1 takes the
// form in x and y on the GPU (D 1e37: only the 36 D overflows), Cin 65 the
// form along x (D 6e37: -6 D overflows, 5 D does not).
TEST_P(P32, TransformOverflowIsRecomputedInTheDirectForm) {
    for (auto [cin, d] : {std::pair{1, 1e37f}, std::pair{65, 6e37f}}) {
        SCOPED_TRACE("cin " + std::to_string(cin));
        Conv2dScaleMin m(cin, 2, 3, 1.0f, choice(), 23);
        const float w = 1.0f / static_cast<float>(9 * cin);
        m.set_parameters(Tensor::from_vector({2, cin, 3, 3}, std::vector<float>(18 * cin, w)),
                         Tensor::from_vector({2}, {0.0f, 0.0f}));
        Tensor in = Tensor::from_vector({1, cin, 10, 12}, std::vector<float>(120 * cin, d));
        HostTensor ref = p32_reference(m, in);
        EXPECT_TRUE(std::isfinite(ref.at({0, 0, 0, 0})));
        EXPECT_TRUE(matches(m.forward(on_device(in)), ref));
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, P32, ::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU),
                         device_name);

class P25 : public OnDevice {};

TEST_P(P25, MatchesReferenceOnOddShapes) {
    uint64_t seed = 200;
    for (const Conv2dCase &c : kConv2dCases) {
        SCOPED_TRACE("input " + shape_string(c.input) + " cout " + std::to_string(c.cout) +
                     " k " + std::to_string(c.k));
        Conv2dMinTanhTanh m(c.input[1], c.cout, c.k, choice(), seed++);
        Tensor in = random_tensor(c.input, seed++, -3.0f, 3.0f);
        EXPECT_TRUE(matches(m.forward(on_device(in)), p25_reference(m, in)));
    }
}

TEST_P(P25, NanAndInfinityBehaveLikePyTorch) {
    Conv2dMinTanhTanh m(2, 3, 2, choice(), 31);
    Tensor in = random_tensor({1, 2, 5, 6}, 32);
    in.data()[7] = kNaN;                                        // c 0, y 1, x 1
    in.data()[30 + 4 * 6 + 5] = -std::numeric_limits<float>::infinity();  // c 1, y 4, x 5
    HostTensor ref = p25_reference(m, in);
    EXPECT_TRUE(matches(m.forward(on_device(in)), ref));
}

INSTANTIATE_TEST_SUITE_P(Devices, P25, ::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU),
                         device_name);

// ---------------------------------------------------------------- p83

struct P83Case {
    Shape input;  // (N, Cin, D, H, W)
    int cout, k, groups;
};

// The last case has more weights (36 * 27 * 13 floats, 50.5 kB; 56 kB with
// the channels padded to the GPU schedule's block of 8) than the 48 KB of
// shared memory a GPU block gets by default: the GPU schedule reads every
// weight in every block, so it must not stage them there.
const P83Case kP83Cases[] = {
    {{1, 3, 5, 7, 9}, 16, 3, 8}, {{3, 1, 4, 6, 5}, 5, 2, 5},  {{1, 5, 6, 6, 11}, 1, 1, 1},
    {{2, 2, 7, 9, 8}, 24, 5, 8}, {{3, 3, 6, 13, 10}, 4, 3, 2}, {{1, 13, 3, 5, 4}, 36, 3, 6},
    // Output depth 9: past the GPU output kernel's depth unroll (7), and not
    // a multiple of it (its last step overlaps the one before).
    {{2, 3, 11, 6, 7}, 8, 3, 4},
    // 40 output channels: on the GPU, 2.5 rounds of the F(4x4, 3x3) kernel's
    // 16 channel lanes, with groups of 5 channels across rounds; its
    // statistics' pieces (16 x 4 pixels) cut at the 19-wide, 8-high edge.
    {{2, 3, 4, 10, 21}, 40, 3, 8},
};

class P83 : public OnDevice {
protected:
    // Random affine GroupNorm parameters, so gamma and beta are exercised.
    void randomize(Conv3dGroupNormMinClampDropout &m, int cout, int cin, int k, uint64_t seed) {
        m.set_parameters(random_tensor({cout, cin, k, k, k}, seed, -0.5f, 0.5f),
                         random_tensor({cout}, seed + 1), random_tensor({cout}, seed + 2, 0.5f, 2.0f),
                         random_tensor({cout}, seed + 3));
    }
    HostTensor reference_of(const Conv3dGroupNormMinClampDropout &m, const Tensor &in) {
        return p83_reference(m, in);
    }
};

TEST_P(P83, DefaultParametersGiveZerosAsPyTorch) {
    Conv3dGroupNormMinClampDropout m(3, 16, 3, 8, 0.0f, 1.0f, 0.2f, choice(), 41);
    Tensor in = random_tensor({2, 3, 5, 8, 9}, 42, 0.0f, 1.0f);
    Tensor out = m.forward(on_device(in));
    EXPECT_TRUE(matches(out, reference_of(m, in)));
    for (float v : out.to_vector()) ASSERT_EQ(v, 0.0f);
}

TEST_P(P83, GroupNormReachesOutputWhenClampAllows) {
    uint64_t seed = 300;
    for (const P83Case &c : kP83Cases) {
        for (bool training : {false, true}) {
            SCOPED_TRACE("input " + shape_string(c.input) + " cout " + std::to_string(c.cout) +
                         " k " + std::to_string(c.k) + " groups " + std::to_string(c.groups) +
                         (training ? " training" : " eval"));
            Conv3dGroupNormMinClampDropout m(c.input[1], c.cout, c.k, c.groups, 0.0f, 1.0f, 0.5f,
                                             choice(), seed);
            randomize(m, c.cout, c.input[1], c.k, seed + 1);
            m.set_min_value(0.75f);
            m.set_clamp(-1.0f, 0.5f);
            m.set_training(training);
            m.set_dropout_seed(static_cast<uint32_t>(seed));
            seed += 10;
            Tensor in = random_tensor(c.input, seed);
            Tensor out = m.forward(on_device(in));
            EXPECT_TRUE(matches_values(out.shape(), out.to_vector(), reference_of(m, in), 2e-5,
                                       0.0, p83_conv_allowance(m, in)));
        }
    }
}

TEST_P(P83, MinValueAboveMaxValueGivesMax) {
    Conv3dGroupNormMinClampDropout m(2, 4, 3, 2, 0.8f, 0.3f, 0.0f, choice(), 51);
    Tensor in = random_tensor({1, 2, 4, 5, 6}, 52);
    Tensor out = m.forward(on_device(in));
    EXPECT_TRUE(matches(out, reference_of(m, in)));
    for (float v : out.to_vector()) ASSERT_EQ(v, 0.3f);
}

TEST_P(P83, DropoutProbabilitiesInTrainingAndEval) {
    for (float p : {0.0f, 0.5f, 1.0f}) {
        for (bool training : {false, true}) {
            SCOPED_TRACE("p " + std::to_string(p) + (training ? " training" : " eval"));
            Conv3dGroupNormMinClampDropout m(3, 4, 3, 2, 10.0f, -10.0f, p, choice(), 61);
            m.set_clamp(-10.0f, 10.0f);
            m.set_training(training);
            Tensor in = random_tensor({2, 3, 6, 20, 22}, 62);
            Tensor out = m.forward(on_device(in));
            EXPECT_TRUE(matches(out, reference_of(m, in)));
            std::vector<float> v = out.to_vector();
            double zeros = std::count(v.begin(), v.end(), 0.0f) / static_cast<double>(v.size());
            double expect = training ? p : 0.0;
            EXPECT_NEAR(zeros, expect, 6 * std::sqrt(0.25 / v.size()) + 1e-3);
        }
    }
}

TEST_P(P83, DropoutMaskIsAPureFunctionOfSeedAndIndex) {
    Conv3dGroupNormMinClampDropout m(3, 4, 3, 2, 10.0f, -10.0f, 0.5f, choice(), 71);
    m.set_clamp(-10.0f, 10.0f);
    Tensor in = on_device(random_tensor({1, 3, 5, 9, 10}, 72));
    m.set_dropout_seed(5);
    std::vector<float> a = m.forward(in).to_vector(), b = m.forward(in).to_vector();
    m.set_dropout_seed(6);
    std::vector<float> c = m.forward(in).to_vector();
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
}

TEST_P(P83, NanMakesItsWholeGroupNan) {
    Conv3dGroupNormMinClampDropout m(2, 4, 2, 2, 10.0f, -10.0f, 0.0f, choice(), 81);
    m.set_clamp(-10.0f, 10.0f);
    Tensor in = random_tensor({2, 2, 4, 5, 6}, 82);
    in.data()[3] = kNaN;  // sample 0 only
    HostTensor ref = reference_of(m, in);
    Tensor out = m.forward(on_device(in));
    EXPECT_TRUE(matches(out, ref));
    std::vector<float> v = out.to_vector();
    const int64_t per_sample = 4 * 3 * 4 * 5;
    for (int64_t i = 0; i < per_sample; ++i) ASSERT_TRUE(std::isnan(v[i])) << i;   // both groups
    for (int64_t i = per_sample; i < 2 * per_sample; ++i) ASSERT_FALSE(std::isnan(v[i])) << i;
}

// On the GPU a 3x3x3 kernel with at most 3 input channels takes the
// F(4x4, 3x3) library, which marks every tile whose sums are not finite
// with NaN; the runtime then recomputes those samples in the direct form. A
// NaN and an infinity (one sample each) must give the reference's result
// there, and the other samples keep theirs.
TEST_P(P83, NonFiniteInputsIn3x3x3ConvsGiveTheReference) {
    for (float bad : {kNaN, std::numeric_limits<float>::infinity()}) {
        SCOPED_TRACE(bad);
        Conv3dGroupNormMinClampDropout m(3, 8, 3, 4, 10.0f, -10.0f, 0.25f, choice(), 91);
        randomize(m, 8, 3, 3, 92);
        m.set_clamp(-10.0f, 10.0f);
        m.set_training(true);
        Tensor in = random_tensor({3, 3, 6, 10, 9}, 93);
        const int64_t per_sample = 3 * 6 * 10 * 9;
        in.data()[per_sample + 4 * 9 + 5] = bad;  // sample 1 only
        HostTensor ref = reference_of(m, in);
        Tensor out = m.forward(on_device(in));
        EXPECT_TRUE(matches(out, ref));
        std::vector<float> v = out.to_vector();
        const int64_t out_per_sample = 8 * 4 * 8 * 7;
        for (int64_t i = 0; i < out_per_sample; ++i) ASSERT_FALSE(std::isnan(v[i])) << i;
        for (int64_t i = 2 * out_per_sample; i < 3 * out_per_sample; ++i) {
            ASSERT_FALSE(std::isnan(v[i])) << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, P83, ::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU),
                         device_name);

// On the GPU the F(4x4, 3x3) library's output kernel stores vectors of
// floats (gpu_output_vector) where the output's width and strides allow, and
// the runtime takes that library only for outputs whose storage is aligned
// to them. Outputs 1, 2 and 3 floats past an aligned address, of an even
// width (the vector path's shape), must still give the reference: the
// direct library where the vectors would be misaligned.
TEST(P83OnGpu, OutputsOffTheVectorAlignmentGiveTheReference) {
    if (!gpu_available()) {
        GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason()
                     << "); GPU libraries not exercised";
    }
    Conv3dGroupNormMinClampDropout m(3, 8, 3, 4, 10.0f, -10.0f, 0.25f, DeviceChoice::GPU, 95);
    m.set_parameters(random_tensor({8, 3, 3, 3, 3}, 96, -0.5f, 0.5f), random_tensor({8}, 97),
                     random_tensor({8}, 98, 0.5f, 2.0f), random_tensor({8}, 99));
    m.set_clamp(-10.0f, 10.0f);
    m.set_training(true);
    Tensor in = random_tensor({2, 3, 5, 9, 12}, 100);  // output (2, 8, 3, 7, 10)
    HostTensor ref = p83_reference(m, in);
    Tensor dev_in = in.to(Device::GPU);
    const Shape o = m.output_shape(in.shape());
    int64_t count = 1;
    for (int64_t e : o) count *= e;
    Tensor storage = Tensor::empty({count + 4}, Device::GPU);
    for (int offset : {0, 1, 2, 3}) {
        SCOPED_TRACE("output " + std::to_string(offset) + " floats past the storage's start");
        Tensor out = Tensor::wrap_device(static_cast<float *>(storage.device_data()) + offset, o);
        m.forward_into(dev_in, out);
        EXPECT_TRUE(matches_values(out.shape(), out.to_vector(), ref, 2e-5, 0.0,
                                   p83_conv_allowance(m, in)));
    }
}

// ---------------------------------------------------------------- errors

TEST(ModelErrors, BadInputsAreRejectedWithTheOffendingShape) {
    Conv3dMinSoftmax p24(3, 4, 3, 2, DeviceChoice::CPU);
    auto message = [](auto f) {
        try {
            f();
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message([&] { p24.forward(Tensor::empty({1, 3, 5, 5}, Device::CPU)); })
                  .find("rank 5"),
              std::string::npos);
    EXPECT_NE(message([&] { p24.forward(Tensor::empty({1, 2, 5, 5, 5}, Device::CPU)); })
                  .find("2 channels"),
              std::string::npos);
    EXPECT_NE(message([&] { p24.forward(Tensor::empty({1, 3, 2, 5, 5}, Device::CPU)); })
                  .find("smaller than the kernel"),
              std::string::npos);
    EXPECT_NE(message([&] { Conv3dMinSoftmax(3, 4, 3, 3, DeviceChoice::CPU); }).find("dim 3"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  Conv3dGroupNormMinClampDropout(3, 16, 3, 3, 0, 1, 0.2f, DeviceChoice::CPU);
              }).find("does not divide"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  Conv3dGroupNormMinClampDropout(3, 16, 3, 8, 0, 1, 1.5f, DeviceChoice::CPU);
              }).find("between 0 and 1"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  p24.set_parameters(Tensor::empty({4, 3, 3, 3}, Device::CPU),
                                     Tensor::empty({4}, Device::CPU));
              }).find("conv.weight"),
              std::string::npos);
    EXPECT_NE(message([&] { Tensor::empty({2, 0, 3}); }).find("non-positive"), std::string::npos);
    EXPECT_NE(message([&] { Tensor::empty({1 << 20, 1 << 20}); }).find("32-bit"),
              std::string::npos);
}

TEST(ModelErrors, TensorOnTheWrongDeviceIsRejected) {
    if (!gpu_available()) {
        GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason() << ")";
    }
    Conv2dMinTanhTanh cpu_model(1, 2, 1, DeviceChoice::CPU), gpu_model(1, 2, 1, DeviceChoice::GPU);
    Tensor host_in = random_tensor({1, 1, 3, 3}, 1);
    EXPECT_THROW(gpu_model.forward(host_in), Error);
    EXPECT_THROW(cpu_model.forward(host_in.to(Device::GPU)), Error);
    EXPECT_THROW(host_in.to(Device::GPU).data(), Error);
}

TEST(ModelErrors, ForcedGpuWithoutDeviceFailsClearly) {
    if (gpu_available()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
    try {
        Conv2dMinTanhTanh m(1, 2, 1, DeviceChoice::GPU);
        FAIL() << "expected an error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("gpu"), std::string::npos) << e.what();
    }
    // Auto falls back to the CPU.
    Conv2dMinTanhTanh m(1, 2, 1, DeviceChoice::Auto);
    EXPECT_EQ(m.device(), Device::CPU);
}

}  // namespace
