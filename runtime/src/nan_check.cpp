#include "nan_check.h"

#include "fusedconv/error.h"
#include "cuda_context.h"
#include "env_switch.h"
#include "halide_call.h"

#include "count_nan_cpu.h"
#include "count_nan_cuda.h"
#include "count_nan_small_cuda.h"

#include <HalideRuntimeCuda.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace fusedconv::detail {

namespace {

// t must have `lo` to `hi` dimensions; the message names them ("4D", "4D or 5D").
void require_dims(const Tensor &t, const char *what, int lo, int hi) {
    if (t.dim() < lo || t.dim() > hi) {
        std::string want = std::to_string(lo) + "D";
        if (hi != lo) want += " or " + std::to_string(hi) + "D";
        throw Error(std::string(what) + ": needs a " + want + " tensor, got " +
                    shape_string(t.shape()));
    }
}

// cuMemcpy2D's largest pitch on current GPUs (CU_DEVICE_ATTRIBUTE_MAX_PITCH).
constexpr int64_t kMaxCopyPitchBytes = (int64_t(1) << 31) - 1;

// Whether first_of_each_channel_on_gpu can read t: channels whose storage
// is at most kMaxCopyPitchBytes apart (else count_nan's kernels read it).
bool channels_within_copy_pitch(const Tensor &t) {
    return int64_t(t.raw()->dim[t.dim() - 2].stride) * int64_t(sizeof(float)) <=
           kMaxCopyPitchBytes;
}

// Whether the first element of each (sample, channel) of a GPU tensor is
// NaN, per sample: count_nan_small's kernel (a thread a sample) writes each
// sample's count straight into page-locked host memory, which the host reads
// once the stream is idle. Against a copy engine's strided copy of the N x C
// floats (whose start after the last kernel and whose own time cost ~10 us),
// p83 is 5-13 us faster (H200, 6 rounds alternating, fusedconv_bench medians
// 0.812-0.843 ms against 0.819-0.856). Where the driver gives no such
// memory, that strided copy (no kernel).
std::vector<bool> first_of_each_channel_on_gpu(const Tensor &t) {
    const halide_dimension_t &c = t.raw()->dim[t.dim() - 2], &n = t.raw()->dim[t.dim() - 1];
    if (n.stride != int64_t(c.stride) * c.extent) {
        throw Error("NaN check: needs a contiguous tensor, got " + shape_string(t.shape()) +
                    " with sample stride " + std::to_string(n.stride) + " and channel stride " +
                    std::to_string(c.stride));
    }
    std::vector<bool> nan(static_cast<size_t>(n.extent));
    std::vector<int32_t> counts(nan.size());
    halide_buffer_t view = *t.raw();
    halide_dimension_t dims[2] = {c, n};
    view.dimensions = 2;
    view.dim = dims;
    const std::string what = "NaN check of " + shape_string(t.shape());
    const bool written = cuda::write_to_host_and_wait(
        counts.data(), counts.size() * sizeof(int32_t), [&](uint64_t address) {
            Halide::Runtime::Buffer<int32_t> out(nullptr, n.extent);
            check_halide(out.device_wrap_native(halide_cuda_device_interface(), address), what);
            const int rc = fusedconv_count_nan_small_cuda(&view, out.raw_buffer());
            out.device_detach_native();
            check_halide(rc, what);
        });
    if (written) {
        for (size_t i = 0; i < nan.size(); ++i) nan[i] = counts[i] != 0;
        return nan;
    }
    std::vector<float> first(static_cast<size_t>(c.extent) * n.extent);
    cuda::copy_rows_to_host_and_wait(first.data(), reinterpret_cast<uint64_t>(t.device_data()),
                                     static_cast<size_t>(c.stride) * sizeof(float), sizeof(float),
                                     first.size());
    for (size_t i = 0; i < first.size(); ++i) {
        if (std::isnan(first[i])) nan[i / c.extent] = true;
    }
    return nan;
}

}  // namespace

bool winograd_applies(const Tensor &weight) {
    require_dims(weight, "Winograd form", 4, 4);
    return weight.shape()[2] == 3 && weight.shape()[3] == 3;
}

bool winograd2d_applies(const Tensor &weight, int64_t max_in_channels) {
    return winograd_applies(weight) && weight.shape()[1] <= max_in_channels;
}

namespace {
// Conv3d weights (Cout, Cin, kd, kh, kw) of a 3x3x3 kernel with at most `max_in_channels` inputs.
bool conv3d_3x3x3_with_at_most(const Tensor &weight, int64_t max_in_channels, const char *what) {
    require_dims(weight, what, 5, 5);
    const Shape &w = weight.shape();
    return w[2] == 3 && w[3] == 3 && w[4] == 3 && w[1] <= max_in_channels;
}

bool tensor_cores_enabled() {
    static const bool enabled = env_switch_on("FUSEDCONV_TENSOR_CORES");
    return enabled;
}
}  // namespace

bool tensor_core_form_applies(const Tensor &weight, int64_t max_in_channels) {
    return tensor_cores_enabled() && winograd2d_applies(weight, max_in_channels) &&
           cuda::has_tf32_tensor_cores(cuda::current_device());
}

bool wgmma_form_applies(const Tensor &input, const Tensor &weight, int64_t max_in_channels,
                        int64_t max_out_channels, int64_t min_out_height) {
    require_dims(input, "wgmma form", 5, 5);
    return tensor_cores_enabled() && conv3d_3x3x3_with_at_most(weight, max_in_channels, "wgmma form") &&
           weight.shape()[0] <= max_out_channels && input.shape()[3] - 2 >= min_out_height &&
           cuda::has_wgmma(cuda::current_device());
}

bool winograd3d_xy_applies(const Tensor &weight, int64_t max_in_channels) {
    return conv3d_3x3x3_with_at_most(weight, max_in_channels, "Winograd form over x and y");
}

std::vector<bool> nan_per_sample(const Tensor &t, NanProbe probe) {
    require_dims(t, "NaN check", 4, 5);
    if (t.device() == Device::GPU && probe == NanProbe::FirstOfEachChannel &&
        channels_within_copy_pitch(t)) {
        return first_of_each_channel_on_gpu(t);
    }
    Halide::Runtime::Buffer<int32_t> counts(static_cast<int>(t.shape()[0]));
    const bool gpu = t.device() == Device::GPU;
    auto fn = gpu ? fusedconv_count_nan_cuda : fusedconv_count_nan_cpu;
    // count_nan takes (x, y, c, n): a view of the same storage. A 5D tensor
    // (x, y, z, c, n), contiguous, is read as (x, y * z, c, n); with
    // FirstOfEachChannel (here on the CPU) only x = y (= z) = 0 is kept, and
    // the channels take the view's rows.
    halide_buffer_t view = *t.raw();
    halide_dimension_t dims[4];
    const halide_dimension_t *d = t.raw()->dim;
    const int c = t.dim() - 2;
    dims[0] = d[0];
    dims[1] = d[1];
    if (t.dim() == 5) {
        if (d[2].stride != d[1].stride * d[1].extent) {
            throw Error("NaN check: needs a contiguous tensor, got " + shape_string(t.shape()) +
                        " with depth stride " + std::to_string(d[2].stride));
        }
        dims[1].extent = d[1].extent * d[2].extent;
    }
    dims[2] = d[c];
    dims[3] = d[c + 1];
    if (probe == NanProbe::FirstOfEachChannel) {
        dims[0].extent = 1;
        dims[1] = dims[2];
        dims[2].extent = 1;
    } else if (probe == NanProbe::FirstChannel) {
        dims[2].extent = 1;
    }
    view.dimensions = 4;
    view.dim = dims;
    check_halide(fn(&view, counts.raw_buffer()), "NaN check of " + shape_string(t.shape()));
    if (gpu) {
        // On the current stream, waiting for it alone: Halide's copy_to_host
        // would use cuMemcpyDtoH on the legacy default stream, which does not
        // wait for work on a stream created non-blocking (and waits for every
        // blocking stream of the device).
        cuda::copy_to_host_and_wait(counts.data(), counts.raw_buffer()->device,
                                    counts.size_in_bytes());
        counts.set_device_dirty(false);
    }
    std::vector<bool> nan(static_cast<size_t>(counts.dim(0).extent()));
    for (int n = 0; n < counts.dim(0).extent(); n++) nan[n] = counts(n) != 0;
    return nan;
}

Halide::Runtime::Buffer<float> sample_range(const Tensor &t, int first, int count) {
    require_dims(t, "sample range", 4, 5);
    const int64_t samples = t.shape()[0];
    if (first < 0 || count < 1 || first + static_cast<int64_t>(count) > samples) {
        throw Error("sample range: samples [" + std::to_string(first) + ", " +
                    std::to_string(static_cast<int64_t>(first) + count) + ") of a tensor of shape " +
                    shape_string(t.shape()));
    }
    // A view of the tensor's buffer that owns nothing; cropping it along the
    // samples (Halide's last dimension) keeps the storage and, on the GPU,
    // makes a device crop that the returned buffer releases.
    Halide::Runtime::Buffer<float> whole(*t.raw());
    return whole.cropped(whole.dimensions() - 1, first, count);
}

}  // namespace fusedconv::detail
