// The scaling bench's GPU-free decisions (bench/scaling_plan.h): replica
// counts, the batch cap at Halide's 2 GiB buffers for the default shapes,
// throughput and efficiency, the bitwise check, and the results merge that
// keeps one record per replica count.
#include "problems.h"
#include "results.h"
#include "scaling_plan.h"

#include "fusedconv/error.h"
#include "run_tools.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace {

using namespace fusedconv;
using namespace fusedconv::bench;
using nlohmann::json;

// The Error's message contains every part (so it names the bad value).
template <class F>
::testing::AssertionResult throws_naming(F f, std::initializer_list<std::string> parts) {
    try {
        f();
    } catch (const Error &e) {
        const std::string m = e.what();
        for (const std::string &p : parts) {
            if (m.find(p) == std::string::npos) {
                return ::testing::AssertionFailure() << "'" << m << "' lacks '" << p << "'";
            }
        }
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no Error thrown";
}

TEST(ScalingPlan, DefaultCountsArePowersOfTwoPlusTheVisibleNumber) {
    EXPECT_EQ(default_device_counts(1), (std::vector<int>{1}));
    EXPECT_EQ(default_device_counts(2), (std::vector<int>{1, 2}));
    EXPECT_EQ(default_device_counts(6), (std::vector<int>{1, 2, 4, 6}));
    EXPECT_EQ(default_device_counts(8), (std::vector<int>{1, 2, 4, 8}));
    EXPECT_TRUE(default_device_counts(0).empty());
}

TEST(ScalingPlan, ParsedCountsAreSortedWithOneAdded) {
    EXPECT_EQ(parse_device_counts("4,2,2"), (std::vector<int>{1, 2, 4}));
    EXPECT_EQ(parse_device_counts("1"), (std::vector<int>{1}));
    EXPECT_TRUE(throws_naming([] { parse_device_counts("0"); }, {"--devices", ">= 1", "0"}));
    EXPECT_TRUE(throws_naming([] { parse_device_counts("2,-1"); }, {"-1"}));
    EXPECT_TRUE(throws_naming([] { parse_device_counts("two"); }, {"'two'", "not a device count"}));
    EXPECT_TRUE(throws_naming([] { parse_device_counts("2x"); }, {"'2x'"}));
    EXPECT_TRUE(throws_naming([] { parse_device_counts(","); }, {"names no device count"}));
}

// 8 x the default batch: p24 fits one Halide buffer; p25 and p32's inputs
// and p83's output do not, and run at the largest multiple of 8 that does.
TEST(ScalingPlan, DefaultShapesAtEightTimesTheirBatch) {
    auto choice = [](const char *id) {
        const Problem &p = find_problem(id);
        Shape one = p.default_input;
        one[0] = 1;
        auto model = tools::kernelbench_model(id, DeviceChoice::CPU);
        int64_t in = 1, out = 1;
        for (int64_t d : one) in *= d;
        for (int64_t d : model->output_shape(one)) out *= d;
        return choose_batch(8 * p.default_input[0], max_batch_for_buffers(in, out), 8);
    };
    EXPECT_EQ(choice("p24").batch, 1024);
    EXPECT_FALSE(choice("p24").capped);
    // p83's output: 16 x 14 x 62 x 62 floats a sample -> 623 -> 616.
    EXPECT_EQ(choice("p83").batch, 616);
    EXPECT_TRUE(choice("p83").capped);
    // p25: 16 x 256 x 256 floats a sample, 2^29 - 1 elements at most -> 511 -> 504.
    EXPECT_EQ(choice("p25").batch, 504);
    EXPECT_TRUE(choice("p25").capped);
    // p32: 64 x 256 x 256 a sample -> 127 -> 120.
    EXPECT_EQ(choice("p32").batch, 120);
    EXPECT_TRUE(choice("p32").capped);
    // Fewer samples fit than the largest count: the largest batch that fits.
    EXPECT_EQ(choose_batch(100, 5, 8).batch, 5);
    EXPECT_TRUE(throws_naming([] { choose_batch(0, 5, 8); }, {"batch 0"}));
    EXPECT_TRUE(throws_naming([] { max_batch_for_buffers(0, 3); }, {"0 and 3"}));
}

TEST(ScalingPlan, ThroughputAndEfficiency) {
    EXPECT_DOUBLE_EQ(throughput(64, 0.5), 128.0);
    EXPECT_DOUBLE_EQ(efficiency(300.0, 4, 100.0), 0.75);
    EXPECT_DOUBLE_EQ(efficiency(100.0, 1, 100.0), 1.0);
    EXPECT_TRUE(throws_naming([] { throughput(8, 0.0); }, {"8 samples", "did not advance"}));
    EXPECT_TRUE(throws_naming([] { efficiency(1.0, 0, 1.0); }, {"n = 0"}));
    EXPECT_TRUE(throws_naming([] { efficiency(1.0, 2, -1.0); }, {"-1"}));
}

TEST(ScalingPlan, CompareBitsSeesNanPayloadsAndSignedZeros) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float other_nan;
    const uint32_t bits = 0x7fc0dead;
    std::memcpy(&other_nan, &bits, sizeof bits);
    EXPECT_TRUE(compare_bits({1.0f, nan}, {1.0f, nan}).identical());
    BitDiff d = compare_bits({1.0f, 0.0f, other_nan, 2.0f}, {1.0f, -0.0f, nan, 2.0f});
    EXPECT_EQ(d.differing, 2u);
    EXPECT_EQ(d.first, 1u);
    EXPECT_EQ(compare_bits({1.0f}, {1.0f, 2.0f}).differing, 2u);
}

TEST(ScalingPlan, RecordsMergeOnePerReplicaCount) {
    ScalingRecord r;
    r.problem = "p24";
    r.system = "halide-sharded";
    r.shape = {16, 3, 4, 6, 7};
    r.median_s = 0.002;
    r.samples_per_s = 8000;
    r.efficiency = 1.0;
    json one = to_json(r);
    EXPECT_EQ(one["batch"], 16);
    EXPECT_EQ(one["devices"], 1);
    EXPECT_DOUBLE_EQ(one["median_ms"].get<double>(), 2.0);
    r.devices = 2;
    r.efficiency = 0.9;
    json two = to_json(r);
    json merged = merge_records(json::array(), {two, one});
    ASSERT_EQ(merged.size(), 2u);
    EXPECT_EQ(merged[0]["devices"], 1);  // sorted by replica count
    r.efficiency = 0.8;                  // a rerun of 2 replaces that record alone
    merged = merge_records(merged, {to_json(r)});
    ASSERT_EQ(merged.size(), 2u);
    EXPECT_EQ(merged[1]["efficiency"], 0.8);
}

}  // namespace
