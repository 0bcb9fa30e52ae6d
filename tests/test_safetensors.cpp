// safetensors interchange: round trips, dtype conversion, state_dicts of the
// four models, and one test per kind of malformed file (each must be a
// fusedconv::Error naming the file and the problem, never a crash).
#include "test_util.h"

#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "fusedconv/safetensors.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

namespace {

using namespace fusedconv;
using fusedconv::testutil::throws_error;
using json = nlohmann::json;
using State = std::map<std::string, Tensor>;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A file name of its own for each test (tests run in parallel under ctest).
std::string temp_path(const std::string &suffix = "") {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char &c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return ::testing::TempDir() + "fusedconv_st_" + std::to_string(getpid()) + "_" + name + suffix +
           ".safetensors";
}

void write_bytes(const std::string &path, const std::string &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
}

std::string read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string le64(uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
    return s;
}

template <typename T>
std::string raw(const std::vector<T> &values) {  // little-endian host
    return std::string(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(T));
}

// A safetensors file: length, header text, data buffer.
std::string file_bytes(const std::string &header, const std::string &data) {
    return le64(header.size()) + header + data;
}

Tensor random_tensor(const Shape &shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Tensor t = Tensor::empty(shape, Device::CPU);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
    return t;
}

// Same shape and the same bits (NaN payloads included).
::testing::AssertionResult identical(const Tensor &a, const Tensor &b) {
    if (a.shape() != b.shape()) {
        return ::testing::AssertionFailure()
               << "shape " << shape_string(a.shape()) << " vs " << shape_string(b.shape());
    }
    std::vector<float> va = a.to_vector(), vb = b.to_vector();
    for (size_t i = 0; i < va.size(); ++i) {
        if (std::memcmp(&va[i], &vb[i], sizeof(float)) != 0) {
            return ::testing::AssertionFailure()
                   << "element " << i << ": " << va[i] << " vs " << vb[i];
        }
    }
    return ::testing::AssertionSuccess();
}

// Loading a file of `bytes` fails with an Error naming the file and the problem.
::testing::AssertionResult load_fails(const std::string &bytes,
                                      std::vector<std::string> fragments) {
    const std::string path = temp_path();
    write_bytes(path, bytes);
    fragments.push_back(path);
    auto result = throws_error([&] { load_safetensors(path); }, fragments);
    std::remove(path.c_str());
    return result;
}

// A one-tensor header with `entry` as the tensor's entry.
std::string one_entry(const std::string &entry) { return "{\"t\":" + entry + "}"; }
const std::string kEightBytes(8, '\x01');

// ---------------------------------------------------------------- round trips

TEST(SafetensorsRoundTrip, SeveralTensorsKeepShapesAndBits) {
    State tensors;
    tensors["conv.weight"] = random_tensor({5, 3, 3, 3}, 1);
    tensors["x"] = random_tensor({1, 3, 5, 7}, 2);
    float *x = tensors["x"].data();
    x[0] = kNaN, x[1] = kInf, x[2] = -kInf, x[3] = -0.0f, x[4] = 1e-40f;  // denormal
    x[5] = std::numeric_limits<float>::max(), x[6] = std::numeric_limits<float>::lowest();
    tensors["a_bias"] = random_tensor({1}, 3);
    tensors["batch1"] = random_tensor({1, 1, 1, 1, 1}, 4);
    tensors["Zeta"] = random_tensor({2, 9}, 5);  // uppercase sorts first

    const std::string path = temp_path();
    save_safetensors(path, tensors);
    State loaded = load_safetensors(path);
    ASSERT_EQ(loaded.size(), tensors.size());
    for (const auto &[name, t] : tensors) {
        ASSERT_TRUE(loaded.count(name)) << name;
        EXPECT_EQ(loaded[name].device(), Device::CPU);
        EXPECT_TRUE(identical(loaded[name], t)) << name;
    }

    // The layout the format recommends: header padded with spaces to a
    // multiple of 8, F32 entries, keys sorted, data contiguous in key order.
    const std::string bytes = read_bytes(path);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i)
        n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    EXPECT_EQ(n % 8, 0u);
    const std::string text = bytes.substr(8, n);
    const size_t close = text.rfind('}');
    ASSERT_NE(close, std::string::npos);
    EXPECT_EQ(text.find_first_not_of(' ', close + 1), std::string::npos) << "padding: " << text;
    json header = json::parse(text);
    uint64_t offset = 0;
    std::string previous;
    for (const auto &[name, t] : tensors) {  // std::map: sorted
        EXPECT_LT(previous, name);
        previous = name;
        const json &e = header.at(name);
        EXPECT_EQ(e.at("dtype"), "F32");
        EXPECT_EQ(e.at("shape").get<Shape>(), t.shape());
        const uint64_t bytes_of_t = static_cast<uint64_t>(t.numel()) * 4;
        EXPECT_EQ(e.at("data_offsets"), json::array({offset, offset + bytes_of_t})) << name;
        offset += bytes_of_t;
    }
    EXPECT_EQ(bytes.size(), 8 + n + offset);
    std::remove(path.c_str());
}

TEST(SafetensorsRoundTrip, EmptyMapAndOverwrite) {
    const std::string path = temp_path();
    save_safetensors(path, {{"big", random_tensor({64, 64}, 1)}});
    save_safetensors(path, {});  // truncates the larger file
    EXPECT_TRUE(load_safetensors(path).empty());
    EXPECT_EQ(read_bytes(path).size() % 8, 0u);
    std::remove(path.c_str());
}

TEST(SafetensorsRoundTrip, GpuTensorIsSavedFromTheHost) {
    if (!gpu_available())
        GTEST_SKIP() << "no usable CUDA device (" << gpu_unavailable_reason() << ")";
    const std::string path = temp_path();
    Tensor t = random_tensor({1, 3, 5, 7}, 9);
    save_safetensors(path, {{"g", t.to(Device::GPU)}});
    EXPECT_TRUE(identical(load_safetensors(path).at("g"), t));
    std::remove(path.c_str());
}

TEST(SafetensorsSave, RejectsReservedNameUndefinedTensorAndBadPath) {
    EXPECT_TRUE(throws_error(
        [&] {
            save_safetensors(temp_path(), {{"__metadata__", random_tensor({2}, 1)}});
        },
        {"__metadata__", "reserved"}));
    EXPECT_TRUE(throws_error(
        [&] {
            save_safetensors(temp_path(), {{"w", Tensor()}});
        },
        {"'w'", "undefined"}));
    const std::string bad = ::testing::TempDir() + "no_such_dir_fusedconv/x.safetensors";
    EXPECT_TRUE(throws_error(
        [&] {
            save_safetensors(bad, {{"w", random_tensor({2}, 1)}});
        },
        {bad, "cannot open for writing"}));
}

// Files named <path>.tmp-* left beside `path` (there must be none).
int leftover_temporaries(const std::string &path) {
    namespace fs = std::filesystem;
    const fs::path p(path);
    const std::string prefix = p.filename().string() + ".tmp-";
    int n = 0;
    for (const auto &entry : fs::directory_iterator(p.parent_path())) {
        if (entry.path().filename().string().rfind(prefix, 0) == 0) ++n;
    }
    return n;
}

// A save that fails part-way (here the file size limit, as a full disk
// would) leaves the previous file as it was and no temporary file.
TEST(SafetensorsSave, FailedWriteKeepsThePreviousFile) {
    const std::string path = temp_path();
    const Tensor small = random_tensor({4}, 1);
    save_safetensors(path, {{"w", small}});
    std::fflush(nullptr);
    const pid_t child = fork();
    ASSERT_NE(child, -1);
    if (child == 0) {
        // The child only: a 4 KB file size limit, reported as EFBIG, not a signal.
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &limit);
        try {
            save_safetensors(path, {{"w", random_tensor({64, 64}, 2)}});
        } catch (const Error &e) {
            const std::string what = e.what();
            _exit(what.find("write failed") != std::string::npos &&
                          what.find(path) != std::string::npos
                      ? 0
                      : 2);
        }
        _exit(1);  // no error: the limit did not bite
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the save did not fail; 2: its message";
    EXPECT_TRUE(identical(load_safetensors(path).at("w"), small));
    EXPECT_EQ(leftover_temporaries(path), 0);
    std::remove(path.c_str());
}

// What is not a regular file is refused before anything is written (a FIFO
// would block the write, a device or directory would be replaced).
TEST(SafetensorsSave, RefusesToReplaceWhatIsNotARegularFile) {
    const std::string fifo = temp_path("_fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_TRUE(throws_error([&] { save_safetensors(fifo, {{"w", random_tensor({2}, 1)}}); },
                             {fifo, "not a regular file"}));
    EXPECT_TRUE(std::filesystem::is_fifo(fifo));
    EXPECT_EQ(leftover_temporaries(fifo), 0);
    std::remove(fifo.c_str());
    const std::string dir = temp_path("_dir");
    std::filesystem::create_directory(dir);
    EXPECT_TRUE(throws_error([&] { save_safetensors(dir, {{"w", random_tensor({2}, 1)}}); },
                             {dir, "not a regular file"}));
    EXPECT_TRUE(std::filesystem::is_directory(dir));
    std::filesystem::remove(dir);
}

// A symbolic link is followed: its target gets the new content and stays a
// file, the link stays a link. An existing file keeps its permission bits.
TEST(SafetensorsSave, FollowsLinksAndKeepsPermissions) {
    namespace fs = std::filesystem;
    const std::string target = temp_path("_target"), link = temp_path("_link");
    save_safetensors(target, {{"w", random_tensor({2}, 1)}});
    ASSERT_EQ(chmod(target.c_str(), 0640), 0);
    fs::create_symlink(target, link);
    const Tensor t = random_tensor({3, 2}, 5);
    save_safetensors(link, {{"v", t}});
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_TRUE(identical(load_safetensors(target).at("v"), t));
    struct stat st {};
    ASSERT_EQ(stat(target.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    std::remove(link.c_str());
    std::remove(target.c_str());
}

// load_safetensors reads at most 64 dimensions; save writes no file it
// could not read back.
TEST(SafetensorsSave, RejectsMoreDimensionsThanLoadReads) {
    const std::string path = temp_path();
    EXPECT_TRUE(throws_error(
        [&] { save_safetensors(path, {{"deep", Tensor::empty(Shape(65, 1), Device::CPU)}}); },
        {path, "'deep'", "rank 65", "at most 64"}));
    EXPECT_FALSE(std::filesystem::exists(path));
    const Tensor ok = Tensor::empty(Shape(64, 1), Device::CPU);
    save_safetensors(path, {{"deep", ok}});
    EXPECT_EQ(load_safetensors(path).at("deep").shape(), ok.shape());
    std::remove(path.c_str());
}

// ------------------------------------------------------- dtype conversions

TEST(SafetensorsDtypes, F64F16Bf16ConvertToFloat32) {
    const std::vector<double> f64 = {1.5,
                                     -1e-3,
                                     1e300,
                                     -1e300,
                                     std::nan(""),
                                     0x1.fffffefp127,  // past FLT_MAX, below the midpoint
                                     0x1.ffffffp127,   // the midpoint: rounds to inf
                                     1e-50};
    const std::vector<float> f64_want = {
        1.5f, -1e-3f, kInf, -kInf, kNaN, std::numeric_limits<float>::max(), kInf, 0.0f};
    const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x0400,
                                       0x7C00, 0xFC00, 0x7E00, 0x8000, 0x3555};
    const std::vector<float> f16_want = {1.0f,
                                         -2.0f,
                                         65504.0f,
                                         std::ldexp(1.0f, -24),
                                         1023 * std::ldexp(1.0f, -24),
                                         std::ldexp(1.0f, -14),
                                         kInf,
                                         -kInf,
                                         kNaN,
                                         -0.0f,
                                         0.333251953125f};
    const std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x4049, 0x7F80, 0xFF80,
                                        0x7FC0, 0x0001, 0x8000, 0x7F7F};
    const std::vector<float> bf16_want = {1.0f,
                                          -2.0f,
                                          3.140625f,
                                          kInf,
                                          -kInf,
                                          kNaN,
                                          std::ldexp(1.0f, -133),
                                          -0.0f,
                                          3.3895313892515355e38f};
    const std::vector<float> f32 = {0.25f, -7.0f, 1e-40f, 3.0f, 4.0f, 5.0f};

    // Data deliberately not in key order: offsets are honoured.
    std::string data = raw(bf16);
    const size_t bf16_end = data.size();
    data += raw(f32);
    const size_t f32_end = data.size();
    data += raw(f16);
    const size_t f16_end = data.size();
    data += raw(f64);
    auto entry = [](const char *dtype, json shape, size_t begin, size_t end) {
        json e = json::object();
        e["dtype"] = dtype;
        e["shape"] = std::move(shape);
        e["data_offsets"] = json::array({begin, end});
        return e;
    };
    json header = json::object();
    header["__metadata__"] = json::object({{"format", "pt"}});
    header["bf"] = entry("BF16", json::array({3, 3}), 0, bf16_end);
    header["f"] = entry("F32", json::array({1, 2, 3}), bf16_end, f32_end);
    header["h"] = entry("F16", json::array({11}), f32_end, f16_end);
    header["d"] = entry("F64", json::array({2, 4}), f16_end, data.size());
    const std::string path = temp_path();
    write_bytes(path, file_bytes(header.dump(), data));
    State t = load_safetensors(path);
    ASSERT_EQ(t.size(), 4u);  // no "__metadata__" tensor
    EXPECT_TRUE(identical(t.at("bf"), Tensor::from_vector({3, 3}, bf16_want)));
    EXPECT_TRUE(identical(t.at("f"), Tensor::from_vector({1, 2, 3}, f32)));
    EXPECT_TRUE(identical(t.at("d"), Tensor::from_vector({2, 4}, f64_want)));
    // NaN compares by bits above only when the payloads agree: check h's NaN apart.
    std::vector<float> h = t.at("h").to_vector();
    ASSERT_EQ(h.size(), f16_want.size());
    for (size_t i = 0; i < h.size(); ++i) {
        if (std::isnan(f16_want[i])) {
            EXPECT_TRUE(std::isnan(h[i])) << i;
        } else {
            EXPECT_EQ(h[i], f16_want[i]) << i;
            EXPECT_EQ(std::signbit(h[i]), std::signbit(f16_want[i])) << i;
        }
    }
    std::remove(path.c_str());
}

TEST(SafetensorsDtypes, OtherDtypesAreRejectedByName) {
    for (const char *dtype : {"I32", "I64", "U8", "BOOL", "F8_E4M3", "f32"}) {
        EXPECT_TRUE(load_fails(file_bytes(one_entry(std::string("{\"dtype\":\"") + dtype +
                                                    "\",\"shape\":[2],\"data_offsets\":[0,8]}"),
                                          kEightBytes),
                               {"'t'", std::string("'") + dtype + "'", "not supported"}));
    }
}

// --------------------------------------------------------------- state_dicts

struct ModelCase {
    std::string id;
    std::function<std::unique_ptr<Model>(uint64_t seed)> make;
    // set_parameters with the state's tensors, the direct way.
    std::function<void(Model &, const State &)> set;
    Shape input;
    std::map<std::string, Shape> params;
};

// Readable test names in ctest.
void PrintTo(const ModelCase &c, std::ostream *os) { *os << c.id; }

// p83 with a clamp that lets GroupNorm reach the output (the default
// configuration outputs only zeros).
std::unique_ptr<Model> make_p83(uint64_t seed) {
    auto m = std::make_unique<Conv3dGroupNormMinClampDropout>(3, 8, 3, 4, 0.0f, 1.0f, 0.2f,
                                                              DeviceChoice::CPU, seed);
    m->set_min_value(0.5f);
    m->set_clamp(-1.0f, 0.25f);
    return m;
}

std::vector<ModelCase> model_cases() {
    return {
        {"p24",
         [](uint64_t s) {
             return std::make_unique<Conv3dMinSoftmax>(3, 5, 3, 2, DeviceChoice::CPU, s);
         },
         [](Model &m, const State &st) {
             dynamic_cast<Conv3dMinSoftmax &>(m).set_parameters(st.at("conv.weight"),
                                                                st.at("conv.bias"));
         },
         {1, 3, 5, 6, 7},
         {{"conv.weight", {5, 3, 3, 3, 3}}, {"conv.bias", {5}}}},
        {"p25",
         [](uint64_t s) {
             return std::make_unique<Conv2dMinTanhTanh>(4, 6, 3, DeviceChoice::CPU, s);
         },
         [](Model &m, const State &st) {
             dynamic_cast<Conv2dMinTanhTanh &>(m).set_parameters(st.at("conv.weight"),
                                                                 st.at("conv.bias"));
         },
         {1, 4, 7, 9},
         {{"conv.weight", {6, 4, 3, 3}}, {"conv.bias", {6}}}},
        {"p32",
         [](uint64_t s) {
             return std::make_unique<Conv2dScaleMin>(4, 6, 3, -1.5f, DeviceChoice::CPU, s);
         },
         [](Model &m, const State &st) {
             dynamic_cast<Conv2dScaleMin &>(m).set_parameters(st.at("conv.weight"),
                                                              st.at("conv.bias"));
         },
         {2, 4, 6, 5},
         {{"conv.weight", {6, 4, 3, 3}}, {"conv.bias", {6}}}},
        {"p83",
         make_p83,
         [](Model &m, const State &st) {
             dynamic_cast<Conv3dGroupNormMinClampDropout &>(m).set_parameters(
                 st.at("conv.weight"), st.at("conv.bias"), st.at("norm.weight"),
                 st.at("norm.bias"));
         },
         {1, 3, 5, 6, 7},
         {{"conv.weight", {8, 3, 3, 3, 3}},
          {"conv.bias", {8}},
          {"norm.weight", {8}},
          {"norm.bias", {8}}}},
    };
}

class StateDict : public ::testing::TestWithParam<ModelCase> {
protected:
    State random_state(uint64_t seed) const {
        State st;
        for (const auto &[name, shape] : GetParam().params) st[name] = random_tensor(shape, seed++);
        return st;
    }
};

TEST_P(StateDict, LoadMatchesSetParametersAndRoundTripsThroughAFile) {
    const ModelCase &c = GetParam();
    const State state = random_state(100);
    const Tensor input = random_tensor(c.input, 7, 0.0f, 1.0f);

    auto loaded = c.make(1);
    const Tensor before = loaded->forward(input);
    load_state_dict(*loaded, state);
    auto direct = c.make(2);
    c.set(*direct, state);
    const Tensor got = loaded->forward(input);
    EXPECT_TRUE(identical(got, direct->forward(input)));
    EXPECT_FALSE(identical(got, before)) << "the parameters did not change the output";

    // state_dict returns the same names and values, as copies.
    State out = state_dict(*loaded);
    ASSERT_EQ(out.size(), c.params.size());
    for (const auto &[name, t] : state) EXPECT_TRUE(identical(out.at(name), t)) << name;
    out.at("conv.bias").data()[0] += 1.0f;
    EXPECT_TRUE(identical(loaded->forward(input), got)) << "state_dict shares storage";

    // Through a file, as PyTorch would hand it over.
    const std::string path = temp_path();
    save_safetensors(path, state_dict(*loaded));
    auto from_file = c.make(3);
    load_state_dict(*from_file, load_safetensors(path));
    EXPECT_TRUE(identical(from_file->forward(input), got));
    std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, StateDict, ::testing::ValuesIn(model_cases()),
                         [](const ::testing::TestParamInfo<ModelCase> &info) {
                             return info.param.id;
                         });

TEST(StateDictStrict, MissingKeyIsNamedWithTheKeysPresent) {
    Conv2dMinTanhTanh m(4, 6, 3, DeviceChoice::CPU, 0);
    EXPECT_TRUE(throws_error(
        [&] {
            load_state_dict(m, {{"conv.weight", random_tensor({6, 4, 3, 3}, 1)}});
        },
        {"Conv2dMinTanhTanh", "missing", "'conv.bias'", "keys present: 'conv.weight'"}));
    Conv3dGroupNormMinClampDropout p83(3, 8, 3, 4, 0.0f, 1.0f, 0.2f, DeviceChoice::CPU, 0);
    State st = state_dict(p83);
    st.erase("norm.bias");
    EXPECT_TRUE(throws_error([&] { load_state_dict(p83, st); }, {"missing", "'norm.bias'"}));
}

TEST(StateDictStrict, UnexpectedKeyIsNamed) {
    Conv2dScaleMin m(4, 6, 3, 2.0f, DeviceChoice::CPU, 0);
    State st = state_dict(m);
    st["norm.weight"] = random_tensor({6}, 1);
    EXPECT_TRUE(throws_error([&] { load_state_dict(m, st); },
                             {"Conv2dScaleMin", "unexpected", "'norm.weight'"}));
}

TEST(StateDictStrict, WrongShapeIsNamedAndLeavesTheModelUnchanged) {
    Conv3dGroupNormMinClampDropout m(3, 8, 3, 4, 0.0f, 1.0f, 0.2f, DeviceChoice::CPU, 0);
    const State before = state_dict(m);
    State st = before;
    st["conv.weight"] = random_tensor({8, 3, 3, 3, 3}, 1);  // fine
    st["norm.weight"] = random_tensor({4}, 2);              // wrong
    EXPECT_TRUE(throws_error([&] { load_state_dict(m, st); },
                             {"Conv3dGroupNormMinClampDropout", "norm.weight", "(4,)", "(8,)"}));
    for (const auto &[name, t] : before) EXPECT_TRUE(identical(state_dict(m).at(name), t)) << name;
    Conv3dMinSoftmax p24(3, 5, 3, 2, DeviceChoice::CPU, 0);
    EXPECT_TRUE(throws_error(
        [&] {
            load_state_dict(p24, {{"conv.weight", random_tensor({5, 3, 3, 3}, 1)},
                                  {"conv.bias", random_tensor({5}, 2)}});
        },
        {"conv.weight", "(5, 3, 3, 3)", "(5, 3, 3, 3, 3)"}));
}

// ----------------------------------------------------------- malformed files

TEST(SafetensorsMalformed, MissingFile) {
    const std::string path = temp_path("_missing");
    EXPECT_TRUE(
        throws_error([&] { load_safetensors(path); }, {path, "cannot open", "No such file"}));
}

TEST(SafetensorsMalformed, Directory) {
    const std::string dir = ::testing::TempDir();
    EXPECT_TRUE(throws_error([&] { load_safetensors(dir); }, {dir, "directory"}));
}

TEST(SafetensorsMalformed, ShorterThanTheLengthField) {
    EXPECT_TRUE(load_fails("", {"0 bytes", "shorter than the 8-byte header length"}));
    EXPECT_TRUE(load_fails("abcde", {"5 bytes", "shorter than the 8-byte header length"}));
}

TEST(SafetensorsMalformed, HeaderLongerThanTheFile) {
    EXPECT_TRUE(load_fails(le64(1000) + "{}",
                           {"header length 1000", "larger than the rest of the file (2 bytes)"}));
}

TEST(SafetensorsMalformed, AbsurdHeaderLength) {
    EXPECT_TRUE(load_fails(le64(uint64_t{1} << 62) + "{}", {"absurd", "100 MB"}));
    EXPECT_TRUE(load_fails(le64(~uint64_t{0}) + "{}", {"absurd"}));
    EXPECT_TRUE(load_fails(le64(100'000'001) + "{}", {"absurd"}));
}

TEST(SafetensorsMalformed, HeaderNotJson) {
    EXPECT_TRUE(load_fails(file_bytes("{not json", ""), {"not valid JSON"}));
    EXPECT_TRUE(load_fails(file_bytes("", ""), {"not valid JSON"}));
    EXPECT_TRUE(load_fails(file_bytes("{} trailing", ""), {"not valid JSON"}));
    EXPECT_TRUE(load_fails(file_bytes("{\"\xff\xfe\":1}", ""), {"not valid JSON"}));  // not UTF-8
    EXPECT_TRUE(load_fails(file_bytes(std::string("{\"a\"\0:1}", 8), ""), {"NUL byte at offset 12"}));
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
    EXPECT_TRUE(load_fails(file_bytes("[1, 2]", ""), {"JSON array", "not a JSON object"}));
    EXPECT_TRUE(load_fails(file_bytes("\"F32\"", ""), {"JSON string", "not a JSON object"}));
    EXPECT_TRUE(load_fails(file_bytes("null", ""), {"not a JSON object"}));
}

TEST(SafetensorsMalformed, EntryNotAnObject) {
    EXPECT_TRUE(load_fails(file_bytes(one_entry("[0, 8]"), kEightBytes),
                           {"'t'", "JSON array", "expected an object"}));
    EXPECT_TRUE(load_fails(file_bytes("{\"__metadata__\": 5}", ""),
                           {"__metadata__", "expected an object"}));
}

TEST(SafetensorsMalformed, EntryMissingAField) {
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"shape\":[2],\"data_offsets\":[0,8]}"), kEightBytes),
                   {"'t'", "no \"dtype\" field"}));
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"dtype\":\"F32\",\"data_offsets\":[0,8]}"), kEightBytes),
                   {"'t'", "no \"shape\" field"}));
    EXPECT_TRUE(load_fails(file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[2]}"), kEightBytes),
                           {"'t'", "no \"data_offsets\" field"}));
}

TEST(SafetensorsMalformed, EntryFieldsOfTheWrongType) {
    auto entry = [](const std::string &dtype, const std::string &shape,
                    const std::string &offsets) {
        return file_bytes(one_entry("{\"dtype\":" + dtype + ",\"shape\":" + shape +
                                    ",\"data_offsets\":" + offsets + "}"),
                          kEightBytes);
    };
    EXPECT_TRUE(
        load_fails(entry("5", "[2]", "[0,8]"), {"'t'", "\"dtype\" is 5", "expected a string"}));
    EXPECT_TRUE(
        load_fails(entry("\"F32\"", "\"2\"", "[0,8]"), {"'t'", "\"shape\"", "expected an array"}));
    EXPECT_TRUE(load_fails(entry("\"F32\"", "{\"n\":2}", "[0,8]"),
                           {"'t'", "\"shape\"", "expected an array"}));
    EXPECT_TRUE(load_fails(entry("\"F32\"", "[2]", "{\"begin\":0}"),
                           {"'t'", "\"data_offsets\"", "[begin, end]"}));
    EXPECT_TRUE(
        load_fails(entry("\"F32\"", "[2]", "[8]"), {"'t'", "\"data_offsets\"", "[begin, end]"}));
    EXPECT_TRUE(load_fails(entry("\"F32\"", "[2]", "[0,8,8]"),
                           {"'t'", "\"data_offsets\"", "[begin, end]"}));
    EXPECT_TRUE(load_fails(entry("\"F32\"", "[2]", "[\"0\",\"8\"]"),
                           {"'t'", "data_offsets", "non-numeric"}));
    EXPECT_TRUE(load_fails(entry("\"F32\"", "[2]", "[-8,0]"), {"'t'", "data_offsets", "negative"}));
    EXPECT_TRUE(
        load_fails(entry("\"F32\"", "[2]", "[0,8.5]"), {"'t'", "data_offsets", "non-integer"}));
}

TEST(SafetensorsMalformed, NegativeOrNonIntegerShape) {
    auto with_shape = [](const std::string &shape) {
        return file_bytes(
            one_entry("{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,8]}"),
            kEightBytes);
    };
    EXPECT_TRUE(load_fails(with_shape("[-2]"), {"'t'", "shape", "negative value -2"}));
    EXPECT_TRUE(load_fails(with_shape("[2, -1]"), {"'t'", "negative value -1"}));
    EXPECT_TRUE(load_fails(with_shape("[2.5]"), {"'t'", "non-integer value 2.5"}));
    EXPECT_TRUE(load_fails(with_shape("[2.0]"), {"'t'", "non-integer"}));
    EXPECT_TRUE(load_fails(with_shape("[\"2\"]"), {"'t'", "non-numeric"}));
    EXPECT_TRUE(load_fails(with_shape("[null]"), {"'t'", "non-numeric"}));
    EXPECT_TRUE(load_fails(with_shape("[9223372036854775808]"), {"'t'", "past int64"}));
    EXPECT_TRUE(load_fails(with_shape("[1e30]"), {"'t'", "non-integer"}));
}

TEST(SafetensorsMalformed, OffsetsOutsideTheDataBuffer) {
    EXPECT_TRUE(load_fails(
        file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}"),
                   kEightBytes),
        {"'t'", "run past the end of the data buffer (8 bytes)"}));
    // Offsets near 2^64: no wrap-around.
    EXPECT_TRUE(load_fails(file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
                                                "[18446744073709551607,18446744073709551615]}"),
                                      kEightBytes),
                           {"'t'", "run past the end"}));
    // A truncated data buffer.
    EXPECT_TRUE(load_fails(
        file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), "1234"),
        {"'t'", "run past the end of the data buffer (4 bytes)"}));
}

TEST(SafetensorsMalformed, OffsetsEndBeforeBegin) {
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}"),
                              kEightBytes),
                   {"'t'", "[8,0]", "end before"}));
}

TEST(SafetensorsMalformed, OffsetsDisagreeWithShapeAndDtype) {
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"),
                              kEightBytes),
                   {"'t'", "hold 8 bytes", "needs 12"}));
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}"),
                              kEightBytes),
                   {"'t'", "hold 8 bytes", "F64 needs 16"}));
}

TEST(SafetensorsMalformed, ZeroDimensionalAndEmptyTensors) {
    EXPECT_TRUE(load_fails(
        file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}"), "abcd"),
        {"'t'", "0-dimensional", "at least one dimension"}));
    EXPECT_TRUE(load_fails(
        file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]}"), ""),
        {"'t'", "zero size", "positive sizes"}));
}

TEST(SafetensorsMalformed, ElementCountOverflows) {
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],"
                                        "\"data_offsets\":[0,8]}"),
                              kEightBytes),
                   {"'t'", "element count", "overflows int64"}));
    // Fits int64 as elements, not as bytes.
    EXPECT_TRUE(
        load_fails(file_bytes(one_entry("{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
                                        "\"data_offsets\":[0,8]}"),
                              kEightBytes),
                   {"'t'", "byte size", "overflows"}));
}

TEST(SafetensorsMalformed, DuplicateNames) {
    const std::string e = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
    const std::string e2 = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}";
    EXPECT_TRUE(load_fails(file_bytes("{\"t\":" + e + ",\"t\":" + e2 + "}", kEightBytes),
                           {"'t'", "appears twice"}));
}

TEST(SafetensorsMalformed, OverlapsAndHoles) {
    const std::string a = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    EXPECT_TRUE(load_fails(
        file_bytes("{" + a + ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                   kEightBytes),
        {"'a'", "'b'", "overlap"}));
    EXPECT_TRUE(load_fails(
        file_bytes("{" + a + ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   kEightBytes + "1234"),
        {"'a'", "'b'", "overlap"}));
    EXPECT_TRUE(load_fails(
        file_bytes("{" + a + ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
                   kEightBytes + kEightBytes),
        {"bytes [8, 12)", "no holes"}));
    EXPECT_TRUE(load_fails(file_bytes("{" + a + "}", kEightBytes + "xx"),
                           {"10 bytes", "first 8", "trailing"}));
}

// nlohmann's parser would stop at the NUL and ignore the rest.
TEST(SafetensorsMalformed, NulByteInTheHeader) {
    EXPECT_TRUE(load_fails(file_bytes(std::string("{}\0garbage!!", 13), ""),
                           {"NUL byte at offset 10"}));
}

TEST(SafetensorsMalformed, HostileJsonIsBounded) {
    // 1 MB of nesting and a huge array: refused while parsing.
    const std::string deep =
        "{\"__metadata__\":" + std::string(1 << 20, '[') + std::string(1 << 20, ']') + "}";
    EXPECT_TRUE(load_fails(file_bytes(deep, ""), {"nests JSON deeper"}));
    std::string wide = "{\"__metadata__\":{\"k\":[0";
    for (int i = 0; i < 100000; ++i) wide += ",0";
    wide += "]}}";
    EXPECT_TRUE(load_fails(file_bytes(wide, ""), {"array of more than 64 elements"}));
}

// Every prefix of a valid file, and files with corrupted bytes, load or fail
// with an Error: never a crash, a hang or another exception.
TEST(SafetensorsMalformed, TruncatedAndCorruptedFilesNeverCrash) {
    const std::string path = temp_path("_valid");
    save_safetensors(
        path, {{"conv.bias", random_tensor({3}, 1)}, {"conv.weight", random_tensor({3, 2, 2}, 2)}});
    const std::string valid = read_bytes(path);
    std::remove(path.c_str());
    for (size_t n = 0; n < valid.size(); ++n) {
        EXPECT_TRUE(load_fails(valid.substr(0, n), {})) << "prefix of " << n << " bytes";
    }
    std::mt19937_64 rng(3);
    const std::string bad_path = temp_path("_corrupt");
    int loaded = 0, rejected = 0;
    for (int trial = 0; trial < 400; ++trial) {
        std::string bytes = valid;
        const int flips = 1 + static_cast<int>(rng() % 3);
        for (int f = 0; f < flips; ++f) {
            // Mostly the length and the header, where the structure is.
            const size_t limit = rng() % 4 ? std::min<size_t>(bytes.size(), 8 + 160) : bytes.size();
            bytes[rng() % limit] = static_cast<char>(rng());
        }
        write_bytes(bad_path, bytes);
        try {
            load_safetensors(bad_path);
            ++loaded;
        } catch (const Error &) {
            ++rejected;
        } catch (const std::exception &e) {
            ADD_FAILURE() << "trial " << trial << ": not a fusedconv::Error: " << e.what();
        }
    }
    std::remove(bad_path.c_str());
    EXPECT_GT(rejected, 0);
    std::printf("corrupted files: %d loaded (data bytes changed), %d rejected\n", loaded, rejected);
}

}  // namespace
