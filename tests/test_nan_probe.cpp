// The Winograd forms' NaN probes (runtime/src/nan_check.h): count_nan_small's
// CPU library on strided views against counts made here, and on the GPU (skipped
// with a message without one) the probe of the first element of each channel,
// whose kernel writes its counts straight into page-locked host memory.
#include "test_util.h"

#include "count_nan_small_cpu.h"
#include "nan_check.h"  // runtime/src

#include <HalideBuffer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace fusedconv;
using namespace fusedconv::testutil;

// count_nan_small over a (i, n) view of `data` with the given strides.
std::vector<int32_t> count_small_cpu(std::vector<float> &data, int items, int item_stride,
                                     int samples, int sample_stride) {
    halide_dimension_t dims[2] = {{0, items, item_stride}, {0, samples, sample_stride}};
    Halide::Runtime::Buffer<float> view(data.data(), 2, dims);
    Halide::Runtime::Buffer<int32_t> counts(samples);
    EXPECT_EQ(fusedconv_count_nan_small_cpu(view.raw_buffer(), counts.raw_buffer()), 0);
    return std::vector<int32_t>(counts.begin(), counts.end());
}

TEST(CountNaNSmall, CountsTheViewsNaNsOnlyPerSample) {
    // 5 items 7 floats apart, samples 40 floats apart: the floats between the
    // view's elements hold NaN too, and must not be counted.
    const int items = 5, item_stride = 7, samples = 3, sample_stride = 40;
    std::vector<float> data(static_cast<size_t>(sample_stride) * samples, kNaN);
    for (int n = 0; n < samples; ++n) {
        for (int i = 0; i < items; ++i) data[n * sample_stride + i * item_stride] = 0.5f * i - 1.0f;
    }
    data[0 * sample_stride + 4 * item_stride] = kNaN;  // sample 0: one, the last item
    data[2 * sample_stride + 0 * item_stride] = kNaN;  // sample 2: two
    data[2 * sample_stride + 3 * item_stride] = -kNaN;
    data[1 * sample_stride + 2 * item_stride] = kInf;  // sample 1: none (inf is not NaN)
    data[1 * sample_stride + 1 * item_stride] = -kInf;
    EXPECT_EQ(count_small_cpu(data, items, item_stride, samples, sample_stride),
              (std::vector<int32_t>{1, 0, 2}));
}

TEST(CountNaNSmall, OneItemAndOneSample) {
    std::vector<float> data = {kNaN, 1.0f};
    EXPECT_EQ(count_small_cpu(data, 1, 1, 1, 2), (std::vector<int32_t>{1}));
    data[0] = 3.0f;
    EXPECT_EQ(count_small_cpu(data, 1, 1, 1, 2), (std::vector<int32_t>{0}));
}

// The GPU probe: the first element of each (sample, channel) of a 5D tensor.
// 130 samples (more than one block of the kernel's 64 threads, not a multiple),
// 3 channels, 2 x 3 x 5 elements a channel.
TEST(NaNProbeGpu, FirstOfEachChannelFindsExactlyTheSamplesWithANaNThere) {
    FUSEDCONV_REQUIRE_GPU();
    const Shape shape = {130, 3, 2, 3, 5};
    const int64_t channel = 2 * 3 * 5, sample = 3 * channel;
    Tensor host = Tensor::empty(shape);
    for (int64_t i = 0; i < host.numel(); ++i) host.data()[i] = 0.25f;
    std::vector<bool> expected(static_cast<size_t>(shape[0]), false);
    for (int64_t n : {0, 63, 64, 127, 129}) {  // a NaN first in one of the channels
        host.data()[n * sample + (n % 3) * channel] = kNaN;
        expected[static_cast<size_t>(n)] = true;
    }
    host.data()[5 * sample + 1 * channel + 7] = kNaN;  // not a first element: not seen
    host.data()[6 * sample + 2 * channel] = kInf;      // a first element, but not NaN
    host.data()[7 * sample + 0 * channel + 1] = kNaN;  // the element after a first one
    const Tensor gpu = host.to(Device::GPU);
    EXPECT_EQ(detail::nan_per_sample(gpu, detail::NanProbe::FirstOfEachChannel), expected);
    // Again, so that the probe's page-locked block is reused.
    EXPECT_EQ(detail::nan_per_sample(gpu, detail::NanProbe::FirstOfEachChannel), expected);
}

}  // namespace
