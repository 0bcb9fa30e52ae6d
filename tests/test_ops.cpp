// The functional entry points (fusedconv/ops.h): results against the float64
// reference on the CPU (and the GPU when present), agreement with the Model
// classes that call them, every validation error by name, and concurrent
// calls from several threads.
#include "test_util.h"

#include "fusedconv/ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;
using reference::HostTensor;

Tensor uniform(const Shape &shape, uint64_t seed, float bound) {
    return random_tensor(shape, seed, -bound, bound);
}

class Ops : public OnDevice {};

TEST_P(Ops, P24MatchesFloat64AndTheModel) {
    Tensor x = random_tensor({2, 3, 5, 7, 6}, 1), w = uniform({5, 3, 3, 3, 3}, 2, 0.2f),
           b = uniform({5}, 3, 0.2f);
    const Shape shape = p24_output_shape(x.shape(), w.shape());
    EXPECT_EQ(shape, (Shape{2, 5, 5, 4}));
    Tensor out = Tensor::empty(shape, device());
    p24_forward(on_device(x), on_device(w), on_device(b), 2, out);
    EXPECT_TRUE(matches(out, reference::p24(host_copy(x), host_copy(w), host_copy(b))));

    Conv3dMinSoftmax m(3, 5, 3, 2, choice());
    m.set_parameters(w, b);
    EXPECT_EQ(m.forward(on_device(x)).to_vector(), out.to_vector());
}

TEST_P(Ops, P25AndP32MatchFloat64InBothForms) {
    for (int k : {3, 2}) {  // 3x3: Winograd form and NaN check; 2x2: direct form
        SCOPED_TRACE("k " + std::to_string(k));
        Tensor x = random_tensor({3, 4, 9, 11}, 4), w = uniform({6, 4, k, k}, 5, 0.3f),
               b = uniform({6}, 6, 0.3f);
        const Shape shape = p25_output_shape(x.shape(), w.shape());
        EXPECT_EQ(shape, (Shape{3, 1, 10 - k, 12 - k}));
        EXPECT_EQ(p32_output_shape(x.shape(), w.shape()), shape);
        Tensor out = Tensor::empty(shape, device());
        p25_forward(on_device(x), on_device(w), on_device(b), out);
        EXPECT_TRUE(matches(out, reference::p25(host_copy(x), host_copy(w), host_copy(b))));
        p32_forward(on_device(x), on_device(w), on_device(b), -0.75f, out);
        EXPECT_TRUE(
            matches(out, reference::p32(host_copy(x), host_copy(w), host_copy(b), -0.75)));
    }
}

TEST_P(Ops, P83MatchesFloat64InTrainingAndEval) {
    Tensor x = random_tensor({2, 3, 4, 6, 5}, 7), w = uniform({6, 3, 2, 2, 2}, 8, 0.4f),
           b = uniform({6}, 9, 0.4f), g = uniform({6}, 10, 2.0f), be = uniform({6}, 11, 0.5f);
    for (bool training : {false, true}) {
        SCOPED_TRACE(training ? "training" : "eval");
        P83Params p;
        p.groups = 3;
        p.min_value = 0.9f;
        p.clamp_min = -0.7f;
        p.clamp_max = 0.6f;
        p.dropout_p = 0.25f;
        p.training = training;
        p.seed = 42;
        const Shape shape = p83_output_shape(x.shape(), w.shape(), p.groups);
        EXPECT_EQ(shape, (Shape{2, 6, 3, 5, 4}));
        Tensor out = Tensor::empty(shape, device());
        p83_forward(on_device(x), on_device(w), on_device(b), on_device(g), on_device(be), p, out);
        const reference::P83Args args{p.groups,    p.eps,        p.min_value, p.clamp_min,
                                      p.clamp_max, p.dropout_p, p.training,  p.seed};
        EXPECT_TRUE(matches(out, reference::p83(host_copy(x), host_copy(w), host_copy(b),
                                                host_copy(g), host_copy(be), args),
                            1e-4));
    }
}

// On the CPU the stream is ignored: any value, even one that is no stream.
TEST(OpsCpu, StreamIsIgnoredOnTheCpu) {
    Tensor x = random_tensor({1, 2, 4, 4}, 12), w = uniform({3, 2, 3, 3}, 13, 0.3f),
           b = uniform({3}, 14, 0.3f);
    Tensor out = Tensor::empty(p25_output_shape(x.shape(), w.shape()));
    ExecOptions o;
    o.stream = reinterpret_cast<void *>(uintptr_t{0xdead});
    p25_forward(x, w, b, out, o);
    EXPECT_TRUE(matches(out, reference::p25(host_copy(x), host_copy(w), host_copy(b))));
    EXPECT_EQ(x.device_index(), -1);
    Conv2dMinTanhTanh m(2, 3, 3, DeviceChoice::CPU);
    EXPECT_EQ(m.device_index(), -1);
    m.to(Device::CPU);
    EXPECT_EQ(m.device(), Device::CPU);
    EXPECT_EQ(m.forward(x, o).shape(), out.shape());
}

TEST(OpsErrors, ShapesAndValuesAreNamed) {
    Tensor x5 = random_tensor({1, 3, 4, 5, 6}, 20), w5 = uniform({4, 3, 2, 2, 2}, 21, 0.3f);
    Tensor x4 = random_tensor({1, 3, 5, 6}, 22), w4 = uniform({4, 3, 3, 3}, 23, 0.3f);
    Tensor b = uniform({4}, 24, 0.3f), b3 = uniform({3}, 25, 0.3f);
    Tensor out24 = Tensor::empty(p24_output_shape(x5.shape(), w5.shape()));
    Tensor out25 = Tensor::empty(p25_output_shape(x4.shape(), w4.shape()));
    Tensor undefined;

    EXPECT_TRUE(throws_error([&] { p24_output_shape(x5.shape(), {4, 3, 2, 2}); },
                             {"p24_output_shape", "conv.weight", "rank 5", "(4, 3, 2, 2)"}));
    EXPECT_TRUE(throws_error([&] { p25_output_shape(x4.shape(), {4, 3, 3, 2}); },
                             {"p25_output_shape", "(4, 3, 3, 2)", "kernel sizes"}));
    EXPECT_TRUE(throws_error([&] { p32_output_shape(x4.shape(), {4, -3, 3, 3}); },
                             {"(4, -3, 3, 3)", "non-positive"}));
    EXPECT_TRUE(throws_error([&] { p25_output_shape({1, 2, 5, 6}, w4.shape()); },
                             {"(1, 2, 5, 6)", "2 channels", "(4, 3, 3, 3) expects 3"}));
    EXPECT_TRUE(throws_error([&] { p24_output_shape(x5.shape(), w5.shape(), 1); },
                             {"dim 1", "not supported"}));
    EXPECT_TRUE(throws_error([&] { p83_output_shape(x5.shape(), w5.shape(), 3); },
                             {"groups 3", "does not divide out_channels 4"}));
    EXPECT_TRUE(throws_error([&] { p83_output_shape(x5.shape(), w5.shape(), -1); },
                             {"groups", "got -1"}));

    EXPECT_TRUE(throws_error([&] { p24_forward(undefined, w5, b, 2, out24); },
                             {"p24_forward", "input", "undefined"}));
    EXPECT_TRUE(throws_error([&] { p24_forward(x5, w5, undefined, 2, out24); },
                             {"conv.bias", "undefined"}));
    EXPECT_TRUE(throws_error([&] { p24_forward(x5, w5, b, 2, undefined); },
                             {"output", "undefined"}));
    EXPECT_TRUE(throws_error([&] { p24_forward(x5, w5, b3, 2, out24); },
                             {"conv.bias", "(3,)", "expected (4,)"}));
    EXPECT_TRUE(throws_error([&] { p25_forward(x4, w4, b, out24); },
                             {"p25_forward", "output has shape", shape_string(out24.shape()),
                              "expected " + shape_string(out25.shape())}));

    // An output over any input's storage is refused, naming that input.
    Tensor alias_x = Tensor::wrap_host(x4.data(), out25.shape());
    EXPECT_TRUE(throws_error([&] { p25_forward(x4, w4, b, alias_x); },
                             {"shares storage", "input"}));
    Tensor big_w = uniform({40, 3, 3, 3}, 26, 0.1f), big_b = uniform({40}, 27, 0.1f);
    Tensor alias_w = Tensor::wrap_host(big_w.data(), out25.shape());
    EXPECT_TRUE(throws_error([&] { p32_forward(x4, big_w, big_b, 1.0f, alias_w); },
                             {"shares storage", "conv.weight"}));

    P83Params p;
    p.groups = 2;
    Tensor g = uniform({4}, 28, 1.0f), be = uniform({4}, 29, 1.0f);
    Tensor out83 = Tensor::empty(p83_output_shape(x5.shape(), w5.shape(), 2));
    Tensor alias_g = Tensor::wrap_host(g.data(), {1, 4, 1, 1, 1});
    Tensor small_x = random_tensor({1, 3, 2, 2, 2}, 30);
    EXPECT_TRUE(throws_error([&] { p83_forward(small_x, w5, b, g, be, p, alias_g); },
                             {"shares storage", "norm.weight"}));
    EXPECT_TRUE(throws_error([&] { p83_forward(x5, w5, b, g, b3, p, out83); },
                             {"norm.bias", "(3,)", "expected (4,)"}));
    p.dropout_p = -0.5f;
    EXPECT_TRUE(throws_error([&] { p83_forward(x5, w5, b, g, be, p, out83); },
                             {"p83_forward", "between 0 and 1", "-0.5"}));
    p.dropout_p = 0.5f;
    for (float eps : {kNaN, 0.0f, -1e-5f}) {
        p.eps = eps;
        EXPECT_TRUE(throws_error([&] { p83_forward(x5, w5, b, g, be, p, out83); },
                                 {"eps", "finite and > 0"}));
    }
}

// Without a GPU, a GPU tensor among CPU ones cannot even be made; with one,
// mixing devices in a call is refused by name.
TEST(OpsErrors, TensorsOnDifferentDevicesAreRefused) {
    FUSEDCONV_REQUIRE_GPU();
    Tensor x = random_tensor({1, 2, 5, 5}, 31), w = uniform({3, 2, 3, 3}, 32, 0.3f),
           b = uniform({3}, 33, 0.3f);
    Tensor out = Tensor::empty(p25_output_shape(x.shape(), w.shape()));
    EXPECT_TRUE(throws_error([&] { p25_forward(x, w.to(Device::GPU), b, out); },
                             {"conv.weight", "is on cuda:0", "input", "is on cpu"}));
    Tensor gpu_out = Tensor::empty(out.shape(), Device::GPU);
    EXPECT_TRUE(throws_error([&] { p25_forward(x, w, b, gpu_out); },
                             {"output", "cuda:0", "cpu"}));
}

// Two threads at once, each with its own model and ops, and both sharing one
// model: every result matches float64 (Halide's pipelines are reentrant and
// forward reads the model only).
TEST_P(Ops, ConcurrentCallsFromTwoThreadsAreCorrect) {
    Tensor x = random_tensor({2, 3, 7, 8}, 40);
    Conv2dScaleMin shared(3, 5, 3, 1.5f, choice(), 41);
    const HostTensor ref_shared = p32_reference(shared, x);
    Tensor x5 = random_tensor({1, 2, 4, 5, 6}, 42), w5 = uniform({4, 2, 2, 2, 2}, 43, 0.3f),
           b5 = uniform({4}, 44, 0.3f);
    const HostTensor ref24 = reference::p24(host_copy(x5), host_copy(w5), host_copy(b5));
    Tensor dx = on_device(x), dx5 = on_device(x5), dw5 = on_device(w5), db5 = on_device(b5);
    bool ok[2] = {true, true};
    auto work = [&](int t) {
        for (int i = 0; i < 6; ++i) {
            Tensor y = shared.forward(dx);
            ok[t] = ok[t] && matches(y, ref_shared);
            Tensor o = Tensor::empty(ref24.shape, device());
            p24_forward(dx5, dw5, db5, 2, o);
            ok[t] = ok[t] && matches(o, ref24);
        }
    };
    std::thread a(work, 0), c(work, 1);
    a.join();
    c.join();
    EXPECT_TRUE(ok[0]);
    EXPECT_TRUE(ok[1]);
}

INSTANTIATE_TEST_SUITE_P(Devices, Ops, ::testing::Values(DeviceChoice::CPU, DeviceChoice::GPU),
                         device_name);

}  // namespace
