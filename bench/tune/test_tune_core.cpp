// The tuning binary's GPU-free helpers: statistics, early cutoff, the output
// check, and the resumable JSON-lines log.
#include "tune_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

using namespace fusedconv::tune;
using nlohmann::json;

TEST(TuneCore, Median) {
    EXPECT_EQ(median({}), 0);
    EXPECT_EQ(median({3}), 3);
    EXPECT_EQ(median({5, 1, 3}), 3);
    EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(TuneCore, TimeRunsCountsWarmupAndReps) {
    int runs = 0, syncs = 0;
    Timing t = time_runs([&] { ++runs; }, [&] { ++syncs; }, 2, 5);
    EXPECT_EQ(runs, 7);
    EXPECT_EQ(syncs, 6);  // once after the warm-up, once per timed run
    EXPECT_EQ(t.times_ms.size(), 5u);
    EXPECT_FALSE(t.cut_short);
    EXPECT_LE(t.min_ms, t.median_ms);
}

TEST(TuneCore, TimeRunsStopsSlowCandidates) {
    int runs = 0;
    auto slow = [&] {
        ++runs;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    };
    Timing t = time_runs(slow, [] {}, 0, 20, /*cutoff_ms=*/0.5, /*cutoff_after=*/3);
    EXPECT_TRUE(t.cut_short);
    EXPECT_EQ(t.times_ms.size(), 3u);
    EXPECT_EQ(runs, 3);
    EXPECT_GE(t.median_ms, 2.0);
    // No cutoff when the runs are fast enough.
    Timing fast = time_runs([] {}, [] {}, 0, 10, 1000.0, 3);
    EXPECT_FALSE(fast.cut_short);
    EXPECT_EQ(fast.times_ms.size(), 10u);
}

TEST(TuneCore, CompareTolerance) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> ref = {0.0f, 1.0f, 1000.0f, nan, -2.0f};
    std::vector<float> got = {5e-6f, 1.000005f, 1000.009f, nan, -2.0f};
    Comparison c = compare_outputs(ref.data(), got.data(), 5);
    EXPECT_TRUE(c.ok);
    EXPECT_NEAR(c.max_abs_diff, 0.009, 1e-3);  // relative 9e-6 at |ref| = 1000

    got[0] = 2e-5f;  // absolute 2e-5 > 1e-5 * max(1, 0)
    c = compare_outputs(ref.data(), got.data(), 5);
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.bad_count, 1);
    EXPECT_EQ(c.first_bad, 0);

    got[0] = 0.0f;
    got[2] = 1000.02f;  // relative 2e-5
    EXPECT_FALSE(compare_outputs(ref.data(), got.data(), 5).ok);
}

TEST(TuneCore, CompareNaNOnlyMatchesNaN) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> ref = {1.0f, nan};
    std::vector<float> got = {nan, nan};  // an unwritten (NaN-filled) output
    Comparison c = compare_outputs(ref.data(), got.data(), 2);
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.first_bad, 0);
    got = {1.0f, 0.0f};
    EXPECT_FALSE(compare_outputs(ref.data(), got.data(), 2).ok);
    const float inf = std::numeric_limits<float>::infinity();
    ref = {inf, -inf};
    got = {inf, -inf};
    EXPECT_TRUE(compare_outputs(ref.data(), got.data(), 2).ok);
}

TEST(TuneCore, LogAppendReadAndResume) {
    std::string path =
        (std::filesystem::temp_directory_path() / ("tune_core_test_" + std::to_string(::getpid()) + ".jsonl"))
            .string();
    std::remove(path.c_str());
    int bad = -1;
    EXPECT_TRUE(read_records(path, &bad).empty());
    EXPECT_EQ(bad, 0);

    append_record(path, {{"type", "session"}, {"session", "s1"}});
    append_record(path, {{"type", "measurement"}, {"system", "default"}, {"lib", "p24_cuda"},
                         {"id", "default"}, {"shape", {2, 3, 24, 32, 32}}, {"status", "ok"}});
    append_record(path, {{"type", "measurement"}, {"system", "candidate"}, {"lib", "p24_cuda"},
                         {"id", "c003"}, {"shape", {2, 3, 24, 32, 32}}, {"status", "error"}});
    {  // an interrupted write: half a line
        std::ofstream f(path, std::ios::app);
        f << "{\"type\": \"measurement\", \"lib\": \"p24";
    }
    std::vector<json> recs = read_records(path, &bad);
    EXPECT_EQ(recs.size(), 3u);
    EXPECT_EQ(bad, 1);
    std::set<std::string> done = done_keys(recs);
    EXPECT_EQ(done.size(), 1u);  // the default is timed again by every run
    EXPECT_TRUE(done.count(measurement_key("p24_cuda", "c003", {2, 3, 24, 32, 32})));
    EXPECT_FALSE(done.count(measurement_key("p24_cuda", "c003", {128, 3, 24, 32, 32})));
    EXPECT_EQ(measurement_key("p24_cuda", "c003", {2, 3}), "p24_cuda/c003/2x3");
    std::remove(path.c_str());
}
