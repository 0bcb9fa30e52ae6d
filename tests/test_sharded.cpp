// Data-parallel forward (fusedconv/sharded.h) and Tensor::batch_range: the
// split of the batch, bit-identical results against one replica's forward
// for every model, replica count and batch (CPU replicas; GPU replicas when a
// GPU is present, else skipped with a message), and the error paths.
#include "test_util.h"

#include "fusedconv/device.h"
#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "fusedconv/sharded.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;  // random_tensor, throws_error

// ------------------------------------------------------------ helpers

enum class Kind { P24, P25, P32, P83 };
const Kind kKinds[] = {Kind::P24, Kind::P25, Kind::P32, Kind::P83};

const char *name(Kind k) {
    switch (k) {
        case Kind::P24: return "p24";
        case Kind::P25: return "p25";
        case Kind::P32: return "p32";
        default: return "p83";
    }
}

// Small odd shapes; p25 and p32 with 3x3 kernels take the Winograd path.
Shape input_shape(Kind k, int64_t batch, int in_channels = 3) {
    switch (k) {
        case Kind::P24: return {batch, in_channels, 4, 6, 7};
        case Kind::P25: return {batch, in_channels, 9, 11};
        case Kind::P32: return {batch, in_channels, 8, 10};
        default: return {batch, in_channels, 4, 6, 5};
    }
}

// Replicas of one kind built from the same seed hold the same parameters.
// p83 runs in eval mode unless `training`.
std::unique_ptr<Model> make(Kind k, DeviceChoice d, int in_channels = 3, bool training = false,
                            float dropout_p = 0.3f) {
    const uint64_t seed = 11;
    switch (k) {
        case Kind::P24: return std::make_unique<Conv3dMinSoftmax>(in_channels, 5, 3, 2, d, seed);
        case Kind::P25: return std::make_unique<Conv2dMinTanhTanh>(in_channels, 6, 3, d, seed);
        case Kind::P32:
            return std::make_unique<Conv2dScaleMin>(in_channels, 5, 3, 1.7f, d, seed);
        default: {
            auto m = std::make_unique<Conv3dGroupNormMinClampDropout>(
                in_channels, 8, 3, 4, -0.2f, 0.6f, dropout_p, d, seed);
            m->set_clamp(-0.5f, 0.8f);  // GroupNorm reaches the output
            m->set_training(training);
            m->set_dropout_seed(5);
            return m;
        }
    }
}

struct Replicas {
    std::vector<std::unique_ptr<Model>> owned;
    std::vector<Model *> list() const {
        std::vector<Model *> out;
        for (const auto &m : owned) out.push_back(m.get());
        return out;
    }
};

Replicas make_replicas(Kind k, int count, DeviceChoice d) {
    Replicas r;
    for (int i = 0; i < count; ++i) r.owned.push_back(make(k, d));
    return r;
}

// Same bits everywhere (NaN payloads included), with the first difference.
::testing::AssertionResult bit_identical(const Tensor &a, const Tensor &b) {
    if (a.shape() != b.shape()) {
        return ::testing::AssertionFailure()
               << "shapes " << shape_string(a.shape()) << " and " << shape_string(b.shape());
    }
    const std::vector<float> x = a.to_vector(), y = b.to_vector();
    for (size_t i = 0; i < x.size(); ++i) {
        if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) {
            return ::testing::AssertionFailure()
                   << "differ at " << index_string(a.shape(), static_cast<int64_t>(i)) << ": "
                   << x[i] << " vs " << y[i];
        }
    }
    return ::testing::AssertionSuccess();
}

// ------------------------------------------------------------ shard_ranges

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(ShardRanges, EvenAndUnevenSplits) {
    EXPECT_EQ(shard_ranges(6, 3), (Ranges{{0, 2}, {2, 4}, {4, 6}}));
    EXPECT_EQ(shard_ranges(7, 3), (Ranges{{0, 3}, {3, 5}, {5, 7}}));
    EXPECT_EQ(shard_ranges(7, 5), (Ranges{{0, 2}, {2, 4}, {4, 5}, {5, 6}, {6, 7}}));
    EXPECT_EQ(shard_ranges(5, 1), (Ranges{{0, 5}}));
}

TEST(ShardRanges, FewerSamplesThanReplicasLeavesTheRestIdle) {
    EXPECT_EQ(shard_ranges(2, 5), (Ranges{{0, 1}, {1, 2}}));
    EXPECT_EQ(shard_ranges(1, 3), (Ranges{{0, 1}}));
}

TEST(ShardRanges, RefusesNonPositiveCounts) {
    EXPECT_TRUE(throws_error([] { shard_ranges(0, 2); }, {"batch 0"}));
    EXPECT_TRUE(throws_error([] { shard_ranges(4, 0); }, {"0 replicas"}));
}

// ------------------------------------------------------------ batch_range

TEST(BatchRange, SharesStorageWithTheWholeTensor) {
    Tensor t = random_tensor({5, 2, 3}, 1);
    Tensor v = t.batch_range(1, 4);
    EXPECT_EQ(v.shape(), (Shape{3, 2, 3}));
    EXPECT_EQ(v.data(), t.data() + 6);
    v.data()[0] = 42.0f;  // visible through the whole tensor
    EXPECT_EQ(t.data()[6], 42.0f);
    // A view of a view, alive after both the tensor and the first view go.
    Tensor inner = v.batch_range(2, 3);
    const std::vector<float> expected(t.data() + 18, t.data() + 24);
    t = Tensor();
    v = Tensor();
    EXPECT_EQ(inner.shape(), (Shape{1, 2, 3}));
    EXPECT_EQ(inner.to_vector(), expected);
}

TEST(BatchRange, RefusesRangesOutsideTheBatch) {
    Tensor t = random_tensor({4, 3}, 2);
    EXPECT_TRUE(throws_error([&] { t.batch_range(-1, 2); }, {"batch_range(-1, 2)", "(4, 3)"}));
    EXPECT_TRUE(throws_error([&] { t.batch_range(2, 5); }, {"batch_range(2, 5)", "<= 4"}));
    EXPECT_TRUE(throws_error([&] { t.batch_range(2, 2); }, {"batch_range(2, 2)"}));
    EXPECT_TRUE(throws_error([] { Tensor().batch_range(0, 1); }, {"undefined"}));
}

TEST(BatchRange, GpuViewSharesDeviceStorage) {
    FUSEDCONV_REQUIRE_GPU();
    Tensor host = random_tensor({4, 3, 5}, 3);
    Tensor gpu = host.to(Device::GPU);
    Tensor v = gpu.batch_range(1, 3);
    EXPECT_EQ(v.device(), Device::GPU);
    EXPECT_EQ(static_cast<char *>(v.device_data()),
              static_cast<char *>(gpu.device_data()) + 15 * sizeof(float));
    const std::vector<float> expected(host.data() + 15, host.data() + 45);
    EXPECT_EQ(v.to_vector(), expected);
}

// ------------------------------------------------------------ CPU replicas

// Every model, 1/2/3/5 replicas, batches 1/2/5/7 (uneven splits and fewer
// samples than replicas among them): the same bits as one forward.
TEST(ShardedCpu, BitIdenticalToOneForward) {
    for (Kind k : kKinds) {
        std::unique_ptr<Model> single = make(k, DeviceChoice::CPU);
        for (int64_t batch : {1, 2, 5, 7}) {
            Tensor in = random_tensor(input_shape(k, batch), 100 + batch);
            Tensor expected = single->forward(in);
            for (int count : {1, 2, 3, 5}) {
                SCOPED_TRACE(std::string(name(k)) + " batch " + std::to_string(batch) + ", " +
                             std::to_string(count) + " replicas");
                Replicas r = make_replicas(k, count, DeviceChoice::CPU);
                EXPECT_TRUE(bit_identical(sharded_forward(r.list(), in), expected));
            }
        }
    }
}

TEST(ShardedCpu, IntoCallerMemoryAndWholeBatchOfOneReplica) {
    Replicas r = make_replicas(Kind::P32, 3, DeviceChoice::CPU);
    Tensor in = random_tensor(input_shape(Kind::P32, 7), 7);
    Tensor expected = r.owned[0]->forward(in);
    std::vector<float> storage(expected.numel(), -1.0f);
    Tensor out = Tensor::wrap_host(storage.data(), expected.shape());
    sharded_forward_into(r.list(), in, out);
    EXPECT_TRUE(bit_identical(out, expected));
    // The same replica listed three times: its forwards run concurrently.
    std::vector<Model *> same(3, r.owned[1].get());
    EXPECT_TRUE(bit_identical(sharded_forward(same, in), expected));
}

TEST(ShardedCpu, P83DropoutIndexKeyedMaskIsRefusedWhenSplit) {
    auto a = make(Kind::P83, DeviceChoice::CPU, 3, /*training=*/true);
    auto b = make(Kind::P83, DeviceChoice::CPU, 3, /*training=*/true);
    Tensor in = random_tensor(input_shape(Kind::P83, 3), 9);
    EXPECT_TRUE(throws_error([&] { sharded_forward({a.get(), b.get()}, in); },
                             {"replica 1", "training mode", "dropout p = 0.3", "index",
                              "[2, 3)", "set_training(false)"}));
    // One shard starting at sample 0 draws the whole-batch mask.
    EXPECT_TRUE(bit_identical(sharded_forward({a.get()}, in), a->forward(in)));
    Tensor one = random_tensor(input_shape(Kind::P83, 1), 10);
    EXPECT_TRUE(bit_identical(sharded_forward({a.get(), b.get()}, one), a->forward(one)));
    // p = 0 and p = 1 keep all or none, whatever the index.
    for (float p : {0.0f, 1.0f}) {
        static_cast<Conv3dGroupNormMinClampDropout &>(*a).set_dropout_p(p);
        static_cast<Conv3dGroupNormMinClampDropout &>(*b).set_dropout_p(p);
        SCOPED_TRACE("p " + std::to_string(p));
        EXPECT_TRUE(bit_identical(sharded_forward({a.get(), b.get()}, in), a->forward(in)));
    }
}

// ------------------------------------------------------------ errors

TEST(ShardedErrors, BadArgumentsAreNamed) {
    Replicas r = make_replicas(Kind::P24, 2, DeviceChoice::CPU);
    Tensor in = random_tensor(input_shape(Kind::P24, 3), 4);
    Tensor out = r.owned[0]->forward(in);
    EXPECT_TRUE(throws_error([&] { sharded_forward({}, in); }, {"replica list is empty"}));
    EXPECT_TRUE(throws_error([&] { sharded_forward_into({}, in, out); }, {"empty"}));
    EXPECT_TRUE(throws_error([&] { sharded_forward({r.owned[0].get(), nullptr}, in); },
                             {"replica 1 is null"}));
    EXPECT_TRUE(throws_error([&] { sharded_forward(r.list(), Tensor()); }, {"input", "undefined"}));
    Tensor none;
    EXPECT_TRUE(throws_error([&] { sharded_forward_into(r.list(), in, none); },
                             {"output", "undefined"}));
    Tensor wrong = Tensor::empty({3, 5, 2, 4});
    EXPECT_TRUE(throws_error([&] { sharded_forward_into(r.list(), in, wrong); },
                             {"(3, 5, 2, 4)", "expected (3, 5, 4, 5)", "(3, 3, 4, 6, 7)"}));
    // An input the models refuse: named by the models' own check.
    EXPECT_TRUE(throws_error([&] { sharded_forward(r.list(), random_tensor({3, 2, 4, 6, 7}, 5)); },
                             {"(3, 2, 4, 6, 7)"}));
}

TEST(ShardedErrors, OutputSharingInputStorageIsRefused) {
    Replicas r = make_replicas(Kind::P32, 2, DeviceChoice::CPU);
    const Shape in_shape = input_shape(Kind::P32, 2);
    const Shape out_shape = r.owned[0]->output_shape(in_shape);
    std::vector<float> storage(2 * 3 * 8 * 10, 0.5f);
    Tensor in = Tensor::wrap_host(storage.data(), in_shape);
    Tensor out = Tensor::wrap_host(storage.data() + 100, out_shape);
    EXPECT_TRUE(throws_error([&] { sharded_forward_into(r.list(), in, out); },
                             {"shares storage", shape_string(out_shape)}));
}

// A replica built with other in_channels fails its shard: the error names
// its index, device and samples; the other shards' threads are joined.
TEST(ShardedErrors, FailingShardNamesItsReplica) {
    for (Kind k : kKinds) {
        SCOPED_TRACE(name(k));
        auto good0 = make(k, DeviceChoice::CPU), good1 = make(k, DeviceChoice::CPU);
        auto bad = make(k, DeviceChoice::CPU, /*in_channels=*/2);
        Tensor in = random_tensor(input_shape(k, 5), 6);
        EXPECT_TRUE(throws_error([&] { sharded_forward({good0.get(), good1.get(), bad.get()}, in); },
                                 {"replica 2 (cpu)", "samples [4, 5)", "the model expects 2"}));
        auto bad2 = make(k, DeviceChoice::CPU, 4);
        EXPECT_TRUE(throws_error(
            [&] { sharded_forward({good0.get(), bad2.get(), bad.get()}, in); },
            {"replica 1 (cpu)", "samples [2, 4)", "and 1 more replica failed"}));
    }
}

// ------------------------------------------------------------ GPU replicas

// Two replicas on GPU 0 (one GPU suffices): device input and output (shards
// run in place on views), host input and output (through copies), and a
// CPU replica beside a GPU one (each shard as its own device computes it).
TEST(ShardedGpu, BitIdenticalToOneForward) {
    FUSEDCONV_REQUIRE_GPU();
    for (Kind k : kKinds) {
        std::unique_ptr<Model> single = make(k, DeviceChoice::GPU);
        std::unique_ptr<Model> cpu = make(k, DeviceChoice::CPU);
        Replicas r = make_replicas(k, 2, DeviceChoice::GPU);
        for (int64_t batch : {1, 2, 5, 7}) {
            SCOPED_TRACE(std::string(name(k)) + " batch " + std::to_string(batch));
            Tensor host_in = random_tensor(input_shape(k, batch), 200 + batch);
            Tensor gpu_in = host_in.to(Device::GPU);
            Tensor expected = single->forward(gpu_in);
            Tensor on_gpu = sharded_forward(r.list(), gpu_in);
            EXPECT_EQ(on_gpu.device(), Device::GPU);
            EXPECT_TRUE(bit_identical(on_gpu, expected));
            Tensor on_host = sharded_forward(r.list(), host_in);
            EXPECT_EQ(on_host.device(), Device::CPU);
            EXPECT_TRUE(bit_identical(on_host, expected));

            Tensor mixed = sharded_forward({cpu.get(), r.owned[1].get()}, host_in);
            const auto ranges = shard_ranges(batch, 2);
            const Tensor from_cpu = cpu->forward(host_in);
            EXPECT_TRUE(bit_identical(mixed.batch_range(0, ranges[0].second),
                                      from_cpu.batch_range(0, ranges[0].second)));
            if (ranges.size() == 2) {
                EXPECT_TRUE(bit_identical(mixed.batch_range(ranges[1].first, batch),
                                          expected.batch_range(ranges[1].first, batch)));
            }
        }
    }
}

TEST(ShardedGpu, FailingGpuShardNamesItsDevice) {
    FUSEDCONV_REQUIRE_GPU();
    auto good = make(Kind::P25, DeviceChoice::GPU);
    auto bad = make(Kind::P25, DeviceChoice::GPU, 2);
    Tensor in = random_tensor(input_shape(Kind::P25, 3), 12).to(Device::GPU);
    EXPECT_TRUE(throws_error([&] { sharded_forward({good.get(), bad.get()}, in); },
                             {"replica 1 (cuda:0)", "samples [2, 3)"}));
}

// ------------------------------------------------------------ two GPUs

#define REQUIRE_TWO_GPUS()                                                                    \
    do {                                                                                      \
        FUSEDCONV_REQUIRE_GPU();                                                              \
        if (cuda_device_count() < 2) {                                                        \
            GTEST_SKIP() << cuda_device_count() << " CUDA device(s): needs 2 (peer copies)"; \
        }                                                                                     \
    } while (0)

// Tensor::to and the shards' copies between two GPUs go peer to peer.
TEST(TwoGpus, ToAndBackIsExact) {
    REQUIRE_TWO_GPUS();
    const Tensor host = random_tensor({3, 5, 7, 9}, 41);
    const Tensor on0 = host.to(Device::GPU, 0);
    const Tensor on1 = on0.to(Device::GPU, 1);
    EXPECT_EQ(on1.device_index(), 1);
    EXPECT_TRUE(bit_identical(on1, host));
    EXPECT_TRUE(bit_identical(on1.to(Device::GPU, 0), host));
    // A view's copy starts at its own first sample.
    EXPECT_TRUE(bit_identical(on0.batch_range(1, 3).to(Device::GPU, 1), host.batch_range(1, 3)));
}

// Replicas on GPU 0 and GPU 1 with the data on either GPU: the same bits
// as one forward on GPU 0, for every model and uneven batches.
TEST(TwoGpus, ShardedBitIdenticalToOneForward) {
    REQUIRE_TWO_GPUS();
    for (Kind k : kKinds) {
        std::unique_ptr<Model> single = make(k, DeviceChoice::GPU);
        Replicas r = make_replicas(k, 3, DeviceChoice::GPU);
        r.owned[1]->to(Device::GPU, 1);  // GPU 0, GPU 1, GPU 0
        for (int64_t batch : {1, 2, 5, 8}) {
            SCOPED_TRACE(std::string(name(k)) + " batch " + std::to_string(batch));
            const Tensor host_in = random_tensor(input_shape(k, batch), 300 + batch);
            const Tensor expected = single->forward(host_in.to(Device::GPU, 0));
            for (int data_gpu : {0, 1}) {
                SCOPED_TRACE("data on cuda:" + std::to_string(data_gpu));
                const Tensor in = host_in.to(Device::GPU, data_gpu);
                Tensor out = sharded_forward(r.list(), in);
                EXPECT_EQ(out.device_index(), data_gpu);
                EXPECT_TRUE(bit_identical(out, expected));
            }
        }
    }
}

// One replica on GPU 1 for data on GPU 0: p83 in training mode runs its
// shard (the whole batch, from sample 0) as one piece, so its dropout mask is
// the one-GPU forward's.
TEST(TwoGpus, RemoteShardKeepsTheDropoutMask) {
    REQUIRE_TWO_GPUS();
    std::unique_ptr<Model> here = make(Kind::P83, DeviceChoice::GPU, 3, true);
    std::unique_ptr<Model> there = make(Kind::P83, DeviceChoice::GPU, 3, true);
    there->to(Device::GPU, 1);
    const Tensor in = random_tensor(input_shape(Kind::P83, 6), 77).to(Device::GPU, 0);
    const Tensor expected = here->forward(in);
    const Tensor got = sharded_forward({there.get()}, in);
    EXPECT_EQ(got.device_index(), 0);
    EXPECT_TRUE(bit_identical(got, expected));
}

// A shard on another GPU than its data runs in pieces (copies in and out
// overlapping the forwards): uneven pieces give the one-GPU forward's bits,
// with the output on either GPU.
TEST(TwoGpus, RemoteShardInPiecesIsBitIdentical) {
    REQUIRE_TWO_GPUS();
    for (Kind k : kKinds) {
        SCOPED_TRACE(name(k));
        std::unique_ptr<Model> single = make(k, DeviceChoice::GPU);
        Replicas r = make_replicas(k, 2, DeviceChoice::GPU);
        r.owned[1]->to(Device::GPU, 1);
        const Tensor host_in = random_tensor(input_shape(k, 13), 500);  // shards 7 and 6
        const Tensor expected = single->forward(host_in.to(Device::GPU, 0));
        const Tensor in = host_in.to(Device::GPU, 0);
        EXPECT_TRUE(bit_identical(sharded_forward(r.list(), in), expected));
        Tensor out_on_1 = Tensor::empty(expected.shape(), Device::GPU, 1);
        sharded_forward_into(r.list(), in, out_on_1);  // replica 0's output goes to GPU 1
        EXPECT_TRUE(bit_identical(out_on_1, expected));
    }
}

// A remote shard that fails after its copies were queued names its replica
// and device, and leaves nothing running: the next call on the same
// replicas gives the one-GPU forward's bits.
TEST(TwoGpus, FailingRemoteShardLeavesNothingRunning) {
    REQUIRE_TWO_GPUS();
    auto good = make(Kind::P24, DeviceChoice::GPU);
    auto bad = make(Kind::P24, DeviceChoice::GPU, 2);
    auto other = make(Kind::P24, DeviceChoice::GPU);
    bad->to(Device::GPU, 1);
    other->to(Device::GPU, 1);
    const Tensor in = random_tensor(input_shape(Kind::P24, 9), 501).to(Device::GPU, 0);
    EXPECT_TRUE(throws_error([&] { sharded_forward({good.get(), bad.get()}, in); },
                             {"replica 1 (cuda:1)", "samples [5, 9)", "the model expects 2"}));
    EXPECT_TRUE(bit_identical(sharded_forward({good.get(), other.get()}, in), good->forward(in)));
}

}  // namespace
