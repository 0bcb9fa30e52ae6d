// Each building block's generated CPU library (generators/block_generators.cpp)
// against the float64 reference, in PyTorch's semantics.
//
// Halide buffers list dimensions innermost first, so a PyTorch-contiguous
// (N, C, H, W) tensor is a dense Buffer<float>(W, H, C, N) with the same
// memory layout: data is copied flat in both directions.
#include "reference.h"

#include "HalideBuffer.h"
#include "block_conv2d.h"
#include "block_conv3d.h"
#include "block_elementwise.h"
#include "block_groupnorm.h"
#include "block_min_channels.h"
#include "block_min_depth.h"
#include "block_softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace ref = fusedconv::reference;
using Halide::Runtime::Buffer;
using ref::HostTensor;
using Shape = std::vector<int64_t>;

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();

// ------------------------------------------------------------------ helpers

int64_t numel(const Shape &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

std::string shape_str(const Shape &shape) {
    std::ostringstream os;
    os << "(";
    for (size_t i = 0; i < shape.size(); i++) os << (i ? ", " : "") << shape[i];
    os << ")";
    return os.str();
}

// The multi-index of flat index i in a PyTorch-contiguous tensor.
std::string index_str(const Shape &shape, int64_t i) {
    Shape idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    return shape_str(idx);
}

// A float32 tensor in PyTorch order: the data both the block and the
// reference see.
struct Tensor {
    Shape shape;
    std::vector<float> data;

    HostTensor host() const { return ref::from_float(shape, data.data()); }
    float &at(const Shape &index) { return data[host_offset(index)]; }
    int64_t host_offset(const Shape &index) const {
        HostTensor probe;
        probe.shape = shape;
        return probe.offset(index);
    }
    // A dense Halide buffer with the dimensions reversed, holding a copy.
    Buffer<float> buffer() const {
        Buffer<float> b = empty_buffer(shape);
        std::memcpy(b.data(), data.data(), data.size() * sizeof(float));
        return b;
    }
    static Buffer<float> empty_buffer(const Shape &shape) {
        std::vector<int> sizes(shape.rbegin(), shape.rend());
        return Buffer<float>(sizes);
    }
};

// Uniform in [lo, hi) plus offset, never exactly zero (a zero would look dropped).
Tensor random_tensor(const Shape &shape, std::mt19937 &rng, float lo = -1.0f, float hi = 1.0f,
                     float offset = 0.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    Tensor t{shape, std::vector<float>(static_cast<size_t>(numel(shape)))};
    for (float &v : t.data) {
        do {
            v = dist(rng) + offset;
        } while (v == 0.0f);
    }
    return t;
}

// The output buffer read back as a PyTorch-order tensor of `shape`.
HostTensor to_host(const Buffer<float> &b, const Shape &shape) {
    EXPECT_EQ(static_cast<int64_t>(b.number_of_elements()), numel(shape));
    return ref::from_float(shape, b.data());
}

// Every element agrees: NaN exactly where the reference has NaN, otherwise
// |out - ref| <= rtol * max(1, |ref|) (+ the per-element `extra` allowance if
// given). Reports the first mismatch with its index, their count and the
// largest error seen.
::testing::AssertionResult all_close(const HostTensor &out, const HostTensor &expected,
                                     double rtol,
                                     const std::vector<double> *extra = nullptr) {
    if (out.shape != expected.shape) {
        return ::testing::AssertionFailure() << "shape " << shape_str(out.shape) << " != expected "
                                             << shape_str(expected.shape);
    }
    int64_t bad = 0, first = -1;
    double max_err = 0.0;
    for (int64_t i = 0; i < expected.numel(); i++) {
        const double o = out.values[i], e = expected.values[i];
        bool ok;
        if (std::isnan(e) || std::isnan(o)) {
            ok = std::isnan(e) && std::isnan(o);
        } else if (std::isinf(e) || std::isinf(o)) {
            ok = o == e;
        } else {
            const double err = std::fabs(o - e);
            max_err = std::max(max_err, err);
            double tol = rtol * std::max(1.0, std::fabs(e));
            if (extra) tol += (*extra)[i];
            ok = err <= tol;
        }
        if (!ok) {
            if (first < 0) first = i;
            bad++;
        }
    }
    if (bad == 0) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << bad << " of " << expected.numel() << " elements differ; first at "
           << index_str(expected.shape, first) << " (flat " << first
           << "): got " << out.values[first] << ", expected " << expected.values[first]
           << " (max finite |error| " << max_err << ", rtol " << rtol << ")";
}

int64_t count_nan(const HostTensor &t) {
    return std::count_if(t.values.begin(), t.values.end(), [](double v) { return std::isnan(v); });
}

// ------------------------------------------------------------------ block calls

HostTensor run_conv(const Tensor &in, const Tensor &w, const Tensor &b) {
    const bool is3d = in.shape.size() == 5;
    Shape out_shape{in.shape[0], w.shape[0]};
    for (size_t d = 2; d < in.shape.size(); d++) out_shape.push_back(in.shape[d] - w.shape[d] + 1);
    Buffer<float> ib = in.buffer(), wb = w.buffer(), bb = b.buffer();
    Buffer<float> ob = Tensor::empty_buffer(out_shape);
    const int rc = is3d ? fusedconv_block_conv3d(ib, wb, bb, ob)
                        : fusedconv_block_conv2d(ib, wb, bb, ob);
    EXPECT_EQ(rc, 0);
    return to_host(ob, out_shape);
}

HostTensor run_min_depth(const Tensor &in) {
    const Shape out_shape{in.shape[0], in.shape[1], in.shape[3], in.shape[4]};
    Buffer<float> ib = in.buffer(), ob = Tensor::empty_buffer(out_shape);
    EXPECT_EQ(fusedconv_block_min_depth(ib, ob), 0);
    return to_host(ob, out_shape);
}

// Returned with PyTorch's keepdim shape (N, 1, H, W); the block's output is
// (x, y, n), the same memory layout.
HostTensor run_min_channels(const Tensor &in) {
    Buffer<float> ib = in.buffer();
    Buffer<float> ob(static_cast<int>(in.shape[3]), static_cast<int>(in.shape[2]),
                     static_cast<int>(in.shape[0]));
    EXPECT_EQ(fusedconv_block_min_channels(ib, ob), 0);
    return to_host(ob, {in.shape[0], 1, in.shape[2], in.shape[3]});
}

HostTensor run_softmax(const Tensor &in) {
    Buffer<float> ib = in.buffer(), ob = Tensor::empty_buffer(in.shape);
    EXPECT_EQ(fusedconv_block_softmax(ib, ob), 0);
    return to_host(ob, in.shape);
}

HostTensor run_groupnorm(const Tensor &in, const Tensor &gamma, const Tensor &beta, int groups,
                         float eps) {
    Buffer<float> ib = in.buffer(), gb = gamma.buffer(), bb = beta.buffer();
    Buffer<float> ob = Tensor::empty_buffer(in.shape);
    EXPECT_EQ(fusedconv_block_groupnorm(ib, gb, bb, groups, eps, ob), 0);
    return to_host(ob, in.shape);
}

struct ChainArgs {
    float min_value = 1e30f, clamp_lo = -1e30f, clamp_hi = 1e30f;
    float p = 0.0f;
    bool training = false;
    uint32_t seed = 0;
};

// The raw float32 results (dropout checks are bit-exact).
std::vector<float> run_elementwise(const std::vector<float> &in, int op, const ChainArgs &a) {
    Buffer<float> ib(static_cast<int>(in.size())), ob(static_cast<int>(in.size()));
    std::memcpy(ib.data(), in.data(), in.size() * sizeof(float));
    EXPECT_EQ(fusedconv_block_elementwise(ib, op, a.min_value, a.clamp_lo, a.clamp_hi, a.p,
                                          a.training, a.seed, ob),
              0);
    return std::vector<float>(ob.data(), ob.data() + in.size());
}

std::vector<float> run_chain(const std::vector<float> &in, const ChainArgs &a) {
    return run_elementwise(in, 0, a);
}

// The reference chain dropout(clamp(min(v, m), lo, hi)) at flat index i.
double ref_chain(float v, uint32_t i, const ChainArgs &a) {
    return ref::dropout(ref::torch_clamp(ref::nan_min(v, a.min_value), a.clamp_lo, a.clamp_hi), i,
                        a.seed, a.p, a.training);
}

// Exact float equality by == (so +0 equals -0; test_numerics' same_bits tells
// them apart), NaN equal to NaN.
::testing::AssertionResult same_floats(const std::vector<float> &out,
                                       const std::vector<double> &expected) {
    if (out.size() != expected.size()) {
        return ::testing::AssertionFailure() << "size " << out.size() << " != " << expected.size();
    }
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < out.size(); i++) {
        const float e = static_cast<float>(expected[i]);
        const bool ok = (std::isnan(e) && std::isnan(out[i])) || out[i] == e;
        if (!ok) {
            if (first < 0) first = static_cast<int64_t>(i);
            bad++;
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << out.size()
                                         << " elements differ; first at " << first << ": got "
                                         << out[first] << ", expected " << expected[first];
}

constexpr double kConvTol = 1e-4;     // float32 sums of up to 600 products in [-1, 1)
constexpr double kSoftmaxTol = 2e-6;  // outputs in [0, 1]
constexpr double kGroupNormTol = 1e-4;

// ------------------------------------------------------------------ conv2d / conv3d

struct ConvCase {
    int64_t n, cin, cout;
    Shape spatial;  // (H, W) or (D, H, W)
    Shape kernel;   // same rank
};

void PrintTo(const ConvCase &c, std::ostream *os) {
    *os << "N " << c.n << ", Cin " << c.cin << ", Cout " << c.cout << ", spatial "
        << shape_str(c.spatial) << ", kernel " << shape_str(c.kernel);
}

std::string conv_case_name(const ::testing::TestParamInfo<ConvCase> &info) {
    const ConvCase &c = info.param;
    std::string s = "N" + std::to_string(c.n) + "_Cin" + std::to_string(c.cin) + "_Cout" +
                    std::to_string(c.cout) + "_in";
    for (size_t i = 0; i < c.spatial.size(); i++) s += (i ? "x" : "") + std::to_string(c.spatial[i]);
    s += "_k";
    for (size_t i = 0; i < c.kernel.size(); i++) s += (i ? "x" : "") + std::to_string(c.kernel[i]);
    return s;
}

struct ConvProblem {
    Tensor input, weight, bias;
};

ConvProblem make_conv(const ConvCase &c, uint32_t seed) {
    std::mt19937 rng(seed);
    Shape in_shape{c.n, c.cin}, w_shape{c.cout, c.cin};
    in_shape.insert(in_shape.end(), c.spatial.begin(), c.spatial.end());
    w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
    return {random_tensor(in_shape, rng), random_tensor(w_shape, rng), random_tensor({c.cout}, rng)};
}

class BlockConvMatchesReference : public ::testing::TestWithParam<ConvCase> {};

TEST_P(BlockConvMatchesReference, RandomInputs) {
    const ConvProblem p = make_conv(GetParam(), 1234);
    const HostTensor out = run_conv(p.input, p.weight, p.bias);
    const HostTensor expected = ref::conv(p.input.host(), p.weight.host(), p.bias.host());
    EXPECT_TRUE(all_close(out, expected, kConvTol));
    EXPECT_EQ(count_nan(out), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Conv2d, BlockConvMatchesReference,
    ::testing::Values(ConvCase{1, 1, 1, {7, 5}, {1, 1}},     //
                      ConvCase{3, 5, 24, {11, 9}, {3, 3}},   //
                      ConvCase{1, 24, 5, {7, 5}, {2, 2}},    //
                      ConvCase{3, 5, 1, {11, 9}, {5, 5}},    //
                      ConvCase{1, 5, 24, {3, 3}, {3, 3}},    // 1x1 output
                      ConvCase{3, 1, 5, {9, 11}, {3, 2}},    // non-square kernel
                      ConvCase{1, 24, 24, {11, 9}, {5, 5}}), // 600-term sums
    conv_case_name);

INSTANTIATE_TEST_SUITE_P(
    Conv3d, BlockConvMatchesReference,
    ::testing::Values(ConvCase{1, 1, 1, {3, 3, 3}, {1, 1, 1}},     //
                      ConvCase{3, 5, 24, {5, 11, 9}, {3, 3, 3}},   //
                      ConvCase{1, 24, 5, {3, 7, 5}, {2, 2, 2}},    //
                      ConvCase{3, 5, 1, {5, 7, 5}, {5, 5, 5}},     //
                      ConvCase{1, 5, 24, {4, 7, 5}, {2, 3, 1}},    // non-cubic kernel
                      ConvCase{3, 3, 5, {3, 3, 3}, {3, 3, 3}},     // 1x1x1 output
                      ConvCase{1, 24, 24, {3, 3, 3}, {1, 3, 3}}),  //
    conv_case_name);

// One NaN input element makes exactly the outputs whose window covers it NaN:
// every output channel of that sample at o in [i - k + 1, i] per spatial dim.
void check_conv_nan(const ConvCase &c, const Shape &nan_index) {
    ConvProblem p = make_conv(c, 99);
    p.input.at(nan_index) = kNaNf;
    const HostTensor out = run_conv(p.input, p.weight, p.bias);
    const HostTensor expected = ref::conv(p.input.host(), p.weight.host(), p.bias.host());
    EXPECT_TRUE(all_close(out, expected, kConvTol));
    int64_t window = c.cout;
    for (size_t d = 0; d < c.spatial.size(); d++) {
        const int64_t i = nan_index[2 + d], k = c.kernel[d], o = c.spatial[d] - k + 1;
        window *= std::min(i, o - 1) - std::max<int64_t>(0, i - k + 1) + 1;
    }
    EXPECT_EQ(count_nan(out), window);
    for (int64_t i = 0; i < out.numel(); i++) {
        if (std::isnan(out.values[i])) {
            // The sample of a NaN output is the NaN's sample.
            EXPECT_EQ(i / (out.numel() / c.n), nan_index[0]) << index_str(out.shape, i);
        }
    }
}

TEST(BlockConv2d, NaNInputPoisonsExactlyItsReceptiveField) {
    check_conv_nan({3, 5, 24, {11, 9}, {3, 3}}, {1, 2, 4, 3});   // interior: 24 x 3 x 3
    check_conv_nan({3, 5, 24, {11, 9}, {3, 3}}, {2, 4, 10, 8});  // last corner: 24 x 1 x 1
    check_conv_nan({1, 5, 5, {7, 5}, {2, 3}}, {0, 0, 0, 2});     // edge, non-square
}

TEST(BlockConv3d, NaNInputPoisonsExactlyItsReceptiveField) {
    check_conv_nan({3, 5, 24, {5, 11, 9}, {3, 3, 3}}, {1, 2, 2, 4, 3});
    check_conv_nan({1, 5, 24, {4, 7, 5}, {2, 3, 1}}, {0, 4, 0, 6, 4});
}

// ------------------------------------------------------------------ min over depth

class BlockMinDepthMatchesReference : public ::testing::TestWithParam<Shape> {};

std::string shape_name(const ::testing::TestParamInfo<Shape> &info) {
    std::string s;
    for (size_t i = 0; i < info.param.size(); i++) s += (i ? "x" : "") + std::to_string(info.param[i]);
    return s;
}

TEST_P(BlockMinDepthMatchesReference, RandomInputsExact) {
    std::mt19937 rng(5);
    const Tensor in = random_tensor(GetParam(), rng);
    EXPECT_TRUE(all_close(run_min_depth(in), ref::min_over_depth(in.host()), 0.0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockMinDepthMatchesReference,
                         ::testing::Values(Shape{1, 1, 1, 3, 3}, Shape{1, 1, 4, 7, 5},
                                           Shape{3, 5, 7, 11, 9}, Shape{1, 24, 3, 7, 5},
                                           Shape{3, 24, 22, 3, 3}),
                         shape_name);

// For every other output pixel, a NaN at one reduction position, cycling
// through all positions (first, middle, last): exactly those pixels are NaN.
TEST(BlockMinDepth, NaNAtAnyDepthPropagatesToItsColumnOnly) {
    const int64_t N = 2, C = 5, D = 7, H = 11, W = 9;
    std::mt19937 rng(6);
    Tensor in = random_tensor({N, C, D, H, W}, rng);
    int64_t planted = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++)
                    if ((y * W + x) % 2 == 0) {
                        in.at({n, c, (n + c + y + x / 2) % D, y, x}) = kNaNf;
                        planted++;
                    }
    const HostTensor out = run_min_depth(in);
    EXPECT_TRUE(all_close(out, ref::min_over_depth(in.host()), 0.0));
    EXPECT_EQ(count_nan(out), planted);
}

// ------------------------------------------------------------------ min over channels

class BlockMinChannelsMatchesReference : public ::testing::TestWithParam<Shape> {};

TEST_P(BlockMinChannelsMatchesReference, RandomInputsExact) {
    std::mt19937 rng(7);
    const Tensor in = random_tensor(GetParam(), rng);
    EXPECT_TRUE(all_close(run_min_channels(in), ref::min_over_channels(in.host()), 0.0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockMinChannelsMatchesReference,
                         ::testing::Values(Shape{1, 1, 7, 5}, Shape{3, 5, 11, 9},
                                           Shape{1, 24, 3, 3}, Shape{3, 24, 7, 5}),
                         shape_name);

TEST(BlockMinChannels, NaNAtAnyChannelPropagatesToItsPixelOnly) {
    for (int64_t C : {5, 24}) {
        SCOPED_TRACE("C = " + std::to_string(C));
        const int64_t N = 3, H = 11, W = 9;
        std::mt19937 rng(8);
        Tensor in = random_tensor({N, C, H, W}, rng);
        int64_t planted = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++)
                    if ((y * W + x) % 2 == 0) {
                        in.at({n, (n + y + x / 2) % C, y, x}) = kNaNf;
                        planted++;
                    }
        const HostTensor out = run_min_channels(in);
        EXPECT_TRUE(all_close(out, ref::min_over_channels(in.host()), 0.0));
        EXPECT_EQ(count_nan(out), planted);
    }
}

TEST(BlockMinChannels, InfinitiesZerosAndSeveralNaNsPerPixel) {
    // Every ordered pair of special values, in both channel orders and with a
    // finite value before, between and after them: blocks::nan_min compares
    // once and selects once, so each pixel's fold must still give NaN when
    // any channel is NaN (one or two of them, first or last), -inf / +inf
    // where they are the smallest, and the smallest finite value otherwise.
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> special = {kNaNf, inf, -inf, 0.0f, -0.0f, 2.5f, -7.0f};
    const int64_t C = 5;
    std::vector<std::array<float, 5>> rows;
    for (float a : special)
        for (float b : special) {
            rows.push_back({a, b, 1.0f, 3.0f, -1.0f});
            rows.push_back({1.0f, a, -1.0f, b, 3.0f});
            rows.push_back({3.0f, -1.0f, 1.0f, a, b});
        }
    const int64_t W = static_cast<int64_t>(rows.size());
    std::mt19937 rng(1);
    Tensor in = random_tensor({1, C, 1, W}, rng);
    for (int64_t x = 0; x < W; x++)
        for (int64_t c = 0; c < C; c++) in.at({0, c, 0, x}) = rows[x][c];
    const HostTensor out = run_min_channels(in);
    EXPECT_TRUE(all_close(out, ref::min_over_channels(in.host()), 0.0));
    int64_t expected_nan = 0;
    for (const auto &r : rows) expected_nan += std::any_of(r.begin(), r.end(), [](float v) {
        return std::isnan(v);
    });
    EXPECT_EQ(count_nan(out), expected_nan);
}

TEST(BlockMinChannels, NegatedInputGivesMaximum) {
    // What p32 needs for a negative scale: min(-x) = -max(x).
    std::mt19937 rng(9);
    Tensor in = random_tensor({3, 5, 11, 9}, rng);
    for (float &v : in.data) v = -v;
    EXPECT_TRUE(all_close(run_min_channels(in), ref::min_over_channels(in.host()), 0.0));
}

// ------------------------------------------------------------------ softmax

::testing::AssertionResult rows_sum_to_one(const HostTensor &t, double tol) {
    const int64_t N = t.shape[0], C = t.shape[1], HW = t.shape[2] * t.shape[3];
    for (int64_t n = 0; n < N; n++) {
        for (int64_t p = 0; p < HW; p++) {
            double s = 0.0;
            for (int64_t c = 0; c < C; c++) s += t.values[(n * C + c) * HW + p];
            if (!(std::fabs(s - 1.0) <= tol)) {
                return ::testing::AssertionFailure()
                       << "row n=" << n << " pixel " << p << " sums to " << s;
            }
        }
    }
    return ::testing::AssertionSuccess();
}

class BlockSoftmaxMatchesReference : public ::testing::TestWithParam<Shape> {};

TEST_P(BlockSoftmaxMatchesReference, RandomInputsRowsSumToOne) {
    std::mt19937 rng(10);
    const Tensor in = random_tensor(GetParam(), rng, -3.0f, 3.0f);
    const HostTensor out = run_softmax(in);
    EXPECT_TRUE(all_close(out, ref::softmax_channels(in.host()), kSoftmaxTol));
    EXPECT_TRUE(rows_sum_to_one(out, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockSoftmaxMatchesReference,
                         ::testing::Values(Shape{1, 1, 7, 5}, Shape{3, 5, 11, 9},
                                           Shape{1, 24, 3, 3}, Shape{3, 24, 7, 5}),
                         shape_name);

TEST(BlockSoftmax, SingleChannelIsOne) {
    std::mt19937 rng(11);
    const Tensor in = random_tensor({3, 1, 7, 5}, rng, -100.0f, 100.0f);
    for (double v : run_softmax(in).values) EXPECT_EQ(v, 1.0);
}

TEST(BlockSoftmax, LargeValuesStayFiniteAndCorrect) {
    std::mt19937 rng(12);
    // All values near +1000 (exp would overflow without the max shift), and near -1000.
    for (float offset : {1000.0f, -1000.0f}) {
        SCOPED_TRACE(offset);
        const Tensor in = random_tensor({3, 24, 7, 5}, rng, -1.0f, 1.0f, offset);
        const HostTensor out = run_softmax(in);
        EXPECT_TRUE(all_close(out, ref::softmax_channels(in.host()), kSoftmaxTol));
        EXPECT_TRUE(rows_sum_to_one(out, 1e-5));
    }
    // One channel at +1000 per pixel, the rest in [-1, 1): that channel gets 1, the rest 0.
    Tensor in = random_tensor({1, 5, 11, 9}, rng);
    for (int64_t y = 0; y < 11; y++)
        for (int64_t x = 0; x < 9; x++) in.at({0, (y + x) % 5, y, x}) = 1000.0f;
    const HostTensor out = run_softmax(in);
    EXPECT_TRUE(all_close(out, ref::softmax_channels(in.host()), kSoftmaxTol));
    for (int64_t y = 0; y < 11; y++)
        for (int64_t x = 0; x < 9; x++)
            for (int64_t c = 0; c < 5; c++)
                EXPECT_EQ(out.at({0, c, y, x}), c == (y + x) % 5 ? 1.0 : 0.0);
    // Every channel equal at +1000: exactly uniform.
    Tensor flat{{1, 24, 3, 3}, std::vector<float>(24 * 9, 1000.0f)};
    for (double v : run_softmax(flat).values) EXPECT_NEAR(v, 1.0 / 24, 1e-7);
}

TEST(BlockSoftmax, NaNAtAnyChannelMakesExactlyItsRowNaN) {
    for (int64_t C : {5, 24}) {
        SCOPED_TRACE("C = " + std::to_string(C));
        const int64_t N = 3, H = 11, W = 9;
        std::mt19937 rng(13);
        Tensor in = random_tensor({N, C, H, W}, rng);
        int64_t rows = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++)
                    if ((y * W + x) % 2 == 0) {
                        in.at({n, (n + y + x / 2) % C, y, x}) = kNaNf;
                        rows++;
                    }
        const HostTensor out = run_softmax(in);
        EXPECT_TRUE(all_close(out, ref::softmax_channels(in.host()), kSoftmaxTol));
        EXPECT_EQ(count_nan(out), rows * C);
    }
}

// ------------------------------------------------------------------ group norm

struct GroupNormCase {
    Shape shape;  // (N, C, D, H, W)
    int groups;
};

void PrintTo(const GroupNormCase &c, std::ostream *os) {
    *os << "shape " << shape_str(c.shape) << ", groups " << c.groups;
}

std::string gn_case_name(const ::testing::TestParamInfo<GroupNormCase> &info) {
    std::string s;
    for (size_t i = 0; i < info.param.shape.size(); i++)
        s += (i ? "x" : "") + std::to_string(info.param.shape[i]);
    return s + "_groups" + std::to_string(info.param.groups);
}

struct GroupNormProblem {
    Tensor input, gamma, beta;
};

GroupNormProblem make_gn(const GroupNormCase &c, uint32_t seed, float offset = 0.0f) {
    std::mt19937 rng(seed);
    const int64_t C = c.shape[1];
    return {random_tensor(c.shape, rng, -1.0f, 1.0f, offset), random_tensor({C}, rng, 0.5f, 1.5f),
            random_tensor({C}, rng)};
}

HostTensor ref_gn(const GroupNormProblem &p, int groups, double eps) {
    return ref::group_norm(p.input.host(), groups, p.gamma.host(), p.beta.host(), eps);
}

class BlockGroupNormMatchesReference : public ::testing::TestWithParam<GroupNormCase> {};

TEST_P(BlockGroupNormMatchesReference, RandomInputs) {
    const GroupNormProblem p = make_gn(GetParam(), 21);
    const HostTensor out = run_groupnorm(p.input, p.gamma, p.beta, GetParam().groups, 1e-5f);
    EXPECT_TRUE(all_close(out, ref_gn(p, GetParam().groups, 1e-5), kGroupNormTol));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BlockGroupNormMatchesReference,
    ::testing::Values(GroupNormCase{{1, 1, 3, 7, 5}, 1}, GroupNormCase{{3, 5, 2, 11, 9}, 5},
                      GroupNormCase{{3, 5, 2, 7, 5}, 1}, GroupNormCase{{1, 24, 3, 7, 5}, 8},
                      GroupNormCase{{3, 24, 2, 3, 3}, 6}, GroupNormCase{{1, 24, 2, 11, 9}, 24},
                      GroupNormCase{{1, 24, 2, 3, 3}, 1}, GroupNormCase{{3, 16, 14, 11, 9}, 8}),
    gn_case_name);

// Inputs offset + U[-1, 1): the mean is large against the spread. A float32
// pipeline cannot do better than rounding the mean to float32 (half an ulp of
// the offset, ~offset * 6e-8) times rstd * |gamma|; allow a few of those on top
// of the usual tolerance. A one-pass E[x^2] - E[x]^2 in float32 would lose the
// variance entirely (its cancellation error ~offset^2 * 6e-8 is >> var = 1/3).
TEST(BlockGroupNorm, LargeOffsetsMatchFloat64Reference) {
    const GroupNormCase cases[] = {{{3, 24, 3, 11, 9}, 8}, {{1, 16, 14, 31, 31}, 8}};
    for (const GroupNormCase &c : cases) {
        for (float offset : {1e3f, 1e4f}) {
            SCOPED_TRACE(gn_case_name({c, 0}) + " offset " + std::to_string(offset));
            const GroupNormProblem p = make_gn(c, 31, offset);
            const HostTensor out = run_groupnorm(p.input, p.gamma, p.beta, c.groups, 1e-5f);
            const HostTensor expected = ref_gn(p, c.groups, 1e-5);
            // Per element: 4 half-ulps of the offset, scaled by rstd * |gamma| of its group.
            const int64_t C = c.shape[1], cpg = C / c.groups;
            const int64_t spatial = c.shape[2] * c.shape[3] * c.shape[4];
            const HostTensor x = p.input.host();
            std::vector<double> extra(static_cast<size_t>(x.numel()));
            for (int64_t n = 0; n < c.shape[0]; n++) {
                for (int g = 0; g < c.groups; g++) {
                    std::vector<double> vals(x.values.begin() + (n * C + g * cpg) * spatial,
                                             x.values.begin() + (n * C + (g + 1) * cpg) * spatial);
                    double mean = 0, var = 0;
                    for (double v : vals) mean += v;
                    mean /= vals.size();
                    for (double v : vals) var += (v - mean) * (v - mean);
                    var /= vals.size();
                    const double rstd = 1.0 / std::sqrt(var + 1e-5);
                    for (int64_t i = 0; i < cpg * spatial; i++) {
                        const int64_t ch = g * cpg + i / spatial;
                        extra[(n * C + g * cpg) * spatial + i] =
                            4.0 * 0.5 * std::ldexp(1.0, -23) * offset * rstd *
                            std::fabs(p.gamma.data[ch]);
                    }
                }
            }
            EXPECT_TRUE(all_close(out, expected, kGroupNormTol, &extra));
        }
    }
}

TEST(BlockGroupNorm, NaNMakesExactlyItsGroupNaN) {
    const GroupNormCase c{{3, 24, 2, 7, 5}, 8};  // 3 channels per group
    GroupNormProblem p = make_gn(c, 41);
    p.input.at({0, 0, 0, 0, 0}) = kNaNf;   // sample 0, group 0: its first element
    p.input.at({1, 10, 1, 3, 2}) = kNaNf;  // sample 1, group 3 (channels 9..11): middle
    p.input.at({2, 23, 1, 6, 4}) = kNaNf;  // sample 2, group 7: its last element
    const HostTensor out = run_groupnorm(p.input, p.gamma, p.beta, c.groups, 1e-5f);
    EXPECT_TRUE(all_close(out, ref_gn(p, c.groups, 1e-5), kGroupNormTol));
    EXPECT_EQ(count_nan(out), 3 * (3 * 2 * 7 * 5));
    for (int64_t ch = 9; ch < 12; ch++) EXPECT_TRUE(std::isnan(out.at({1, ch, 0, 0, 0})));
    EXPECT_FALSE(std::isnan(out.at({1, 8, 0, 0, 0})));
    EXPECT_FALSE(std::isnan(out.at({1, 12, 0, 0, 0})));
    EXPECT_FALSE(std::isnan(out.at({0, 10, 0, 0, 0})));
}

TEST(BlockGroupNorm, ConstantGroupGivesBeta) {
    // var = 0: (x - mean) = 0 exactly, output = beta.
    const GroupNormCase c{{1, 4, 2, 3, 3}, 2};
    GroupNormProblem p = make_gn(c, 51);
    std::fill(p.input.data.begin(), p.input.data.end(), 3.25f);
    const HostTensor out = run_groupnorm(p.input, p.gamma, p.beta, c.groups, 1e-5f);
    EXPECT_TRUE(all_close(out, ref_gn(p, c.groups, 1e-5), 1e-6));
}

// ------------------------------------------------------------------ element-wise

std::vector<float> random_floats(size_t n, std::mt19937 &rng, float lo = -1.0f, float hi = 1.0f) {
    return random_tensor({static_cast<int64_t>(n)}, rng, lo, hi).data;
}

std::vector<double> ref_chain_all(const std::vector<float> &in, const ChainArgs &a) {
    std::vector<double> r(in.size());
    for (size_t i = 0; i < in.size(); i++) r[i] = ref_chain(in[i], static_cast<uint32_t>(i), a);
    return r;
}

TEST(BlockElementwise, TanhMatchesReference) {
    std::mt19937 rng(61);
    std::vector<float> in = random_floats(4099, rng, -4.0f, 4.0f);
    in[0] = 20.0f;
    in[1] = -20.0f;
    in[2] = 100.0f;
    in[3] = -100.0f;
    in[4] = 1e-6f;
    in[5] = kNaNf;
    const std::vector<float> out = run_elementwise(in, 1, ChainArgs{});
    HostTensor o = ref::from_float({static_cast<int64_t>(in.size())}, out.data());
    HostTensor e = ref::from_float({static_cast<int64_t>(in.size())}, in.data());
    for (double &v : e.values) v = std::tanh(v);
    EXPECT_TRUE(all_close(o, e, 1e-6));
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[3], -1.0f);
    EXPECT_TRUE(std::isnan(out[5]));
}

TEST(BlockElementwise, MinWithMinValueIsExact) {
    std::mt19937 rng(62);
    std::vector<float> in = random_floats(5003, rng);
    in[17] = kNaNf;
    for (float m : {0.25f, 0.0f, -0.5f}) {
        ChainArgs a;
        a.min_value = m;
        EXPECT_TRUE(same_floats(run_chain(in, a), ref_chain_all(in, a))) << "min_value " << m;
    }
    // Rough check that the reference chain means min here.
    ChainArgs a;
    a.min_value = 0.25f;
    const std::vector<float> out = run_chain(in, a);
    EXPECT_EQ(out[0], std::min(in[0], 0.25f));
    EXPECT_TRUE(std::isnan(out[17]));
}

TEST(BlockElementwise, ClampIsExactAndNaNPropagates) {
    std::mt19937 rng(63);
    std::vector<float> in = random_floats(5003, rng);
    in[100] = kNaNf;
    ChainArgs a;
    a.clamp_lo = -0.25f;
    a.clamp_hi = 0.5f;
    const std::vector<float> out = run_chain(in, a);
    EXPECT_TRUE(same_floats(out, ref_chain_all(in, a)));
    EXPECT_TRUE(std::isnan(out[100]));
    // p83's defaults (min_value 0, clamp [0, 1], eval): every finite value becomes 0.
    ChainArgs d;
    d.min_value = 0.0f;
    d.clamp_lo = 0.0f;
    d.clamp_hi = 1.0f;
    const std::vector<float> z = run_chain(in, d);
    for (size_t i = 0; i < z.size(); i++) {
        if (i == 100) {
            EXPECT_TRUE(std::isnan(z[i]));
        } else {
            ASSERT_EQ(z[i], 0.0f) << "at " << i;
        }
    }
}

TEST(BlockElementwise, ClampWithMinAboveMaxGivesMax) {
    std::mt19937 rng(64);
    std::vector<float> in = random_floats(5003, rng, -2.0f, 2.0f);
    in[7] = kNaNf;
    // As in p83 with min_value = 0.5 > max_value = -0.25: min(x, 0.5), then
    // clamp(min=0.5, max=-0.25) -> every value becomes -0.25; NaN stays NaN.
    ChainArgs a;
    a.min_value = 0.5f;
    a.clamp_lo = 0.5f;
    a.clamp_hi = -0.25f;
    const std::vector<float> out = run_chain(in, a);
    EXPECT_TRUE(same_floats(out, ref_chain_all(in, a)));
    for (size_t i = 0; i < out.size(); i++) {
        if (i == 7) {
            EXPECT_TRUE(std::isnan(out[i]));
        } else {
            ASSERT_EQ(out[i], -0.25f) << "at " << i;
        }
    }
}

// The fused form (blocks::min_then_clamp) against the reference's chain of
// NaN-aware min / max, for every ordering of the bounds, bounds that are NaN
// or infinite, and inputs equal to a bound.
TEST(BlockElementwise, MinThenClampMatchesTheChainForAnyBounds) {
    const float inf = std::numeric_limits<float>::infinity();
    const float bounds[] = {-1.0f, -0.25f, 0.0f, 0.5f, 1.0f, kNaNf, inf, -inf};
    std::mt19937 rng(65);
    std::vector<float> in = random_floats(61, rng, -2.0f, 2.0f);
    for (float b : bounds) in.push_back(b);
    in.push_back(-0.0f);
    for (float m : bounds) {
        for (float lo : bounds) {
            for (float hi : bounds) {
                ChainArgs a;
                a.min_value = m;
                a.clamp_lo = lo;
                a.clamp_hi = hi;
                const std::vector<float> out = run_chain(in, a);
                ASSERT_TRUE(same_floats(out, ref_chain_all(in, a)))
                    << "min_value " << m << ", clamp [" << lo << ", " << hi << "]";
                if (std::isnan(m) || std::isnan(lo) || std::isnan(hi)) {
                    ASSERT_TRUE(std::all_of(out.begin(), out.end(),
                                            [](float v) { return std::isnan(v); }));
                }
            }
        }
    }
}

// ------------------------------------------------------------------ dropout

constexpr size_t kDropoutN = 1 << 17;  // 131072 elements

struct DropoutRun {
    std::vector<float> in, out;
    size_t zeros = 0;
};

DropoutRun run_dropout(float p, bool training, uint32_t seed, uint32_t data_seed = 71) {
    std::mt19937 rng(data_seed);
    DropoutRun r;
    r.in = random_floats(kDropoutN, rng);
    ChainArgs a;
    a.p = p;
    a.training = training;
    a.seed = seed;
    r.out = run_chain(r.in, a);
    EXPECT_TRUE(same_floats(r.out, ref_chain_all(r.in, a)));  // same mask as the reference
    r.zeros = std::count(r.out.begin(), r.out.end(), 0.0f);
    return r;
}

TEST(BlockDropout, TrainingFractionZeroedIsCloseToP) {
    for (float p : {0.2f, 0.5f}) {
        const DropoutRun r = run_dropout(p, true, 12345u);
        const double frac = static_cast<double>(r.zeros) / kDropoutN;
        const double sd = std::sqrt(p * (1.0 - p) / kDropoutN);
        EXPECT_NEAR(frac, p, 5 * sd) << "p " << p;
    }
}

TEST(BlockDropout, SurvivorsAreExactlyInputOverOneMinusP) {
    for (float p : {0.2f, 0.5f}) {
        const DropoutRun r = run_dropout(p, true, 777u);
        for (size_t i = 0; i < kDropoutN; i++) {
            if (r.out[i] != 0.0f) {
                ASSERT_EQ(r.out[i], r.in[i] / (1.0f - p)) << "p " << p << " at " << i;
            }
        }
    }
}

// The survivors' quotient is computed without a float32 division (see
// blocks.cpp); it must still equal it bit for bit, over the whole exponent
// range (denormals, huge values that overflow to infinity, signed zeros)
// and for p near 0 and near 1.
TEST(BlockDropout, SurvivorsAreExactlyInputOverOneMinusPAtAnyMagnitude) {
    std::mt19937 rng(4242);
    std::vector<float> in(kDropoutN);
    for (float &v : in) {
        uint32_t bits = static_cast<uint32_t>(rng());
        std::memcpy(&v, &bits, sizeof v);
        if (!std::isfinite(v)) v = 1.5f;
    }
    const float special[] = {0.0f,   -0.0f,  std::numeric_limits<float>::denorm_min(),
                             -std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::max(), 1.0f, 3.0f, 0.1f};
    for (size_t i = 0; i < std::size(special); i++) in[i] = special[i];
    ChainArgs a;
    a.min_value = std::numeric_limits<float>::infinity();
    a.clamp_lo = -std::numeric_limits<float>::infinity();
    a.clamp_hi = std::numeric_limits<float>::infinity();
    a.training = true;
    a.seed = 99u;
    size_t survivors = 0, dropped_count = 0;
    for (float p : {1e-7f, 0.2f, 0.3333333f, 0.5f, 0.9f, 0.999f, 0.9999999f}) {
        a.p = p;
        const std::vector<float> out = run_chain(in, a);
        for (size_t i = 0; i < kDropoutN; i++) {
            // The mask from the reference, not from the output: a survivor
            // wrongly flushed to zero must not pass as a dropped element.
            const bool keep = ref::uniform01(a.seed, static_cast<uint32_t>(i)) >= p;
            const float want = keep ? in[i] / (1.0f - p) : in[i] * 0.0f;
            ASSERT_EQ(std::memcmp(&out[i], &want, sizeof(float)), 0)
                << "p " << p << " at " << i << (keep ? " (kept): " : " (dropped): ") << in[i]
                << " -> " << out[i] << ", want " << want;
            (keep ? survivors : dropped_count)++;
        }
    }
    EXPECT_GT(survivors, 0u);
    EXPECT_GT(dropped_count, 0u);
}

TEST(BlockDropout, ProbabilityZeroIsIdentityInTraining) {
    const DropoutRun r = run_dropout(0.0f, true, 3u);
    EXPECT_EQ(r.zeros, 0u);
    EXPECT_TRUE(r.out == r.in);
}

TEST(BlockDropout, ProbabilityOneZeroesEverythingInTraining) {
    const DropoutRun r = run_dropout(1.0f, true, 3u);
    EXPECT_EQ(r.zeros, kDropoutN);
}

// The keep test is an integer comparison with a threshold from p
// (blocks::dropout); the mask must still be the reference's (uniform >= p in
// floating point) for p outside (0, 1), at its ends, and NaN.
TEST(BlockDropout, MaskMatchesTheReferenceForAnyP) {
    const float inf = std::numeric_limits<float>::infinity();
    // p equal to an element's uniform (kept) and one float above it (dropped):
    // the threshold's rounding at a draw. The element's uniform is in
    // [1/8, 1/4), where floats are 2^-26 apart, so `above` lies between two
    // draws.
    uint32_t i = 0;
    while (!(ref::uniform01(5u, i) >= 0.125 && ref::uniform01(5u, i) < 0.25)) i++;
    const float at = static_cast<float>(ref::uniform01(5u, i));
    const float above = std::nextafter(at, 2.0f);
    for (float p : {-inf, -0.5f, -0.0f, std::ldexp(1.0f, -30), std::ldexp(1.0f, -24), at, above,
                    0.7f, 1.0f - std::ldexp(1.0f, -24), 1.5f, inf, kNaNf}) {
        const DropoutRun r = run_dropout(p, true, 5u);  // asserts the reference's mask
        if (!(p < 1.0f)) {  // 1.5, inf, NaN: every element dropped
            EXPECT_EQ(r.zeros, kDropoutN) << "p " << p;
        }
        if (p <= 0.0f && std::isfinite(p)) {  // every element kept (-inf: kept as x / inf = 0)
            EXPECT_EQ(r.zeros, 0u) << "p " << p;
        }
    }
}

TEST(BlockDropout, EvalModeIsIdentity) {
    for (float p : {0.0f, 0.5f, 1.0f}) {
        const DropoutRun r = run_dropout(p, false, 3u);
        EXPECT_TRUE(r.out == r.in) << "p " << p;
    }
}

TEST(BlockDropout, SameSeedReproducesOtherSeedDiffers) {
    const DropoutRun a = run_dropout(0.5f, true, 2024u);
    const DropoutRun b = run_dropout(0.5f, true, 2024u);
    const DropoutRun c = run_dropout(0.5f, true, 2025u);
    EXPECT_TRUE(a.out == b.out);
    size_t differ = 0;
    for (size_t i = 0; i < kDropoutN; i++) differ += (a.out[i] == 0.0f) != (c.out[i] == 0.0f);
    // Independent masks disagree with probability 2 p (1 - p) = 0.5.
    const double frac = static_cast<double>(differ) / kDropoutN;
    EXPECT_NEAR(frac, 0.5, 5 * std::sqrt(0.25 / kDropoutN));
}

TEST(BlockDropout, NaNInputStaysNaNWhetherKeptOrDropped) {
    std::mt19937 rng(72);
    std::vector<float> in = random_floats(kDropoutN, rng);
    for (size_t i = 0; i < kDropoutN; i += 97) in[i] = kNaNf;
    for (float p : {0.5f, 1.0f}) {
        ChainArgs a;
        a.p = p;
        a.training = true;
        a.seed = 5u;
        const std::vector<float> out = run_chain(in, a);
        EXPECT_TRUE(same_floats(out, ref_chain_all(in, a)));
        size_t dropped_nan = 0;
        for (size_t i = 0; i < kDropoutN; i += 97) {
            ASSERT_TRUE(std::isnan(out[i])) << "p " << p << " at " << i;
            dropped_nan += ref::uniform01(5u, static_cast<uint32_t>(i)) < p;
        }
        EXPECT_GT(dropped_nan, 0u);  // the dropped path was exercised
        size_t nans = std::count_if(out.begin(), out.end(), [](float v) { return std::isnan(v); });
        EXPECT_EQ(nans, (kDropoutN + 96) / 97);
    }
}

}  // namespace
