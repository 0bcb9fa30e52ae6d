// Seeded randomized comparison against the float64 reference, bounded in
// time: every model (CPU; GPU when usable) and every building block library
// (block_*, CPU) on many random small shapes and parameters.
//
//   FUSEDCONV_RANDOM_SEED     the seed (default below; printed either way)
//   FUSEDCONV_RANDOM_SECONDS  total time budget in seconds (default 20),
//                             shared: CPU models 50%, blocks 30%, GPU models 20%
//
// Case i of a kind draws everything from its own generator, seeded from
// (seed, kind, i), so a failure names the seed and the case and recurs with
// that seed whenever the budget reaches the case again.
//
// Tolerances. Outputs are float32-accurate relative to their size (2e-5,
// 2e-6 for softmax in [0, 1], 1e-4 for GroupNorm as in test_blocks), plus
// what float32 convolution rounding can legitimately move them: a conv value
// summing n = Cin * prod(k) + 1 terms is off by at most
// eps = n * 2^-24 * (sum |w x| + |b|) in any summation order. That eps passes
// unchanged through min, clamp and tanh (1-Lipschitz), times |scale| in p32,
// times 2 p (1 - p) through softmax, times (2 + |y|) |gamma| / sqrt(var + eps)
// through GroupNorm (the value, the group mean and the deviation move), and
// times 1 / (1 - p) through kept dropout. Dropout masks and min/clamp on exact values are compared
// exactly.
#include "test_util.h"

#include "fusedconv/models.h"

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
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;
using Halide::Runtime::Buffer;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDefaultSeed = 20261121;
constexpr double kDefaultSeconds = 20.0;
constexpr int kMaxFailures = 5;  // per kind, then the kind stops

// ---------------------------------------------------------------- settings

uint64_t seed() {
    static const uint64_t s = [] {
        const char *env = std::getenv("FUSEDCONV_RANDOM_SEED");
        return env && *env ? std::strtoull(env, nullptr, 0) : kDefaultSeed;
    }();
    return s;
}

double budget_seconds() {
    static const double b = [] {
        const char *env = std::getenv("FUSEDCONV_RANDOM_SECONDS");
        const double v = env && *env ? std::strtod(env, nullptr) : kDefaultSeconds;
        return v > 0 ? v : kDefaultSeconds;
    }();
    return b;
}

std::string how_to_reproduce() {
    return "seed " + std::to_string(seed()) +
           " (FUSEDCONV_RANDOM_SEED=" + std::to_string(seed()) +
           ", budget FUSEDCONV_RANDOM_SECONDS=" + std::to_string(budget_seconds()) + ")";
}

// The generator of case `index` of `kind`: SplitMix64 of the three.
std::mt19937_64 case_rng(const std::string &kind, uint64_t index) {
    uint64_t h = seed() ^ (std::hash<std::string>{}(kind) * 0x9e3779b97f4a7c15ull) ^
                 (index * 0xbf58476d1ce4e5b9ull);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return std::mt19937_64(h ^ (h >> 31));
}

int uniform_int(std::mt19937_64 &rng, int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
}
float uniform(std::mt19937_64 &rng, float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(rng);
}
bool coin(std::mt19937_64 &rng) { return uniform_int(rng, 0, 1) == 1; }

// Runs `one_case(kind, rng)` for each kind in turn until `seconds` pass;
// prints and returns the number of cases per kind.
std::map<std::string, int> run_for(
    double seconds, const std::vector<std::string> &kinds, const char *what,
    const std::function<::testing::AssertionResult(const std::string &, std::mt19937_64 &)>
        &one_case) {
    std::printf("[ info     ] %s: %s, %.1f s\n", what, how_to_reproduce().c_str(), seconds);
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration<double>(seconds);
    std::map<std::string, int> cases, failures;
    uint64_t i = 0;
    // Always at least one round, even with a tiny budget.
    while (i < kinds.size() || Clock::now() < deadline) {
        const std::string &kind = kinds[i % kinds.size()];
        const uint64_t index = i / kinds.size();
        ++i;
        if (failures[kind] >= kMaxFailures) continue;
        std::mt19937_64 rng = case_rng(kind, index);
        ::testing::AssertionResult r = one_case(kind, rng);
        ++cases[kind];
        if (!r) {
            ++failures[kind];
            ADD_FAILURE() << kind << " case " << index << " of " << how_to_reproduce() << ": "
                          << r.message();
        }
        bool all_stopped = true;
        for (const std::string &k : kinds) all_stopped = all_stopped && failures[k] >= kMaxFailures;
        if (all_stopped) break;
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    int total = 0;
    std::string per_kind;
    for (const auto &kv : cases) {
        total += kv.second;
        per_kind += (per_kind.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second);
    }
    std::printf("[ info     ] %s: %d cases in %.1f s (%s)\n", what, total, took, per_kind.c_str());
    ::testing::Test::RecordProperty("cases", total);
    return cases;
}

// ---------------------------------------------------------------- shared pieces

// A host tensor of uniform values in [-range, range) plus offset.
Tensor random_input(const Shape &shape, std::mt19937_64 &rng) {
    const float range = std::vector<float>{0.5f, 1.0f, 3.0f}[uniform_int(rng, 0, 2)];
    const float offset = uniform_int(rng, 0, 3) == 0 ? uniform(rng, -2.0f, 2.0f) : 0.0f;
    Tensor t = random_tensor(shape, rng, -range, range);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] += offset;
    return t;
}

Shape spatial_shape(std::mt19937_64 &rng, int64_t n, int64_t c, int dims, int k) {
    Shape s = {n, c};
    for (int d = 0; d < dims; ++d) s.push_back(k + uniform_int(rng, 0, 9));
    return s;
}

std::string describe(const char *model, const Shape &in, int cout, int k) {
    return std::string(model) + " input " + shape_string(in) + " Cout " + std::to_string(cout) +
           " k " + std::to_string(k);
}

// ---------------------------------------------------------------- models

::testing::AssertionResult model_case(const std::string &kind, std::mt19937_64 &rng,
                                      DeviceChoice choice) {
    const Device device = choice == DeviceChoice::GPU ? Device::GPU : Device::CPU;
    const int64_t n = uniform_int(rng, 1, 3);
    const int cin = uniform_int(rng, 1, 7), cout = uniform_int(rng, 1, 7);
    const int k = uniform_int(rng, 1, 4);
    const uint64_t model_seed = rng();
    const bool own_params = coin(rng);  // set_parameters, or the seeded default init
    std::string what;
    try {
        if (kind == "p24" || kind == "p83") {
            const Shape in_shape = spatial_shape(rng, n, cin, 3, k);
            Tensor in = random_input(in_shape, rng);
            if (kind == "p24") {
                what = describe("p24", in_shape, cout, k);
                Conv3dMinSoftmax m(cin, cout, k, coin(rng) ? 2 : -3, choice, model_seed);
                if (own_params) {
                    m.set_parameters(random_tensor({cout, cin, k, k, k}, rng, -0.5f, 0.5f),
                                     random_tensor({cout}, rng));
                }
                const HostTensor x = host_copy(in), w = host_copy(m.conv_weight()),
                                 b = host_copy(m.conv_bias());
                const HostTensor ref = reference::p24(x, w, b);
                Tensor out = m.forward(in.to(device));
                // eps per (n, y, x) row: the largest over channels and depth.
                const std::vector<double> eps = conv_eps(x, w, b);
                const int64_t od = in_shape[2] - k + 1, hw = ref.shape[2] * ref.shape[3];
                std::vector<double> row(static_cast<size_t>(n * hw), 0.0);
                for (size_t i = 0; i < eps.size(); ++i) {
                    const int64_t p = i % hw, nn = i / (cout * od * hw);
                    row[nn * hw + p] = std::max(row[nn * hw + p], eps[i]);
                }
                std::vector<double> extra(ref.values.size());
                for (size_t i = 0; i < extra.size(); ++i) {
                    const double p = ref.values[i];
                    extra[i] = 2.0 * p * (1.0 - p) * row[(i / (cout * hw)) * hw + i % hw];
                }
                return matches_values(out.shape(), out.to_vector(), ref, 2e-6, 0.0, extra)
                       << " (" << what << ")";
            }
            // p83: groups dividing Cout, min_value, clamp bounds (lo > hi too),
            // dropout p in {0, random, 1}, training on or off, dropout seed.
            std::vector<int> divisors;
            for (int g = 1; g <= cout; ++g)
                if (cout % g == 0) divisors.push_back(g);
            const int groups = divisors[uniform_int(rng, 0, static_cast<int>(divisors.size()) - 1)];
            const int pk = uniform_int(rng, 0, 2);
            const float p = pk == 0 ? 0.0f : pk == 1 ? uniform(rng, 0.0f, 1.0f) : 1.0f;
            Conv3dGroupNormMinClampDropout m(cin, cout, k, groups, uniform(rng, -2.0f, 2.0f),
                                             uniform(rng, -2.0f, 2.0f), p, choice, model_seed);
            if (own_params || coin(rng)) {
                m.set_parameters(random_tensor({cout, cin, k, k, k}, rng, -0.5f, 0.5f),
                                 random_tensor({cout}, rng), random_tensor({cout}, rng, -2.0f, 2.0f),
                                 random_tensor({cout}, rng));
            }
            m.set_min_value(uniform(rng, -2.0f, 3.0f));
            m.set_clamp(uniform(rng, -3.0f, 2.0f), uniform(rng, -2.0f, 3.0f));  // lo > hi too
            m.set_training(coin(rng));
            m.set_dropout_seed(static_cast<uint32_t>(rng()));
            char buf[200];
            std::snprintf(buf, sizeof buf,
                          " groups %d min_value %g clamp [%g, %g] p %g %s dropout seed %u", groups,
                          m.min_value(), m.clamp_min(), m.clamp_max(), m.dropout_p(),
                          m.training() ? "training" : "eval", m.dropout_seed());
            what = describe("p83", in_shape, cout, k) + buf;
            const HostTensor ref = p83_reference(m, in);
            Tensor out = m.forward(in.to(device));
            // The conv's rounding carried through GroupNorm (test_util.h).
            const std::vector<double> extra = p83_conv_allowance(m, in);
            return matches_values(out.shape(), out.to_vector(), ref, 1e-4, 0.0, extra)
                   << " (" << what << ")";
        }
        // p25 and p32: 2D.
        const Shape in_shape = spatial_shape(rng, n, cin, 2, k);
        Tensor in = random_input(in_shape, rng);
        Tensor w_own = random_tensor({cout, cin, k, k}, rng, -0.5f, 0.5f);
        Tensor b_own = random_tensor({cout}, rng);
        HostTensor ref;
        Tensor out;
        HostTensor x = host_copy(in), w, b;
        double sensitivity = 1.0;
        if (kind == "p25") {
            what = describe("p25", in_shape, cout, k);
            Conv2dMinTanhTanh m(cin, cout, k, choice, model_seed);
            if (own_params) m.set_parameters(w_own, b_own);
            w = host_copy(m.conv_weight()), b = host_copy(m.conv_bias());
            ref = reference::p25(x, w, b);
            out = m.forward(in.to(device));
        } else {
            const float scale = uniform_int(rng, 0, 9) == 0 ? 0.0f : uniform(rng, -3.0f, 3.0f);
            what = describe("p32", in_shape, cout, k) + " scale " + std::to_string(scale);
            Conv2dScaleMin m(cin, cout, k, scale, choice, model_seed);
            if (own_params) m.set_parameters(w_own, b_own);
            w = host_copy(m.conv_weight()), b = host_copy(m.conv_bias());
            ref = reference::p32(x, w, b, scale);
            out = m.forward(in.to(device));
            sensitivity = std::abs(scale);
        }
        // eps per (n, y, x): the largest over channels.
        const std::vector<double> eps = conv_eps(x, w, b);
        const int64_t hw = ref.shape[2] * ref.shape[3];
        std::vector<double> extra(ref.values.size(), 0.0);
        for (size_t i = 0; i < eps.size(); ++i) {
            double &e = extra[(i / (cout * hw)) * hw + i % hw];
            e = std::max(e, sensitivity * eps[i]);
        }
        return matches_values(out.shape(), out.to_vector(), ref, 2e-5, 0.0, extra)
               << " (" << what << ")";
    } catch (const std::exception &e) {
        return ::testing::AssertionFailure() << "threw " << e.what() << " (" << what << ")";
    }
}

TEST(Randomized, ModelsOnTheCpuMatchFloat64) {
    auto cases = run_for(0.5 * budget_seconds(), {"p24", "p25", "p32", "p83"}, "models on the cpu",
                         [](const std::string &kind, std::mt19937_64 &rng) {
                             return model_case(kind, rng, DeviceChoice::CPU);
                         });
    for (const char *k : {"p24", "p25", "p32", "p83"}) EXPECT_GT(cases[k], 0) << k;
}

TEST(Randomized, ModelsOnTheGpuMatchFloat64) {
    FUSEDCONV_REQUIRE_GPU();
    auto cases = run_for(0.2 * budget_seconds(), {"p24", "p25", "p32", "p83"}, "models on the gpu",
                         [](const std::string &kind, std::mt19937_64 &rng) {
                             return model_case(kind, rng, DeviceChoice::GPU);
                         });
    for (const char *k : {"p24", "p25", "p32", "p83"}) EXPECT_GT(cases[k], 0) << k;
}

// ---------------------------------------------------------------- blocks

// PyTorch-contiguous data as a dense Halide buffer (dimensions reversed).
Buffer<float> to_buffer(const Tensor &t) {
    std::vector<int> sizes(t.shape().rbegin(), t.shape().rend());
    Buffer<float> b(sizes);
    std::memcpy(b.data(), t.data(), t.numel() * sizeof(float));
    return b;
}
Buffer<float> empty_buffer(const Shape &shape) {
    return Buffer<float>(std::vector<int>(shape.rbegin(), shape.rend()));
}
std::vector<float> values(const Buffer<float> &b) {
    return std::vector<float>(b.data(), b.data() + b.number_of_elements());
}

::testing::AssertionResult halide_failed(int rc, const std::string &block) {
    return ::testing::AssertionFailure() << "block_" << block << " returned Halide error " << rc;
}

::testing::AssertionResult block_case(const std::string &kind, std::mt19937_64 &rng) {
    const int64_t n = uniform_int(rng, 1, 3), c = uniform_int(rng, 1, 7);
    if (kind == "conv2d" || kind == "conv3d") {
        const int dims = kind == "conv2d" ? 2 : 3;
        const int cout = uniform_int(rng, 1, 7);
        Shape in_shape = {n, c}, w_shape = {cout, c};
        for (int d = 0; d < dims; ++d) {  // kernels need not be square
            const int k = uniform_int(rng, 1, 4);
            w_shape.push_back(k);
            in_shape.push_back(k + uniform_int(rng, 0, 9));
        }
        Tensor in = random_input(in_shape, rng);
        Tensor w = random_tensor(w_shape, rng, -0.5f, 0.5f), b = random_tensor({cout}, rng);
        const HostTensor x = host_copy(in), hw = host_copy(w), hb = host_copy(b);
        const HostTensor ref = reference::conv(x, hw, hb);
        Buffer<float> ib = to_buffer(in), wb = to_buffer(w), bb = to_buffer(b);
        Buffer<float> ob = empty_buffer(ref.shape);
        const int rc = dims == 2 ? fusedconv_block_conv2d(ib, wb, bb, ob)
                                 : fusedconv_block_conv3d(ib, wb, bb, ob);
        if (rc) return halide_failed(rc, kind);
        return matches_values(ref.shape, values(ob), ref, 2e-5, 0.0, conv_eps(x, hw, hb))
               << " (" << kind << " input " << shape_string(in_shape) << " weight "
               << shape_string(w_shape) << ")";
    }
    if (kind == "min_depth") {
        const Shape s = {n, c, uniform_int(rng, 1, 10), uniform_int(rng, 1, 10),
                         uniform_int(rng, 1, 10)};
        Tensor in = random_input(s, rng);
        const HostTensor ref = reference::min_over_depth(host_copy(in));
        Buffer<float> ib = to_buffer(in), ob = empty_buffer(ref.shape);
        if (int rc = fusedconv_block_min_depth(ib, ob)) return halide_failed(rc, kind);
        return matches_values(ref.shape, values(ob), ref, 0.0)
               << " (min_depth " << shape_string(s) << ")";
    }
    if (kind == "min_channels") {
        const Shape s = {n, c, uniform_int(rng, 1, 10), uniform_int(rng, 1, 10)};
        Tensor in = random_input(s, rng);
        const HostTensor ref = reference::min_over_channels(host_copy(in));  // (N, 1, H, W)
        Buffer<float> ib = to_buffer(in);
        Buffer<float> ob(static_cast<int>(s[3]), static_cast<int>(s[2]), static_cast<int>(s[0]));
        if (int rc = fusedconv_block_min_channels(ib, ob)) return halide_failed(rc, kind);
        return matches_values(ref.shape, values(ob), ref, 0.0)
               << " (min_channels " << shape_string(s) << ")";
    }
    if (kind == "softmax") {
        // Values up to +-1e4 too: the max shift keeps exp finite.
        const Shape s = {n, c, uniform_int(rng, 1, 10), uniform_int(rng, 1, 10)};
        Tensor in = random_input(s, rng);
        const float scale = std::vector<float>{1.0f, 10.0f, 100.0f, 1e4f}[uniform_int(rng, 0, 3)];
        for (int64_t i = 0; i < in.numel(); ++i) in.data()[i] *= scale;
        const HostTensor ref = reference::softmax_channels(host_copy(in));
        Buffer<float> ib = to_buffer(in), ob = empty_buffer(s);
        if (int rc = fusedconv_block_softmax(ib, ob)) return halide_failed(rc, kind);
        return matches_values(s, values(ob), ref, 2e-6)
               << " (softmax " << shape_string(s) << " scale " << scale << ")";
    }
    if (kind == "groupnorm") {
        const int64_t channels = c * uniform_int(rng, 1, 3);
        std::vector<int> divisors;
        for (int g = 1; g <= channels; ++g)
            if (channels % g == 0) divisors.push_back(g);
        const int groups = divisors[uniform_int(rng, 0, static_cast<int>(divisors.size()) - 1)];
        const Shape s = {n, channels, uniform_int(rng, 1, 6), uniform_int(rng, 1, 10),
                         uniform_int(rng, 1, 10)};
        Tensor in = random_input(s, rng);
        const float offset = std::vector<float>{0.0f, 10.0f, -100.0f, 1e3f}[uniform_int(rng, 0, 3)];
        for (int64_t i = 0; i < in.numel(); ++i) in.data()[i] += offset;
        Tensor gamma = random_tensor({channels}, rng, -2.0f, 2.0f), beta = random_tensor({channels}, rng);
        const float eps = coin(rng) ? 1e-5f : uniform(rng, 1e-6f, 1e-2f);
        const HostTensor x = host_copy(in), g = host_copy(gamma);
        const HostTensor ref = reference::group_norm(x, groups, g, host_copy(beta), eps);
        Buffer<float> ib = to_buffer(in), gb = to_buffer(gamma), bb = to_buffer(beta);
        Buffer<float> ob = empty_buffer(s);
        if (int rc = fusedconv_block_groupnorm(ib, gb, bb, groups, eps, ob)) {
            return halide_failed(rc, kind);
        }
        // The inputs are exact; what float32 can do is round the group mean
        // (a few half-ulps of |mean|, over the group's standard deviation).
        const int64_t group_size = x.numel() / (n * groups), spatial = group_size / (channels / groups);
        std::vector<double> extra(x.values.size());
        for (int64_t gi = 0; gi < n * groups; ++gi) {
            double mean = 0, var = 0;
            for (int64_t j = 0; j < group_size; ++j) mean += x.values[gi * group_size + j];
            mean /= group_size;
            for (int64_t j = 0; j < group_size; ++j) {
                const double d = x.values[gi * group_size + j] - mean;
                var += d * d;
            }
            var /= group_size;
            for (int64_t j = 0; j < group_size; ++j) {
                const int64_t idx = gi * group_size + j, ch = (idx / spatial) % channels;
                extra[idx] = 8.0 * kU * std::abs(mean) * std::abs(g.values[ch]) / std::sqrt(var + eps);
            }
        }
        return matches_values(s, values(ob), ref, 1e-4, 0.0, extra)
               << " (groupnorm " << shape_string(s) << " groups " << groups << " eps " << eps
               << " offset " << offset << ")";
    }
    // elementwise: dropout(clamp(min(x, m), lo, hi)) exactly (op 0), or tanh (op 1).
    const int64_t count = uniform_int(rng, 1, 5000);
    Tensor in = random_input({count}, rng);
    Buffer<float> ib = to_buffer(in), ob = empty_buffer({count});
    if (coin(rng)) {
        for (int64_t i = 0; i < count; ++i) in.data()[i] *= 4.0f;
        ib = to_buffer(in);
        if (int rc = fusedconv_block_elementwise(ib, 1, 0, 0, 0, 0, false, 0, ob)) {
            return halide_failed(rc, "elementwise (tanh)");
        }
        HostTensor ref = host_copy(in);
        for (double &v : ref.values) v = std::tanh(v);
        return matches_values({count}, values(ob), ref, 1e-6) << " (tanh of " << count << ")";
    }
    const float min_value = uniform(rng, -2.0f, 2.0f);
    const float lo = uniform(rng, -3.0f, 2.0f), hi = uniform(rng, -2.0f, 3.0f);  // lo > hi too
    const int pk = uniform_int(rng, 0, 2);
    const float p = pk == 0 ? 0.0f : pk == 1 ? uniform(rng, 0.0f, 1.0f) : 1.0f;
    const bool training = coin(rng);
    const uint32_t dseed = static_cast<uint32_t>(rng());
    if (int rc = fusedconv_block_elementwise(ib, 0, min_value, lo, hi, p, training, dseed, ob)) {
        return halide_failed(rc, kind);
    }
    const std::vector<float> got = values(ob);
    for (int64_t i = 0; i < count; ++i) {
        const float expected = static_cast<float>(reference::dropout(
            reference::torch_clamp(reference::nan_min(in.data()[i], min_value), lo, hi),
            static_cast<uint32_t>(i), dseed, p, training));
        if (!(got[i] == expected)) {
            return ::testing::AssertionFailure()
                   << "element " << i << " of " << count << ": got " << got[i] << ", expected "
                   << expected << " (min_value " << min_value << " clamp [" << lo << ", " << hi
                   << "] p " << p << (training ? " training" : " eval") << " seed " << dseed
                   << ")";
        }
    }
    return ::testing::AssertionSuccess();
}

TEST(Randomized, BlocksMatchFloat64) {
    const std::vector<std::string> kinds = {"conv2d",  "conv3d",    "min_depth",  "min_channels",
                                            "softmax", "groupnorm", "elementwise"};
    auto cases = run_for(0.3 * budget_seconds(), kinds, "building blocks", block_case);
    for (const std::string &k : kinds) EXPECT_GT(cases[k], 0) << k;
}

}  // namespace
