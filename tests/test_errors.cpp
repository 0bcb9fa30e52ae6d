// Bad input to every runtime entry point: each is refused with a
// fusedconv::Error whose message names the offending shape or value, before
// any work (outputs stay untouched, the model stays usable). Extends
// test_models.cpp's ModelErrors and test_safetensors.cpp's state_dict checks
// without repeating them. GPU-only cases skip with a message without a GPU.
#include "test_util.h"

#include "fusedconv/device.h"
#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "fusedconv/tensor.h"
#include "halide_call.h"  // runtime/src: how pipeline errors become Errors

#include <HalideRuntime.h>

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <climits>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;

// Halide's 32-bit indexing: at most 2^31 - 1 bytes per buffer.
constexpr int64_t kMaxElements = (int64_t{1} << 31) / 4 - 1;  // 536870911 = 233 * 1103 * 2089
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

std::string str(int64_t v) { return std::to_string(v); }

// ================================================================ tensors

TEST(TensorErrors, EmptyRejectsNoDimensionsAndNonPositiveSizes) {
    EXPECT_TRUE(throws_error([] { Tensor::empty({}); }, {"()", "no dimensions"}));
    const Shape bad[] = {{0}, {-1}, {3, -2}, {0, 5, 5}, {2, 3, 4, 0},
                         {std::numeric_limits<int64_t>::min()}, {4, -4, 4}};
    for (const Shape &s : bad) {
        SCOPED_TRACE(shape_string(s));
        EXPECT_TRUE(throws_error([&] { Tensor::empty(s); }, {shape_string(s), "non-positive"}));
        EXPECT_TRUE(throws_error([&] { Tensor::empty(s, Device::GPU); },
                                 {shape_string(s), "non-positive"}));  // before any GPU use
        std::vector<float> storage(4, 1.0f);
        EXPECT_TRUE(throws_error([&] { Tensor::wrap_host(storage.data(), s); },
                                 {shape_string(s), "non-positive"}));
    }
}

TEST(TensorErrors, ShapesPastHalidesIndexingAreRefusedWithoutOverflow) {
    // One element past the limit, products past it, and products that would
    // overflow int64 if multiplied naively: all refused, the shape named.
    const Shape bad[] = {{kMaxElements + 1},
                         {int64_t{1} << 15, int64_t{1} << 14},
                         {2, 233, 1103, 2089},
                         {kI64Max},
                         {kI64Max, 2},
                         {2, kI64Max},
                         {int64_t{1} << 32, int64_t{1} << 32},
                         {3, 1 << 20, 1 << 20, 1 << 20, 1 << 20}};
    for (const Shape &s : bad) {
        SCOPED_TRACE(shape_string(s));
        EXPECT_TRUE(throws_error([&] { Tensor::empty(s); }, {shape_string(s), "32-bit"}));
        EXPECT_TRUE(throws_error([&] { Tensor::empty(s, Device::GPU); }, {shape_string(s), "32-bit"}));
        float dummy = 0.0f;  // never read: the shape is refused first
        EXPECT_TRUE(throws_error([&] { Tensor::wrap_host(&dummy, s); }, {shape_string(s), "32-bit"}));
        EXPECT_TRUE(throws_error([&] { Tensor::wrap_device(&dummy, s); },
                                 {shape_string(s), "32-bit"}));
    }
}

// A host allocation that fails is an Error naming the shape, not a crash:
// in a child process whose data segment is capped at 1 GiB, a 2 GiB tensor.
// AddressSanitizer reserves its own memory in ways the cap breaks, so the
// sanitizer build skips this test.
[[noreturn]] void allocate_past_a_capped_data_segment() {
    const rlim_t cap = rlim_t{1} << 30;
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = cap;
    if (setrlimit(RLIMIT_DATA, &limit) != 0) std::exit(3);
    try {
        Tensor::empty({kMaxElements});
    } catch (const Error &e) {
        std::cerr << e.what() << std::endl;
        std::exit(0);
    }
    std::exit(2);
}

TEST(TensorErrors, HostAllocationFailureIsAnError) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer build: a capped data segment breaks its allocator";
#else
    EXPECT_EXIT(allocate_past_a_capped_data_segment(), ::testing::ExitedWithCode(0),
                "allocating a CPU tensor of shape \\(" + std::to_string(kMaxElements) +
                    ",\\) \\(" + std::to_string(kMaxElements * 4) +
                    " bytes\\): out of host memory");
#endif
}

TEST(TensorErrors, FromVectorAndNullPointers) {
    EXPECT_TRUE(throws_error([] { Tensor::from_vector({2, 3}, std::vector<float>(5)); },
                             {"(2, 3)", "needs 6 values, got 5"}));
    EXPECT_TRUE(throws_error([] { Tensor::from_vector({2, 3}, std::vector<float>(7)); },
                             {"(2, 3)", "got 7"}));
    EXPECT_TRUE(throws_error([] { Tensor::from_vector({1}, {}); }, {"(1,)", "got 0"}));
    EXPECT_TRUE(throws_error([] { Tensor::from_vector({0}, {}); }, {"(0,)", "non-positive"}));
    EXPECT_TRUE(throws_error([] { Tensor::wrap_host(nullptr, {2, 2}); }, {"null", "(2, 2)"}));
    EXPECT_TRUE(throws_error([] { Tensor::wrap_device(nullptr, {2, 2}); }, {"null", "(2, 2)"}));
}

TEST(TensorErrors, UndefinedTensorIsRejectedByEveryAccessor) {
    Tensor t;
    const Tensor &ct = t;
    EXPECT_FALSE(t.defined());
    // Each message names the call (dim and numel go through shape).
    const std::vector<std::pair<const char *, std::function<void()>>> uses = {
        {"Tensor::shape()", [&] { ct.shape(); }},   {"Tensor::shape()", [&] { ct.dim(); }},
        {"Tensor::shape()", [&] { ct.numel(); }},   {"Tensor::device()", [&] { ct.device(); }},
        {"Tensor::to()", [&] { ct.to(Device::CPU); }},
        {"Tensor::to()", [&] { ct.to(Device::GPU); }},
        {"Tensor::clone()", [&] { ct.clone(); }},   {"Tensor::to_vector()", [&] { ct.to_vector(); }},
        {"Tensor::data()", [&] { t.data(); }},      {"Tensor::data()", [&] { ct.data(); }},
        {"Tensor::device_data()", [&] { ct.device_data(); }},
        {"Tensor::raw()", [&] { ct.raw(); }},
    };
    for (const auto &use : uses) {
        EXPECT_TRUE(throws_error(use.second, {use.first, "undefined"})) << use.first;
    }
}

TEST(TensorErrors, DevicePointerOfAHostTensor) {
    Tensor t = random_tensor({2, 3}, 1);
    EXPECT_TRUE(throws_error([&] { t.device_data(); }, {"(2, 3)", "is on the CPU"}));
}

// ================================================================ devices

TEST(DeviceErrors, UnknownDeviceNamesAreRejectedByName) {
    for (const char *name : {"tpu", "", "GPU", "Cpu", "cuda:0", " cpu", "cpu ", "gpu0", "-1"}) {
        SCOPED_TRACE(std::string("'") + name + "'");
        EXPECT_TRUE(throws_error([&] { parse_device_choice(name); },
                                 {std::string("'") + name + "'", "auto, cpu or gpu"}));
    }
    EXPECT_EQ(parse_device_choice("auto"), DeviceChoice::Auto);
    EXPECT_EQ(parse_device_choice("cpu"), DeviceChoice::CPU);
    EXPECT_EQ(parse_device_choice("gpu"), DeviceChoice::GPU);
    EXPECT_EQ(parse_device_choice("cuda"), DeviceChoice::GPU);
}

TEST(DeviceErrors, GpuRequestsWithoutAGpuFailClearly) {
    if (gpu_available()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
    const std::string why = gpu_unavailable_reason();
    EXPECT_FALSE(why.empty());
    EXPECT_TRUE(throws_error([] { resolve(DeviceChoice::GPU); }, {"gpu", why}));
    EXPECT_EQ(resolve(DeviceChoice::Auto), Device::CPU);
    EXPECT_TRUE(throws_error([] { Tensor::empty({2, 3}, Device::GPU); }, {"GPU", why}));
    Tensor host_t = random_tensor({2, 3}, 2);
    EXPECT_TRUE(throws_error([&] { host_t.to(Device::GPU); }, {"GPU", why}));
    float dummy = 0.0f;  // a non-null pointer that must never be dereferenced
    EXPECT_TRUE(throws_error([&] { Tensor::wrap_device(&dummy, {1}); }, {"GPU", why}));
    EXPECT_TRUE(throws_error([] { gpu_info(); }, {"GPU unavailable", why}));
    size_t free_b = 0, total_b = 0;
    EXPECT_TRUE(throws_error([&] { gpu_memory(&free_b, &total_b); }, {"GPU unavailable", why}));
    EXPECT_NO_THROW(synchronize());                 // documented no-op without a GPU
    EXPECT_NO_THROW(release_cached_gpu_memory());   // likewise
    // Every model refuses a forced GPU, naming the device.
    EXPECT_TRUE(throws_error([] { Conv3dMinSoftmax(3, 4, 3, 2, DeviceChoice::GPU); }, {"gpu"}));
    EXPECT_TRUE(throws_error([] { Conv2dScaleMin(3, 4, 3, 2.0f, DeviceChoice::GPU); }, {"gpu"}));
    EXPECT_TRUE(throws_error(
        [] { Conv3dGroupNormMinClampDropout(3, 4, 3, 2, 0, 1, 0.2f, DeviceChoice::GPU); },
        {"gpu"}));
}

// ================================================================ the four models

// One of the four models behind the common interface, with what its
// constructor and inputs need; built on the CPU unless told otherwise.
struct ModelCase {
    std::string name;  // the class name, which every message starts with
    int spatial;       // 2 or 3
    std::function<std::unique_ptr<Model>(int cin, int cout, int k, DeviceChoice)> make;
    // set_parameters with PyTorch-layout tensors (p83: norm weight and bias too).
    std::function<void(Model &, const std::vector<Tensor> &)> set;
    std::vector<std::pair<std::string, std::function<Shape(int cin, int cout, int k)>>> params;
};

Shape kernel_shape(int cout, int cin, int k, int spatial) {
    Shape s = {cout, cin};
    for (int d = 0; d < spatial; ++d) s.push_back(k);
    return s;
}

std::vector<ModelCase> model_cases() {
    auto conv_params = [](int spatial) {
        return std::vector<std::pair<std::string, std::function<Shape(int, int, int)>>>{
            {"conv.weight", [spatial](int cin, int cout, int k) { return kernel_shape(cout, cin, k, spatial); }},
            {"conv.bias", [](int, int cout, int) { return Shape{cout}; }}};
    };
    auto p83_params = conv_params(3);
    p83_params.push_back({"norm.weight", [](int, int cout, int) { return Shape{cout}; }});
    p83_params.push_back({"norm.bias", [](int, int cout, int) { return Shape{cout}; }});
    return {
        {"Conv3dMinSoftmax", 3,
         [](int cin, int cout, int k, DeviceChoice d) {
             return std::make_unique<Conv3dMinSoftmax>(cin, cout, k, 2, d, 1);
         },
         [](Model &m, const std::vector<Tensor> &p) {
             static_cast<Conv3dMinSoftmax &>(m).set_parameters(p[0], p[1]);
         },
         conv_params(3)},
        {"Conv2dMinTanhTanh", 2,
         [](int cin, int cout, int k, DeviceChoice d) {
             return std::make_unique<Conv2dMinTanhTanh>(cin, cout, k, d, 2);
         },
         [](Model &m, const std::vector<Tensor> &p) {
             static_cast<Conv2dMinTanhTanh &>(m).set_parameters(p[0], p[1]);
         },
         conv_params(2)},
        {"Conv2dScaleMin", 2,
         [](int cin, int cout, int k, DeviceChoice d) {
             return std::make_unique<Conv2dScaleMin>(cin, cout, k, -1.5f, d, 3);
         },
         [](Model &m, const std::vector<Tensor> &p) {
             static_cast<Conv2dScaleMin &>(m).set_parameters(p[0], p[1]);
         },
         conv_params(2)},
        {"Conv3dGroupNormMinClampDropout", 3,
         [](int cin, int cout, int k, DeviceChoice d) {
             auto m = std::make_unique<Conv3dGroupNormMinClampDropout>(cin, cout, k, 1, 0.5f,
                                                                       -0.5f, 0.3f, d, 4);
             m->set_clamp(-2.0f, 2.0f);  // GroupNorm reaches the output
             return m;
         },
         [](Model &m, const std::vector<Tensor> &p) {
             static_cast<Conv3dGroupNormMinClampDropout &>(m).set_parameters(p[0], p[1], p[2],
                                                                             p[3]);
         },
         p83_params},
    };
}

// The model's current parameters as host vectors (to check they did not change).
std::vector<std::vector<float>> parameters_of(const std::string &name, const Model &m) {
    std::vector<std::vector<float>> v = {m.conv_weight().to_vector(), m.conv_bias().to_vector()};
    if (name == "Conv3dGroupNormMinClampDropout") {
        auto &x = static_cast<const Conv3dGroupNormMinClampDropout &>(m);
        v.push_back(x.norm_weight().to_vector());
        v.push_back(x.norm_bias().to_vector());
    }
    return v;
}

// A valid input (N, Cin, spatial...) with every spatial size `size`.
Shape input_shape(const ModelCase &c, int64_t n, int64_t cin, int64_t size) {
    Shape s = {n, cin};
    for (int d = 0; d < c.spatial; ++d) s.push_back(size);
    return s;
}

class Models : public ::testing::TestWithParam<ModelCase> {};

std::string model_case_name(const ::testing::TestParamInfo<ModelCase> &info) {
    return info.param.name;
}

TEST_P(Models, ConstructorRejectsNonPositiveSizesByName) {
    const ModelCase &c = GetParam();
    for (int v : {0, -1, -7, INT_MIN}) {
        SCOPED_TRACE(v);
        const std::string got = "got " + std::to_string(v);
        EXPECT_TRUE(throws_error([&] { c.make(v, 4, 3, DeviceChoice::CPU); },
                                 {c.name, "in_channels", got}));
        EXPECT_TRUE(throws_error([&] { c.make(3, v, 3, DeviceChoice::CPU); },
                                 {c.name, "out_channels", got}));
        EXPECT_TRUE(throws_error([&] { c.make(3, 4, v, DeviceChoice::CPU); },
                                 {c.name, "kernel_size", got}));
    }
}

// Cin * k^3 used to be computed in int (the init bound): a kernel this large
// overflowed it (undefined behaviour, caught by UBSan) before the weight
// allocation was refused. Now the weight shape is checked first.
TEST_P(Models, HugeKernelOrChannelsAreRefusedByWeightShape) {
    const ModelCase &c = GetParam();
    const int k = c.spatial == 3 ? 1000 : 50000;  // 3 * k^spatial > INT_MAX
    const Shape w = kernel_shape(4, 3, k, c.spatial);
    EXPECT_TRUE(throws_error([&] { c.make(3, 4, k, DeviceChoice::CPU); },
                             {c.name, "conv.weight", shape_string(w), "32-bit"}));
    EXPECT_TRUE(throws_error([&] { c.make(INT_MAX, INT_MAX, 1, DeviceChoice::CPU); },
                             {c.name, "conv.weight", "32-bit"}));
}

TEST_P(Models, WrongRankIsRejected) {
    const ModelCase &c = GetParam();
    auto m = c.make(3, 4, 3, DeviceChoice::CPU);
    const int rank = 2 + c.spatial;
    // Rank 4 for the 3D models and rank 5 for the 2D ones (the other
    // family's inputs), and ranks no model takes.
    const Shape other_family = c.spatial == 3 ? Shape{1, 3, 5, 5} : Shape{1, 3, 5, 5, 5};
    const Shape bad[] = {{5}, {1, 3}, {1, 3, 5}, other_family, {1, 3, 5, 5, 5, 5}};
    for (const Shape &s : bad) {
        SCOPED_TRACE(shape_string(s));
        const std::initializer_list<std::string> keys = {c.name, "rank " + std::to_string(rank),
                                                         shape_string(s)};
        EXPECT_TRUE(throws_error([&] { m->output_shape(s); }, keys));
        Tensor in = random_tensor(s, 3);
        EXPECT_TRUE(throws_error([&] { m->forward(in); }, keys));
        Tensor out = Tensor::empty(m->output_shape(input_shape(c, 1, 3, 5)));
        EXPECT_TRUE(throws_error([&] { m->forward_into(in, out); }, keys));
    }
}

TEST_P(Models, ChannelCountMismatchIsRejected) {
    const ModelCase &c = GetParam();
    auto m = c.make(3, 4, 3, DeviceChoice::CPU);
    for (int64_t cin : {1, 2, 4, 16}) {
        const Shape s = input_shape(c, 2, cin, 6);
        SCOPED_TRACE(shape_string(s));
        const std::initializer_list<std::string> keys = {
            c.name, shape_string(s), std::to_string(cin) + " channels", "expects 3"};
        EXPECT_TRUE(throws_error([&] { m->output_shape(s); }, keys));
        EXPECT_TRUE(throws_error([&] { m->forward(random_tensor(s, 4)); }, keys));
    }
}

TEST_P(Models, SpatialSizeSmallerThanTheKernelIsRejectedInEachDimension) {
    const ModelCase &c = GetParam();
    for (int k : {2, 3, 4}) {
        auto m = c.make(3, 4, k, DeviceChoice::CPU);
        for (int d = 2; d < 2 + c.spatial; ++d) {
            for (int64_t size : {int64_t{1}, int64_t{k - 1}}) {
                Shape s = input_shape(c, 1, 3, k + 2);
                s[d] = size;
                SCOPED_TRACE(shape_string(s) + " k " + std::to_string(k));
                const std::initializer_list<std::string> keys = {
                    c.name, shape_string(s), "smaller than the kernel size " + std::to_string(k),
                    "dimension " + std::to_string(d)};
                EXPECT_TRUE(throws_error([&] { m->output_shape(s); }, keys));
                EXPECT_TRUE(throws_error([&] { m->forward(random_tensor(s, 5)); }, keys));
            }
        }
        // Exactly the kernel size is fine: one output position per dimension.
        Tensor in = random_tensor(input_shape(c, 1, 3, k), 6);
        Tensor out = m->forward(in);
        for (int d = 2; d < out.dim(); ++d) EXPECT_EQ(out.shape()[d], 1);
    }
}

TEST_P(Models, NonPositiveOrOversizedInputShapesAreRejectedByOutputShape) {
    const ModelCase &c = GetParam();
    auto m = c.make(3, 4, 1, DeviceChoice::CPU);
    for (int64_t v : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
        for (int d = 0; d < 2 + c.spatial; ++d) {
            Shape s = input_shape(c, 1, 3, 4);
            s[d] = v;
            SCOPED_TRACE(shape_string(s));
            EXPECT_TRUE(throws_error([&] { m->output_shape(s); },
                                     {c.name, shape_string(s), "non-positive"}));
        }
    }
    // A shape no tensor can have: refused by name, not overflowed.
    for (int64_t big : {int64_t{1} << 20, int64_t{1} << 40, kI64Max}) {
        const Shape s = input_shape(c, big, 3, 1 << 20);
        SCOPED_TRACE(shape_string(s));
        EXPECT_TRUE(throws_error([&] { m->output_shape(s); }, {c.name, shape_string(s), "32-bit"}));
    }
}

TEST_P(Models, UndefinedInputOrOutputIsRejected) {
    const ModelCase &c = GetParam();
    auto m = c.make(3, 4, 3, DeviceChoice::CPU);
    Tensor undefined;
    EXPECT_TRUE(throws_error([&] { m->forward(undefined); }, {"input", "undefined"}));
    Tensor out = Tensor::empty(m->output_shape(input_shape(c, 1, 3, 5)));
    EXPECT_TRUE(throws_error([&] { m->forward_into(undefined, out); }, {"input", "undefined"}));
    Tensor in = random_tensor(input_shape(c, 1, 3, 5), 7);
    EXPECT_TRUE(throws_error([&] { m->forward_into(in, undefined); }, {"output", "undefined"}));
}

TEST_P(Models, ForwardIntoRejectsAWrongOutputShapeAndLeavesItUntouched) {
    const ModelCase &c = GetParam();
    auto m = c.make(3, 4, 3, DeviceChoice::CPU);
    const Shape in_shape = input_shape(c, 2, 3, 6);
    const Shape good = m->output_shape(in_shape);
    Tensor in = random_tensor(in_shape, 8);
    std::vector<Shape> wrong;
    for (size_t d = 0; d < good.size(); ++d) {
        Shape s = good;
        s[d] += 1;
        wrong.push_back(s);
        if (good[d] > 1) {
            s[d] = good[d] - 1;
            wrong.push_back(s);
        }
    }
    wrong.push_back(Shape(good.begin(), good.end() - 1));  // rank - 1
    Shape more = good;
    more.push_back(1);
    wrong.push_back(more);  // rank + 1, same element count
    Shape flat = {1};
    for (int64_t s : good) flat[0] *= s;
    wrong.push_back(flat);  // same element count, rank 1
    for (const Shape &s : wrong) {
        SCOPED_TRACE(shape_string(s));
        int64_t count = 1;
        for (int64_t v : s) count *= v;
        Tensor out = Tensor::from_vector(s, std::vector<float>(static_cast<size_t>(count), 42.0f));
        EXPECT_TRUE(throws_error([&] { m->forward_into(in, out); },
                                 {"forward_into", "output has shape " + shape_string(s),
                                  "expected " + shape_string(good)}));
        for (float v : out.to_vector()) ASSERT_EQ(v, 42.0f);  // no work was done
    }
}

// The pipelines read the input while they write the output, so shared
// storage would silently give garbage: it is refused. Shapes where input and
// output have the same shape: Cin == Cout and k == 1 (p24 and p83), or
// Cin == 1 and k == 1 (p25 and p32, whose output has one channel).
// A copy of conv_weight() shares the model's storage (like PyTorch's
// module.weight), so an output viewing a parameter would overwrite it while
// the pipeline reads it: refused, naming the parameter.
TEST_P(Models, ForwardIntoRefusesAnOutputSharingAParameter) {
    const ModelCase &c = GetParam();
    auto m = c.make(4, 4, 3, DeviceChoice::CPU);
    const Shape s = input_shape(c, 1, 4, 3);  // a 1-pixel output: fits in any parameter
    const Shape o = m->output_shape(s);
    Tensor in = random_tensor(s, 3);
    Tensor weight = m->conv_weight();  // shares the storage
    ASSERT_LE(Tensor::empty(o).numel(), weight.numel());
    const std::vector<float> before = weight.to_vector();
    Tensor alias = Tensor::wrap_host(weight.data(), o);
    EXPECT_TRUE(throws_error([&] { m->forward_into(in, alias); },
                             {"forward_into", "shares storage", "conv.weight"}));
    EXPECT_EQ(m->conv_weight().to_vector(), before);
    if (auto *p83 = dynamic_cast<Conv3dGroupNormMinClampDropout *>(m.get())) {
        Tensor gamma = p83->norm_weight();
        ASSERT_LE(Tensor::empty(o).numel(), gamma.numel());
        Tensor on_gamma = Tensor::wrap_host(gamma.data(), o);
        EXPECT_TRUE(throws_error([&] { m->forward_into(in, on_gamma); },
                                 {"shares storage", "norm.weight"}));
    }
    // Its own output tensor is fine.
    Tensor out = Tensor::empty(o);
    EXPECT_NO_THROW(m->forward_into(in, out));
}

TEST_P(Models, ForwardIntoRefusesAnOutputSharingTheInputsStorage) {
    const ModelCase &c = GetParam();
    const bool one_channel_out = c.spatial == 2;
    const int cin = one_channel_out ? 1 : 4;
    auto m = c.make(cin, 4, 1, DeviceChoice::CPU);
    Shape s = input_shape(c, 2, cin, 5);
    if (c.name == "Conv3dMinSoftmax") s[2] = 1;  // (N, C, 1, H, W) -> (N, C, H, W): same count
    const Shape o = m->output_shape(s);
    Tensor in = random_tensor(s, 9);
    const int64_t n = in.numel();
    ASSERT_EQ(Tensor::empty(o).numel(), n);
    // The very same storage, viewed with the output's shape.
    Tensor alias = Tensor::wrap_host(in.data(), o);
    EXPECT_TRUE(throws_error([&] { m->forward_into(in, alias); },
                             {"forward_into", "shares storage", shape_string(s)}));
    if (o == s) {
        EXPECT_TRUE(throws_error([&] { m->forward_into(in, in); }, {"shares storage"}));
    }
    // Partly overlapping views of one buffer, either way round.
    std::vector<float> storage(static_cast<size_t>(2 * n));
    std::copy(in.data(), in.data() + n, storage.begin());
    std::copy(in.data(), in.data() + n, storage.begin() + n / 2);
    Tensor in_low = Tensor::wrap_host(storage.data(), s);
    Tensor out_high = Tensor::wrap_host(storage.data() + n / 2, o);
    EXPECT_TRUE(throws_error([&] { m->forward_into(in_low, out_high); }, {"shares storage"}));
    Tensor in_high = Tensor::wrap_host(storage.data() + n / 2, s);
    Tensor out_low = Tensor::wrap_host(storage.data(), o);
    EXPECT_TRUE(throws_error([&] { m->forward_into(in_high, out_low); }, {"shares storage"}));
    // Adjacent, not overlapping: allowed, and the result is the model's.
    Tensor in_a = Tensor::wrap_host(storage.data(), s);
    Tensor out_b = Tensor::wrap_host(storage.data() + n, o);
    std::copy(in.data(), in.data() + n, storage.begin());
    m->forward_into(in_a, out_b);
    EXPECT_EQ(out_b.to_vector(), m->forward(in).to_vector());
}

TEST_P(Models, SetParametersRejectsWrongShapesAndLeavesTheModelUnchanged) {
    const ModelCase &c = GetParam();
    const int cin = 3, cout = 4, k = 2;
    auto m = c.make(cin, cout, k, DeviceChoice::CPU);
    const auto before = parameters_of(c.name, *m);
    std::vector<Tensor> good;
    for (const auto &p : c.params) good.push_back(random_tensor(p.second(cin, cout, k), 10));
    for (size_t i = 0; i < c.params.size(); ++i) {
        const Shape expected = c.params[i].second(cin, cout, k);
        std::vector<Shape> wrong;
        for (size_t d = 0; d < expected.size(); ++d) {
            Shape s = expected;
            s[d] += 1;
            wrong.push_back(s);
        }
        wrong.push_back(Shape(expected.begin(), expected.end() - 1).empty()
                            ? Shape{expected[0], 1}
                            : Shape(expected.begin(), expected.end() - 1));
        for (const Shape &s : wrong) {
            SCOPED_TRACE(c.params[i].first + " " + shape_string(s));
            std::vector<Tensor> args = good;
            args[i] = random_tensor(s, 11);
            EXPECT_TRUE(throws_error([&] { c.set(*m, args); },
                                     {c.params[i].first, "has shape " + shape_string(s),
                                      "expected " + shape_string(expected)}));
            EXPECT_EQ(parameters_of(c.name, *m), before);  // all or nothing
        }
        std::vector<Tensor> args = good;
        args[i] = Tensor();
        EXPECT_TRUE(throws_error([&] { c.set(*m, args); }, {c.params[i].first, "undefined"}));
        EXPECT_EQ(parameters_of(c.name, *m), before);
    }
    // The good set is taken as given.
    c.set(*m, good);
    const auto after = parameters_of(c.name, *m);
    for (size_t i = 0; i < good.size(); ++i) EXPECT_EQ(after[i], good[i].to_vector());
}

// After all of the above kinds of refusal the model still computes the right thing.
TEST_P(Models, RefusalsLeaveTheModelUsable) {
    const ModelCase &c = GetParam();
    auto m = c.make(3, 4, 3, DeviceChoice::CPU);
    Tensor in = random_tensor(input_shape(c, 2, 3, 6), 12);
    const std::vector<float> expected = m->forward(in).to_vector();
    EXPECT_THROW(m->forward(random_tensor(input_shape(c, 2, 2, 6), 13)), Error);
    EXPECT_THROW(m->forward(random_tensor(input_shape(c, 2, 3, 2), 14)), Error);
    Tensor wrong_out = Tensor::empty({1, 2, 3});
    EXPECT_THROW(m->forward_into(in, wrong_out), Error);
    EXPECT_EQ(m->forward(in).to_vector(), expected);
}

INSTANTIATE_TEST_SUITE_P(All, Models, ::testing::ValuesIn(model_cases()), model_case_name);

// ---------------------------------------------------------------- model-specific

TEST(P24Errors, OnlyTheDepthDimensionIsSupported) {
    for (int dim : {-5, -4, -2, -1, 0, 1, 3, 4, 5}) {
        EXPECT_TRUE(throws_error([&] { Conv3dMinSoftmax(3, 4, 3, dim, DeviceChoice::CPU); },
                                 {"Conv3dMinSoftmax", "dim " + std::to_string(dim)}));
    }
    EXPECT_NO_THROW(Conv3dMinSoftmax(3, 4, 3, -3, DeviceChoice::CPU));  // PyTorch's -3 is depth
}

TEST(P83Errors, GroupsMustBePositiveAndDivideOutChannels) {
    const char *name = "Conv3dGroupNormMinClampDropout";
    for (int g : {0, -1, -8, INT_MIN}) {
        EXPECT_TRUE(throws_error(
            [&] { Conv3dGroupNormMinClampDropout(3, 16, 3, g, 0, 1, 0.2f, DeviceChoice::CPU); },
            {name, "groups", "got " + std::to_string(g)}));
    }
    const std::pair<int, int> not_dividing[] = {{16, 5}, {16, 32}, {16, 17}, {6, 4}, {1, 2}};
    for (const auto &[cout, g] : not_dividing) {
        const int co = cout, gr = g;
        EXPECT_TRUE(throws_error(
            [&] { Conv3dGroupNormMinClampDropout(3, co, 3, gr, 0, 1, 0.2f, DeviceChoice::CPU); },
            {name, "groups " + std::to_string(g), "does not divide out_channels " +
                                                      std::to_string(cout)}));
    }
    for (int g : {1, 2, 4, 8, 16}) {
        EXPECT_NO_THROW(Conv3dGroupNormMinClampDropout(3, 16, 3, g, 0, 1, 0.2f, DeviceChoice::CPU));
    }
}

TEST(P83Errors, DropoutProbabilityOutsideTheUnitIntervalOrNaN) {
    const char *name = "Conv3dGroupNormMinClampDropout";
    const float bad[] = {-1e-7f, -0.5f, 1.0000001f, 2.0f, kNaN, -kNaN, kInf, -kInf,
                         std::numeric_limits<float>::max()};
    Conv3dGroupNormMinClampDropout m(3, 4, 3, 2, 0, 1, 0.25f, DeviceChoice::CPU);
    for (float p : bad) {
        SCOPED_TRACE(p);
        EXPECT_TRUE(throws_error(
            [&] { Conv3dGroupNormMinClampDropout(3, 4, 3, 2, 0, 1, p, DeviceChoice::CPU); },
            {name, "between 0 and 1"}));
        EXPECT_TRUE(throws_error([&] { m.set_dropout_p(p); }, {name, "between 0 and 1"}));
        EXPECT_EQ(m.dropout_p(), 0.25f);  // unchanged
    }
    // The message names the value.
    EXPECT_TRUE(throws_error([&] { m.set_dropout_p(1.5f); }, {"1.5"}));
    // Values just outside [0, 1] print as themselves, not as 1.000000 / -0.000000.
    EXPECT_TRUE(throws_error([&] { m.set_dropout_p(std::nextafter(1.0f, 2.0f)); },
                             {"got 1.00000012"}));
    EXPECT_TRUE(throws_error([&] { m.set_dropout_p(-1e-10f); }, {"got -1.00000001e-10"}));
    EXPECT_TRUE(throws_error([&] { m.set_dropout_p(kNaN); }, {"nan"}));
    for (float p : {0.0f, -0.0f, 1e-30f, 0.5f, 1.0f}) {
        EXPECT_NO_THROW(m.set_dropout_p(p));
        EXPECT_EQ(m.dropout_p(), p);
    }
}

TEST(P83Errors, GroupNormEpsNotPositiveOrNotFinite) {
    Conv3dGroupNormMinClampDropout m(3, 4, 3, 2, 0, 1, 0.25f, DeviceChoice::CPU);
    EXPECT_EQ(m.eps(), 1e-5f);  // PyTorch's default
    for (float eps : {0.0f, -0.0f, -1e-5f, kNaN, kInf, -kInf}) {
        SCOPED_TRACE(eps);
        EXPECT_TRUE(throws_error([&] { m.set_eps(eps); },
                                 {"Conv3dGroupNormMinClampDropout", "eps", "finite number > 0"}));
        EXPECT_EQ(m.eps(), 1e-5f);  // unchanged
    }
    EXPECT_TRUE(throws_error([&] { m.set_eps(-2.5f); }, {"got -2.5"}));
    for (float eps : {1e-30f, 1e-3f, 0.5f, 10.0f}) {
        EXPECT_NO_THROW(m.set_eps(eps));
        EXPECT_EQ(m.eps(), eps);
    }
}

// An input under the 32-bit limit whose output is over it: a model with more
// output than input channels. Refused by output_shape (and so by forward)
// with an Error naming both shapes, before any allocation. Inputs are 8 MiB.
TEST(OutputSizeErrors, OutputPastHalidesIndexingIsRefusedCleanly) {
    {
        Conv3dGroupNormMinClampDropout p83(1, 1024, 1, 8, 0, 1, 0.2f, DeviceChoice::CPU);
        Tensor in = random_tensor({1, 1, 8, 512, 512}, 20);  // 2^21 elements
        const std::initializer_list<std::string> keys = {
            "Conv3dGroupNormMinClampDropout", "(1, 1, 8, 512, 512)", "(1, 1024, 8, 512, 512)",
            "32-bit"};
        EXPECT_TRUE(throws_error([&] { p83.output_shape(in.shape()); }, keys));
        EXPECT_TRUE(throws_error([&] { p83.forward(in); }, keys));
        Tensor small_out = Tensor::empty({1, 1, 1, 1, 1});
        EXPECT_TRUE(throws_error([&] { p83.forward_into(in, small_out); }, keys));
    }
    {
        // The default p83 (Cin 3, Cout 16) with a batch that fits as input only.
        Conv3dGroupNormMinClampDropout p83(3, 16, 3, 8, 0, 1, 0.2f, DeviceChoice::CPU);
        const Shape in = {150, 3, 64, 64, 64};  // 118M elements in, 572M out
        EXPECT_TRUE(throws_error([&] { p83.output_shape(in); },
                                 {"(150, 16, 62, 62, 62)", "32-bit"}));
    }
    {
        // p24 too, when Cout exceeds Cin times the depth.
        Conv3dMinSoftmax p24(1, 1024, 1, 2, DeviceChoice::CPU);
        Tensor in = random_tensor({1, 1, 1, 2048, 1024}, 21);
        const std::initializer_list<std::string> keys = {"Conv3dMinSoftmax", "(1, 1024, 2048, 1024)",
                                                         "32-bit"};
        EXPECT_TRUE(throws_error([&] { p24.output_shape(in.shape()); }, keys));
        EXPECT_TRUE(throws_error([&] { p24.forward(in); }, keys));
    }
    // The boundary, without allocating: 2^29 - 1 = 233 * 1103 * 2089 output
    // elements are allowed, one more channel is not.
    Conv3dGroupNormMinClampDropout fits(1, 233, 1, 233, 0, 1, 0.2f, DeviceChoice::CPU);
    EXPECT_EQ(fits.output_shape({1, 1, 1, 1103, 2089}), (Shape{1, 233, 1, 1103, 2089}));
    Conv3dGroupNormMinClampDropout over(1, 234, 1, 234, 0, 1, 0.2f, DeviceChoice::CPU);
    EXPECT_TRUE(throws_error([&] { over.output_shape({1, 1, 1, 1103, 2089}); },
                             {"(1, 234, 1, 1103, 2089)", std::to_string(kMaxElements)}));
}

// ================================================================ GPU-only

// A host tensor where a device tensor is needed, and back, for every entry point.
TEST(GpuDeviceMismatch, HostAndDeviceTensorsAreNotInterchangeable) {
    FUSEDCONV_REQUIRE_GPU();
    for (const ModelCase &c : model_cases()) {
        SCOPED_TRACE(c.name);
        auto gpu = c.make(3, 4, 3, DeviceChoice::GPU);
        auto cpu = c.make(3, 4, 3, DeviceChoice::CPU);
        ASSERT_EQ(gpu->device(), Device::GPU);
        Tensor host_in = random_tensor(input_shape(c, 1, 3, 5), 30);
        Tensor dev_in = host_in.to(Device::GPU);
        const Shape o = gpu->output_shape(host_in.shape());
        Tensor host_out = Tensor::empty(o), dev_out = Tensor::empty(o, Device::GPU);
        EXPECT_TRUE(throws_error([&] { gpu->forward(host_in); },
                                 {"forward", "is on the cpu", "runs on the gpu"}));
        EXPECT_TRUE(throws_error([&] { cpu->forward(dev_in); },
                                 {"forward", "is on the gpu", "runs on the cpu"}));
        EXPECT_TRUE(throws_error([&] { gpu->forward_into(dev_in, host_out); },
                                 {"forward_into", "is on the cpu", "runs on the gpu"}));
        EXPECT_TRUE(throws_error([&] { cpu->forward_into(host_in, dev_out); },
                                 {"forward_into", "is on the gpu", "runs on the cpu"}));
        EXPECT_TRUE(throws_error([&] { gpu->forward_into(host_in, dev_out); }, {"is on the cpu"}));
        // Right devices: both work and agree.
        gpu->forward_into(dev_in, dev_out);
        EXPECT_EQ(dev_out.device(), Device::GPU);
        // In place on the GPU is refused as on the CPU.
        EXPECT_TRUE(throws_error(
            [&] {
                Tensor alias = Tensor::wrap_device(dev_in.device_data(), o);
                gpu->forward_into(dev_in, alias);
            },
            {"shares storage"}));
    }
    Tensor dev = random_tensor({2, 3}, 31).to(Device::GPU);
    EXPECT_TRUE(throws_error([&] { dev.data(); }, {"(2, 3)", "is on the GPU"}));
    Tensor host_t = random_tensor({2, 3}, 32);
    EXPECT_TRUE(throws_error([&] { host_t.device_data(); }, {"(2, 3)", "is on the CPU"}));
    // Parameters may come from either device: they are copied to the model's.
    Conv2dMinTanhTanh m(1, 2, 1, DeviceChoice::CPU);
    m.set_parameters(random_tensor({2, 1, 1, 1}, 33).to(Device::GPU),
                     random_tensor({2}, 34).to(Device::GPU));
    EXPECT_EQ(m.conv_weight().device(), Device::CPU);
}

// p24 on the GPU keeps each block's depth-min of every output channel in
// shared memory (48 KB a block): 2000 channels are past that for any tile of
// more than 6 pixels. Such a model must either compute the right answer or
// fail with an Error naming the model; never crash or return garbage.
TEST(GpuLimits, P24WithMoreChannelsThanSharedMemoryFailsCleanly) {
    FUSEDCONV_REQUIRE_GPU();
    Conv3dMinSoftmax m(3, 2000, 3, 2, DeviceChoice::GPU, 40);
    Tensor in = random_tensor({1, 3, 4, 5, 6}, 41);
    try {
        Tensor out = m.forward(in.to(Device::GPU));
        EXPECT_TRUE(matches(out, p24_reference(m, in)));
    } catch (const Error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("Conv3dMinSoftmax"), std::string::npos) << what;
        EXPECT_NE(what.find("2000 output channels"), std::string::npos) << what;
        std::cout << "[ refused  ] " << e.what() << "\n";
    }
    // The GPU stays usable afterwards, at a size that fits.
    Conv3dMinSoftmax small(3, 24, 3, 2, DeviceChoice::GPU, 42);
    EXPECT_TRUE(matches(small.forward(in.to(Device::GPU)), p24_reference(small, in)));
}

// Halide reports an error raised in a CPU parallel loop on its worker
// thread; the caller's Error still carries that message, once.
TEST(HalideErrors, MessageFromAWorkerThreadReachesTheCaller) {
    detail::install_halide_error_handler();
    std::thread([] { halide_error(nullptr, "bounds trouble on a worker\n"); }).join();
    EXPECT_TRUE(throws_error([] { detail::check_halide(-1, "p24 forward"); },
                             {"p24 forward: bounds trouble on a worker"}));
    EXPECT_TRUE(throws_error([] { detail::check_halide(-3, "again"); },
                             {"again: Halide error code -3"}));
}

}  // namespace
