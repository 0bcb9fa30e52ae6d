// GPU faults: device memory runs out. Allocations that do not fit give a
// clear fusedconv::Error (naming the shape), a forward while memory is full
// fails cleanly or succeeds, and once the memory is freed every model runs on
// the GPU again and matches the CPU and the float64 reference. GPU only:
// skipped with a message without one (DeviceChoice::GPU throwing and Auto
// falling back without a GPU are in test_models' ModelErrors).
#include "test_util.h"

#include "fusedconv/device.h"
#include "fusedconv/models.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;

// The largest tensor Halide's 32-bit indexing allows: 2^29 - 1 floats, 2 GiB.
constexpr int64_t kChunk = (int64_t{1} << 29) - 1;

struct Pair {
    std::string name;
    std::unique_ptr<Model> gpu, cpu;  // same seed: same parameters
    Tensor input;                     // host
    std::function<HostTensor(const Model &, const Tensor &)> reference;
};

std::vector<Pair> make_pairs() {
    std::vector<Pair> v;
    auto p24 = [](DeviceChoice d) { return std::make_unique<Conv3dMinSoftmax>(3, 24, 3, 2, d, 5); };
    auto p25 = [](DeviceChoice d) { return std::make_unique<Conv2dMinTanhTanh>(16, 8, 3, d, 6); };
    auto p32 = [](DeviceChoice d) { return std::make_unique<Conv2dScaleMin>(8, 16, 3, -2.0f, d, 7); };
    auto p83 = [](DeviceChoice d) {
        auto m = std::make_unique<Conv3dGroupNormMinClampDropout>(3, 16, 3, 8, 0.5f, -0.5f, 0.3f,
                                                                  d, 8);
        m->set_clamp(-1.5f, 0.75f);  // GroupNorm reaches the output
        return m;
    };
    v.push_back({"p24", p24(DeviceChoice::GPU), p24(DeviceChoice::CPU),
                 random_tensor({2, 3, 6, 17, 19}, 1),
                 [](const Model &m, const Tensor &in) {
                     return p24_reference(m, in);
                 }});
    v.push_back({"p25", p25(DeviceChoice::GPU), p25(DeviceChoice::CPU),
                 random_tensor({2, 16, 21, 23}, 2),
                 [](const Model &m, const Tensor &in) {
                     return p25_reference(m, in);
                 }});
    v.push_back({"p32", p32(DeviceChoice::GPU), p32(DeviceChoice::CPU),
                 random_tensor({2, 8, 33, 29}, 3),
                 [](const Model &m, const Tensor &in) {
                     auto &x = static_cast<const Conv2dScaleMin &>(m);
                     return p32_reference(x, in);
                 }});
    v.push_back({"p83", p83(DeviceChoice::GPU), p83(DeviceChoice::CPU),
                 random_tensor({2, 3, 6, 19, 17}, 4),
                 [](const Model &m, const Tensor &in) {
                     return p83_reference(static_cast<const Conv3dGroupNormMinClampDropout &>(m),
                                          in);
                 }});
    return v;
}

// Every model on the GPU: matches the float64 reference, and the CPU.
void check_all_models(std::vector<Pair> &pairs, const char *when) {
    for (Pair &p : pairs) {
        SCOPED_TRACE(p.name + " " + when);
        Tensor out = p.gpu->forward(p.input.to(Device::GPU));
        ASSERT_EQ(out.device(), Device::GPU);
        EXPECT_TRUE(matches(out, p.reference(*p.gpu, p.input)));
        const HostTensor cpu = host_copy(p.cpu->forward(p.input));
        EXPECT_TRUE(matches(out, cpu, 2e-5)) << "GPU against CPU";
    }
}

TEST(GpuFaults, DeviceMemoryExhaustionIsAnErrorAndTheGpuRecovers) {
    FUSEDCONV_REQUIRE_GPU();
    size_t free_before = 0, total = 0;
    gpu_memory(&free_before, &total);
    std::printf("[ info     ] %s: %.1f of %.1f GiB free\n", gpu_info().name.c_str(),
                free_before / 1073741824.0, total / 1073741824.0);

    // Warm up: every pipeline's kernels are compiled and loaded before the
    // memory runs out.
    std::vector<Pair> pairs = make_pairs();
    check_all_models(pairs, "before");
    // A larger p83 problem whose input (3.2 MB) is on the device before the
    // memory runs out and whose output (14.7 MB) will not fit afterwards.
    Pair &p83 = pairs.back();
    Tensor big_in_host = random_tensor({1, 3, 16, 130, 130}, 9);
    Tensor big_in = big_in_host.to(Device::GPU);
    const Shape big_out_shape = p83.gpu->output_shape(big_in.shape());
    Tensor preallocated_out = Tensor::empty(big_out_shape, Device::GPU);
    // Nothing kept in Halide's cache of device allocations, so the forwards
    // below cannot reuse a buffer freed earlier.
    release_cached_gpu_memory();

    // 2 GiB tensors until the device refuses one: at most total / 2 GiB + 2
    // tries. They stay alive; the failing one is an Error naming its shape.
    std::vector<Tensor> hold;
    std::string message;
    const size_t max_tries = total / (static_cast<size_t>(kChunk) * 4) + 2;
    for (size_t i = 0; i < max_tries && message.empty(); ++i) {
        try {
            hold.push_back(Tensor::empty({kChunk}, Device::GPU));
        } catch (const Error &e) {
            message = e.what();
        }
    }
    ASSERT_FALSE(message.empty()) << "allocated " << hold.size() << " x 2 GiB on a "
                                  << total / 1073741824.0 << " GiB device without an error";
    std::printf("[ info     ] after %zu x 2 GiB: %s\n", hold.size(), message.c_str());
    EXPECT_NE(message.find("allocating a GPU tensor of shape (" + std::to_string(kChunk) + ",)"),
              std::string::npos)
        << message;
    // Fill the rest with halving chunks down to 4 KiB, so what is left cannot
    // hold the outputs below (nor, most likely, a pipeline's own buffers).
    for (int64_t chunk = kChunk / 2; chunk >= (1 << 10); chunk /= 2) {
        while (true) {
            try {
                hold.push_back(Tensor::empty({chunk}, Device::GPU));
            } catch (const Error &) {
                break;
            }
        }
    }
    size_t free_full = 0;
    gpu_memory(&free_full, &total);
    std::printf("[ info     ] device memory full: %zu tensors held, %.1f MiB free\n", hold.size(),
                free_full / 1048576.0);

    // While it is full: an allocation that does not fit is an Error, so is
    // a forward whose output does not fit; a forward into an output that
    // exists fails with an Error if the pipeline's own buffers do not fit,
    // and otherwise gives the right values. Small problems either fail with
    // an Error or give the right values.
    EXPECT_TRUE(throws_error([] { Tensor::empty({1 << 24}, Device::GPU); },
                             {"allocating a GPU tensor", "(16777216,)"}));
    EXPECT_TRUE(throws_error([&] { p83.gpu->forward(big_in); },
                             {"allocating a GPU tensor", shape_string(big_out_shape)}));
    const HostTensor big_ref = p83.reference(*p83.gpu, big_in_host);
    // The conv's rounding carried through GroupNorm (test_util.h): the GPU
    // takes the F(4x4, 3x3) form for this 3x3x3 kernel.
    const std::vector<double> big_allow = p83_conv_allowance(
        static_cast<const Conv3dGroupNormMinClampDropout &>(*p83.gpu), big_in_host);
    auto big_matches = [&](const Tensor &out) {
        return matches_values(out.shape(), out.to_vector(), big_ref, 2e-5, 0.0, big_allow);
    };
    auto forward_while_full = [](const std::string &what, const std::function<Tensor()> &run,
                                 const std::function<::testing::AssertionResult(const Tensor &)>
                                     &check) {
        try {
            Tensor out = run();
            EXPECT_TRUE(check(out)) << what << " while full";
            std::printf("[ info     ] %s while full: ran (its buffers fit)\n", what.c_str());
        } catch (const Error &e) {
            std::printf("[ info     ] %s while full: Error: %s\n", what.c_str(), e.what());
        }
    };
    forward_while_full("p83 forward_into a preallocated output",
                       [&] {
                           p83.gpu->forward_into(big_in, preallocated_out);
                           return preallocated_out;
                       },
                       big_matches);
    for (Pair &p : pairs) {
        const HostTensor ref = p.reference(*p.gpu, p.input);
        forward_while_full(p.name, [&] { return p.gpu->forward(p.input.to(Device::GPU)); },
                           [&](const Tensor &out) { return matches(out, ref); });
    }

    // Freed (and Halide's cache of device allocations given back), the
    // memory is available again and every model works.
    hold.clear();
    release_cached_gpu_memory();
    size_t free_after = 0;
    gpu_memory(&free_after, &total);
    std::printf("[ info     ] freed: %.1f GiB free\n", free_after / 1073741824.0);
    EXPECT_GE(free_after + (size_t{256} << 20), free_before)
        << "device memory not returned after freeing";
    check_all_models(pairs, "after");
    EXPECT_TRUE(big_matches(p83.gpu->forward(big_in))) << "p83, larger, after";
    p83.gpu->forward_into(big_in, preallocated_out);
    EXPECT_TRUE(big_matches(preallocated_out)) << "p83 forward_into, after";
    // And a 2 GiB tensor fits again.
    EXPECT_NO_THROW(Tensor::empty({kChunk}, Device::GPU));
}

}  // namespace
