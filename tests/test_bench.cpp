// The benchmark harness's GPU-free parts: problem sizes, roofline
// arithmetic and the results-file merge.
#include "problems.h"
#include "results.h"
#include "roofline.h"

#include "fusedconv/error.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <filesystem>

namespace {

using namespace fusedconv;
using namespace fusedconv::bench;
using nlohmann::json;

TEST(BenchProblems, FlopsAndBytesMatchProblemsMd) {
    // PROBLEMS.md rounds these down: conv GFLOP 9.85 (p24), 608 (p32), 152
    // (p25), 17.8 (p83). Exactly: 2 * N * Cout * out spatial * Cin * k^d.
    auto gflop = [](const char *id) {
        return conv_flops(find_problem(id), find_problem(id).default_input) / 1e9;
    };
    EXPECT_DOUBLE_EQ(gflop("p24"), 2.0 * 128 * 24 * 22 * 30 * 30 * 3 * 27 / 1e9);
    EXPECT_DOUBLE_EQ(gflop("p32"), 2.0 * 64 * 128 * 254 * 254 * 64 * 9 / 1e9);
    EXPECT_DOUBLE_EQ(gflop("p25"), 2.0 * 128 * 64 * 254 * 254 * 16 * 9 / 1e9);
    EXPECT_DOUBLE_EQ(gflop("p83"), 2.0 * 128 * 16 * 14 * 62 * 62 * 3 * 27 / 1e9);
    EXPECT_NEAR(gflop("p24"), 9.85, 0.01);
    EXPECT_NEAR(gflop("p32"), 608.0, 1.0);
    // Input 101 MB and output 441 MB for p83; input 37.7 MB, output 11.1 MB for p24.
    const Problem &p83 = find_problem("p83");
    EXPECT_NEAR(unavoidable_bytes(p83, p83.default_input) / 1e6, 100.7 + 440.9, 0.5);
    const Problem &p24 = find_problem("p24");
    EXPECT_NEAR(unavoidable_bytes(p24, p24.default_input) / 1e6, 37.7 + 11.1, 0.2);
}

TEST(BenchProblems, OutputShapes) {
    EXPECT_EQ(output_shape(find_problem("p24"), {2, 3, 5, 6, 7}), (Shape{2, 24, 4, 5}));
    EXPECT_EQ(output_shape(find_problem("p32"), {1, 64, 9, 8}), (Shape{1, 1, 7, 6}));
    EXPECT_EQ(output_shape(find_problem("p83"), {3, 3, 4, 5, 6}), (Shape{3, 16, 2, 3, 4}));
}

TEST(BenchProblems, ShapeParsingRejectsBadInput) {
    const Problem &p = find_problem("p25");
    EXPECT_EQ(parse_shape(p, "2,16,9,7"), (Shape{2, 16, 9, 7}));
    EXPECT_THROW(parse_shape(p, "2,16,9"), Error);        // rank
    EXPECT_THROW(parse_shape(p, "2,15,9,7"), Error);      // channels
    EXPECT_THROW(parse_shape(p, "2,16,2,7"), Error);      // smaller than the kernel
    EXPECT_THROW(parse_shape(p, "2,16,x,7"), Error);      // not a number
    EXPECT_THROW(parse_shape(p, "2,16,-9,7"), Error);     // negative
    EXPECT_THROW(find_problem("p99"), Error);
}

TEST(BenchRoofline, H200AttributesGiveItsDatasheetPeaks) {
    GpuInfo h200;
    h200.sm_count = 132;
    h200.cc_major = 9;
    h200.sm_clock_mhz = 1980;
    h200.mem_clock_mhz = 2619;
    h200.bus_width_bits = 6144;
    Ceilings c = attribute_ceilings(h200);
    EXPECT_NEAR(c.fma_tflops, 66.9, 0.1);
    EXPECT_NEAR(c.mem_gbps, 4023, 1);
    EXPECT_EQ(fp32_lanes_per_sm(8, 0), 64);
    EXPECT_EQ(fp32_lanes_per_sm(8, 6), 128);
}

TEST(BenchRoofline, FloorIsTheLargerOfComputeAndMemory) {
    Ceilings c{50.0, 4000.0, "test"};
    Roofline r = roofline(100e9, 4e9, 4.0, c);  // compute 2 ms, memory 1 ms
    EXPECT_NEAR(r.floor_ms, 2.0, 1e-9);
    EXPECT_NEAR(r.tflops, 25.0, 1e-9);
    EXPECT_NEAR(r.fma_frac, 0.5, 1e-9);
    EXPECT_NEAR(r.gbps, 1000.0, 1e-9);
    EXPECT_NEAR(r.mem_frac, 0.25, 1e-9);
}

TEST(BenchResults, SlugAndMergeReplaceSameKeyOnly) {
    EXPECT_EQ(device_slug("NVIDIA H200"), "nvidia-h200");
    EXPECT_EQ(device_slug(" NVIDIA H100 80GB HBM3 "), "nvidia-h100-80gb-hbm3");
    json old = json::array({{{"problem", "p24"}, {"system", "halide"}, {"shape", {1, 2}}, {"median_ms", 1.0}},
                            {{"problem", "p24"}, {"system", "torch-eager"}, {"shape", {1, 2}}, {"median_ms", 3.0}}});
    json merged = merge_records(old, {{{"problem", "p24"}, {"system", "halide"}, {"shape", {1, 2}}, {"median_ms", 0.5}},
                                      {{"problem", "p24"}, {"system", "halide"}, {"shape", {4, 2}}, {"median_ms", 2.0}}});
    ASSERT_EQ(merged.size(), 3u);
    int halide_small = 0;
    for (const json &r : merged) {
        if (r["system"] == "halide" && r["shape"] == json({1, 2})) {
            ++halide_small;
            EXPECT_EQ(r["median_ms"], 0.5);
        }
    }
    EXPECT_EQ(halide_small, 1);
}

TEST(BenchResults, FileMergeRoundTripsAndRejectsGarbage) {
    std::string path = ::testing::TempDir() + "/fusedconv_results_test.json";
    std::remove(path.c_str());
    merge_into_file(path, {{{"problem", "p25"}, {"system", "halide"}, {"shape", {1}}}});
    merge_into_file(path, {{{"problem", "p25"}, {"system", "cudnn-eager-fp32"}, {"shape", {1}}}});
    std::ifstream in(path);
    json j = json::parse(in);
    EXPECT_EQ(j.size(), 2u);
    std::ofstream(path) << "{not json";
    EXPECT_THROW(merge_into_file(path, {}), Error);
    std::ofstream(path) << "{\"a\": 1}";
    EXPECT_THROW(merge_into_file(path, {}), Error);
    // The garbage is still there: a failed merge writes nothing.
    std::ifstream again(path);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(again), {}), "{\"a\": 1}");
    std::remove(path.c_str());
}

// What the harness checks before measuring: a missing file is an empty list,
// a directory or a non-list an Error naming it; a merge leaves no temporary.
TEST(BenchResults, ReadBeforeMeasuringAndNoTemporaryLeft) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(::testing::TempDir()) / "fusedconv_results_dir_test";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string path = (dir / "r.json").string();
    EXPECT_EQ(read_results_file(path), json::array());
    try {
        read_results_file(dir.string());
        ADD_FAILURE() << "a directory was read as a results file";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
    merge_into_file(path, {{{"problem", "p24"}, {"system", "halide"}, {"shape", {1}}}});
    EXPECT_EQ(read_results_file(path).size(), 1u);
    int files = 0;
    for (const auto &entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
    EXPECT_EQ(files, 1);
    fs::remove_all(dir);
}

// Before measuring, the harness creates a missing results directory (the
// merge after the runs would otherwise be the first to find that it cannot),
// or fails naming it when it cannot be created.
TEST(BenchResults, PrepareCreatesTheDirectoryOrFailsNamingIt) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(::testing::TempDir()) / "fusedconv_results_prepare_test";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path path = dir / "new" / "sub" / "r.json";
    prepare_results_file(path.string());
    EXPECT_TRUE(fs::is_directory(path.parent_path()));
    EXPECT_FALSE(fs::exists(path));  // nothing measured, nothing written
    std::ofstream(dir / "plain") << "a file, not a directory";
    const std::string blocked = (dir / "plain" / "r.json").string();
    try {
        prepare_results_file(blocked);
        ADD_FAILURE() << "a results directory under a regular file was accepted";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("cannot create the directory " +
                                             (dir / "plain").string()),
                  std::string::npos)
            << e.what();
    }
    fs::remove_all(dir);
}

}  // namespace
