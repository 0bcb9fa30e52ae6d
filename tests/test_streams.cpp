// The GPU execution contract of ops.h / models.h: device indices, the
// caller's stream (created here through the driver API helpers of
// runtime/src/cuda_context.h, so no CUDA toolkit is needed), concurrent
// threads on concurrent streams, and CUDA graph capture. Every test skips
// with a message without a GPU; the multi-GPU ones also without a second.
#include "test_util.h"

#include "batch_halves.h"  // runtime/src: p83's batch in two halves on two streams
#include "cuda_context.h"  // runtime/src: streams and graph capture via the driver
#include "fusedconv/ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;
using reference::HostTensor;

// A non-blocking stream of a device (it does not wait for the legacy
// default stream), destroyed at the end of the scope.
struct Stream {
    explicit Stream(int device = 0) : device(device), handle(cuda::stream_create(device, true)) {}
    ~Stream() { cuda::stream_destroy(device, handle); }
    void sync() const { cuda::stream_synchronize(device, handle); }
    ExecOptions options() const {
        ExecOptions o;
        o.stream = handle;
        return o;
    }
    int device;
    void *handle;
};

Tensor uniform(const Shape &shape, uint64_t seed, float bound) {
    return random_tensor(shape, seed, -bound, bound);
}

// A GPU tensor of `shape` filled with a value no model outputs here, so an
// output the work did not write shows.
Tensor poisoned(const Shape &shape, int device = 0) {
    Tensor t = Tensor::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = -12345.0f;
    return t.to(Device::GPU, device);
}

TEST(GpuDevices, IndexOutOfRangeIsAnErrorNamingIt) {
    FUSEDCONV_REQUIRE_GPU();
    const int n = cuda_device_count();
    ASSERT_GE(n, 1);
    const std::string count = std::to_string(n) + " device";
    for (int bad : {n, n + 7, -1}) {
        SCOPED_TRACE(bad);
        const std::string index = "index " + std::to_string(bad);
        EXPECT_TRUE(throws_error([&] { Tensor::empty({2, 3}, Device::GPU, bad); },
                                 {"(2, 3)", index, "out of range", count}));
        Tensor host = Tensor::empty({4});
        EXPECT_TRUE(throws_error([&] { host.to(Device::GPU, bad); }, {index, "out of range"}));
        int dummy = 0;
        EXPECT_TRUE(throws_error([&] { Tensor::wrap_device(&dummy, {1}, bad); },
                                 {"wrap_device", index}));
        EXPECT_TRUE(throws_error([&] { synchronize_device(bad); }, {index, "out of range"}));
        EXPECT_TRUE(throws_error([&] { gpu_info(bad); }, {index}));
        Conv3dMinSoftmax m(3, 4, 3, 2, DeviceChoice::GPU, 1);
        EXPECT_TRUE(throws_error([&] { m.to(Device::GPU, bad); }, {index, "out of range"}));
        EXPECT_EQ(m.device(), Device::GPU);  // unchanged by the failed move
        EXPECT_EQ(m.device_index(), 0);
        EXPECT_EQ(m.conv_weight().device_index(), 0);
    }
}

// Every model on a non-blocking stream: the call queues its work there, and
// waiting for that stream alone (no device-wide synchronization after the
// call) gives the float64 result.
TEST(GpuStreams, EveryModelOnACallerStreamIsCorrectAfterWaitingForThatStreamOnly) {
    FUSEDCONV_REQUIRE_GPU();
    Stream s;
    Conv3dMinSoftmax p24(3, 6, 3, 2, DeviceChoice::GPU, 2);
    Conv2dMinTanhTanh p25(3, 7, 3, DeviceChoice::GPU, 3);
    Conv2dScaleMin p32(3, 7, 3, -2.0f, DeviceChoice::GPU, 4);
    Conv3dGroupNormMinClampDropout p83(3, 8, 3, 4, 0.5f, 0.4f, 0.2f, DeviceChoice::GPU, 5);
    p83.set_clamp(-0.5f, 0.7f);
    Tensor x5 = random_tensor({2, 3, 5, 9, 8}, 6), x4 = random_tensor({3, 3, 11, 13}, 7);
    Tensor d5 = x5.to(Device::GPU), d4 = x4.to(Device::GPU);
    // The uploads ran on the legacy stream, which a non-blocking stream does
    // not wait for: finish them first (the only device-wide wait here).
    synchronize();
    struct Case {
        Model *m;
        Tensor in;
        HostTensor ref;
    };
    const Case cases[] = {{&p24, d5, p24_reference(p24, x5)},
                          {&p25, d4, p25_reference(p25, x4)},
                          {&p32, d4, p32_reference(p32, x4)},
                          {&p83, d5, p83_reference(p83, x5)}};
    for (const Case &c : cases) {
        // forward() allocates its output on the stream; forward_into writes
        // into an output filled beforehand.
        Tensor a = c.m->forward(c.in, s.options());
        Tensor b = poisoned(c.ref.shape);
        synchronize();  // the poison's upload, before the stream's work
        c.m->forward_into(c.in, b, s.options());
        s.sync();
        EXPECT_EQ(a.device_index(), 0);
        EXPECT_TRUE(matches(a, c.ref, 1e-4));
        EXPECT_TRUE(matches(b, c.ref, 1e-4));
    }
}

// Two threads, each on its own stream, at the same time and repeatedly:
// p83 and p32 allocate intermediates from Halide's cache inside the call,
// so a cache that handed one stream's in-use memory to the other would
// corrupt results. Also one model shared by both threads.
TEST(GpuStreams, TwoThreadsOnTwoStreamsAtOnceAreCorrect) {
    FUSEDCONV_REQUIRE_GPU();
    Stream s0, s1;
    Conv3dGroupNormMinClampDropout p83(3, 8, 3, 2, 2.0f, 2.0f, 0.2f, DeviceChoice::GPU, 8);
    p83.set_clamp(-1.0f, 2.0f);  // GroupNorm values reach the output
    p83.set_training(false);
    Conv2dScaleMin shared(4, 9, 3, 1.25f, DeviceChoice::GPU, 9);
    Tensor x5[2] = {random_tensor({2, 3, 6, 12, 10}, 10), random_tensor({2, 3, 6, 12, 10}, 11)};
    Tensor x4[2] = {random_tensor({2, 4, 15, 14}, 12), random_tensor({2, 4, 15, 14}, 13)};
    HostTensor ref83[2], ref32[2];
    Tensor d5[2], d4[2];
    for (int t = 0; t < 2; ++t) {
        ref83[t] = p83_reference(p83, x5[t]);
        ref32[t] = p32_reference(shared, x4[t]);
        d5[t] = x5[t].to(Device::GPU);
        d4[t] = x4[t].to(Device::GPU);
    }
    synchronize();
    const Stream *streams[2] = {&s0, &s1};
    bool ok[2] = {true, true};
    auto work = [&](int t) {
        const ExecOptions o = streams[t]->options();
        for (int i = 0; i < 20; ++i) {
            Tensor a = p83.forward(d5[t], o);
            Tensor b = shared.forward(d4[t], o);  // waits for the stream (NaN check)
            streams[t]->sync();
            ok[t] = ok[t] && matches(a, ref83[t], 1e-4) && matches(b, ref32[t], 1e-4);
        }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    EXPECT_TRUE(ok[0]);
    EXPECT_TRUE(ok[1]);
}

// p83's batch in two halves (batch_halves.h): the first half on the caller's stream, the second
// on the device's side stream, joined before the NaN check. Forced on small batches (3: halves of
// 1 and 2; 2: of 1 and 1), from two threads on two streams at once (both halves' second parts on
// the one side stream), with a NaN in a second half's sample (recomputed in the direct form after
// the join): every output is bit for bit the one call's, and the float64 result.
TEST(GpuStreams, P83BatchInTwoHalvesGivesTheOneCallsOutput) {
    FUSEDCONV_REQUIRE_GPU();
    struct Restore {
        detail::BatchHalves before = detail::batch_halves();
        ~Restore() { detail::set_batch_halves(before); }
    } restore;
    Conv3dGroupNormMinClampDropout p83(3, 8, 3, 2, 2.0f, 2.0f, 0.2f, DeviceChoice::GPU, 14);
    p83.set_clamp(-1.0f, 2.0f);  // GroupNorm values reach the output; training: dropout too
    Tensor x[2] = {random_tensor({3, 3, 6, 12, 10}, 15), random_tensor({2, 3, 5, 9, 11}, 16)};
    x[0].data()[2 * 3 * 6 * 12 * 10 + 77] = NAN;  // sample 2: the second half's second sample
    HostTensor ref[2];
    Tensor d[2];
    std::vector<float> one_call[2];
    detail::set_batch_halves(detail::BatchHalves::Never);
    for (int t = 0; t < 2; ++t) {
        ref[t] = p83_reference(p83, x[t]);
        d[t] = x[t].to(Device::GPU);
        one_call[t] = p83.forward(d[t]).to_vector();
        ASSERT_TRUE(matches(Tensor::from_vector(ref[t].shape, one_call[t]), ref[t], 1e-4));
    }
    synchronize();
    detail::set_batch_halves(detail::BatchHalves::Always);
    const int64_t runs_before = detail::batch_halves_runs();
    Stream s0, s1;
    const Stream *streams[2] = {&s0, &s1};
    bool same[2] = {true, true}, close[2] = {true, true};
    constexpr int kCalls = 10;
    auto work = [&](int t) {
        for (int i = 0; i < kCalls; ++i) {
            Tensor a = p83.forward(d[t], streams[t]->options());  // waits for the stream (NaN check)
            const std::vector<float> v = a.to_vector();
            same[t] = same[t] && v.size() == one_call[t].size() &&
                      std::memcmp(v.data(), one_call[t].data(), v.size() * sizeof(float)) == 0;
            close[t] = close[t] && matches(a, ref[t], 1e-4);
        }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    EXPECT_EQ(detail::batch_halves_runs() - runs_before, 2 * kCalls);
    for (int t = 0; t < 2; ++t) {
        EXPECT_TRUE(same[t]) << "input " << t << ": the halves' output differs from the one call's";
        EXPECT_TRUE(close[t]) << "input " << t;
    }
}

// Graph capture: p24 (kernels only) is recorded and its replay writes the
// output; p25 / p32 / p83 (device allocations, host round trip) are refused
// with an Error before queuing anything, and the capture stays valid.
TEST(GpuGraphs, CaptureRecordsP24AndRefusesModelsThatAllocate) {
    FUSEDCONV_REQUIRE_GPU();
    Stream s;
    Tensor x5 = random_tensor({2, 3, 5, 7, 9}, 14), x4 = random_tensor({1, 3, 6, 6}, 15);
    Tensor w = uniform({5, 3, 3, 3, 3}, 16, 0.2f), b = uniform({5}, 17, 0.2f);
    Tensor w4 = uniform({4, 3, 3, 3}, 18, 0.2f), b4 = uniform({4}, 19, 0.2f);
    Tensor g = uniform({5}, 20, 1.0f), be = uniform({5}, 21, 1.0f);
    const HostTensor ref = reference::p24(host_copy(x5), host_copy(w), host_copy(b));
    Tensor dx5 = x5.to(Device::GPU), dw = w.to(Device::GPU), db = b.to(Device::GPU);
    Tensor dx4 = x4.to(Device::GPU), dw4 = w4.to(Device::GPU), db4 = b4.to(Device::GPU);
    Tensor dg = g.to(Device::GPU), dbe = be.to(Device::GPU);
    Tensor out = poisoned(ref.shape);
    Tensor out25 = Tensor::empty(p25_output_shape(x4.shape(), w4.shape()), Device::GPU);
    Tensor out83 = Tensor::empty(p83_output_shape(x5.shape(), w.shape(), 5), Device::GPU);
    Tensor warm = Tensor::empty(ref.shape, Device::GPU);
    synchronize();
    // Outside the capture first, so that p24's kernels are loaded.
    p24_forward(dx5, dw, db, 2, warm, s.options());
    s.sync();

    cuda::begin_capture(0, s.handle);
    p24_forward(dx5, dw, db, 2, out, s.options());
    const std::initializer_list<std::string> keys = {"captured into a CUDA graph",
                                                     "allocates device memory"};
    EXPECT_TRUE(throws_error([&] { p25_forward(dx4, dw4, db4, out25, s.options()); }, keys));
    EXPECT_TRUE(throws_error([&] { p32_forward(dx4, dw4, db4, 2.0f, out25, s.options()); }, keys));
    P83Params p;
    p.groups = 5;
    EXPECT_TRUE(
        throws_error([&] { p83_forward(dx5, dw, db, dg, dbe, p, out83, s.options()); }, keys));
    void *graph = cuda::end_capture(0, s.handle);  // throws if the capture was invalidated
    ASSERT_NE(graph, nullptr);
    // Captured, not run: the output still holds the poison.
    EXPECT_EQ(out.to_vector()[0], -12345.0f);
    cuda::launch_graph_and_wait(0, graph, s.handle);
    cuda::graph_destroy(graph);
    EXPECT_TRUE(matches(out, ref));
    // Outside a capture the same calls work.
    p25_forward(dx4, dw4, db4, out25, s.options());
    EXPECT_TRUE(matches(out25, reference::p25(host_copy(x4), host_copy(w4), host_copy(b4))));
}

TEST(GpuStreams, PerThreadDefaultStreamIsRefused) {
    FUSEDCONV_REQUIRE_GPU();
    Conv3dMinSoftmax m(3, 4, 3, 2, DeviceChoice::GPU, 22);
    Tensor x = random_tensor({1, 3, 4, 4, 4}, 23).to(Device::GPU);
    ExecOptions o;
    o.stream = reinterpret_cast<void *>(uintptr_t{0x2});  // CU_STREAM_PER_THREAD
    EXPECT_TRUE(throws_error([&] { m.forward(x, o); }, {"per-thread default stream"}));
    Tensor out = Tensor::empty(m.output_shape(x.shape()), Device::GPU);
    EXPECT_TRUE(throws_error([&] { p24_forward(x, m.conv_weight(), m.conv_bias(), 2, out, o); },
                             {"p24_forward", "per-thread default stream"}));
}

// ------------------------------------------------------ two GPUs or more

#define REQUIRE_TWO_GPUS()                                                              \
    do {                                                                                \
        FUSEDCONV_REQUIRE_GPU();                                                        \
        if (cuda_device_count() < 2) GTEST_SKIP() << "one CUDA device; multi-GPU test"; \
    } while (0)

TEST(GpuDevices, ModelsRunOnTheSecondDevice) {
    REQUIRE_TWO_GPUS();
    Conv3dGroupNormMinClampDropout p83(3, 8, 3, 4, 0.5f, 0.4f, 0.2f, DeviceChoice::CPU, 24);
    p83.set_clamp(-0.5f, 0.7f);
    p83.to(Device::GPU, 1);
    EXPECT_EQ(p83.device_index(), 1);
    EXPECT_EQ(p83.norm_weight().device_index(), 1);
    Conv2dMinTanhTanh p25(3, 5, 3, DeviceChoice::CPU, 25);
    p25.to(Device::GPU, 1);
    Tensor x5 = random_tensor({2, 3, 5, 7, 6}, 26), x4 = random_tensor({2, 3, 8, 9}, 27);
    Stream s1(1);
    Tensor d5 = x5.to(Device::GPU, 1), d4 = x4.to(Device::GPU, 1);
    synchronize();
    Tensor a = p83.forward(d5, s1.options());
    Tensor b = p25.forward(d4, s1.options());
    s1.sync();
    EXPECT_EQ(a.device_index(), 1);
    EXPECT_TRUE(matches(a, p83_reference(p83, x5), 1e-4));
    EXPECT_TRUE(matches(b, p25_reference(p25, x4)));
    // An input on device 0 for a model on device 1, and a stream of device 1
    // for tensors on device 0, are refused by name.
    EXPECT_TRUE(throws_error([&] { p25.forward(x4.to(Device::GPU, 0)); },
                             {"cuda:0", "cuda:1"}));
    Conv2dMinTanhTanh on0(3, 5, 3, DeviceChoice::GPU, 28);
    EXPECT_TRUE(throws_error([&] { on0.forward(x4.to(Device::GPU, 0), s1.options()); },
                             {"belongs to another device"}));
    // Copies between the two devices.
    EXPECT_EQ(d4.to(Device::GPU, 0).to_vector(), x4.to_vector());
}

TEST(GpuDevices, TwoDevicesAtOnceFromTwoThreads) {
    REQUIRE_TWO_GPUS();
    Conv3dGroupNormMinClampDropout m[2] = {
        {3, 8, 3, 2, 2.0f, 2.0f, 0.2f, DeviceChoice::CPU, 29},
        {3, 8, 3, 2, 2.0f, 2.0f, 0.2f, DeviceChoice::CPU, 29}};
    for (auto &model : m) {
        model.set_clamp(-1.0f, 2.0f);  // GroupNorm values reach the output
        model.set_training(false);
    }
    Tensor x = random_tensor({2, 3, 6, 10, 9}, 30);
    const HostTensor ref = p83_reference(m[0], x);
    bool ok[2] = {true, true};
    auto work = [&](int d) {
        m[d].to(Device::GPU, d);
        Tensor dx = x.to(Device::GPU, d);
        for (int i = 0; i < 10; ++i) ok[d] = ok[d] && matches(m[d].forward(dx), ref, 1e-4);
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    EXPECT_TRUE(ok[0]);
    EXPECT_TRUE(ok[1]);
}

}  // namespace
