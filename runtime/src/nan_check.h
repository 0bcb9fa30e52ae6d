// The p25 and p32 forward: a Winograd result, checked for the NaN with which
// that form marks every tile where it does not give the direct form's result
// (generators/winograd.h), and recomputed in the direct form for the samples
// that hold one.
#pragma once

#include "fusedconv/tensor.h"

#include <HalideBuffer.h>

#include <vector>

namespace fusedconv::detail {

// Per sample n of a contiguous 4D or 5D tensor (N, C, H, W) or (N, C, D,
// H, W), on either device: whether t[n] holds a NaN. Throws Error naming the
// shape of a tensor of other rank. `probe`: which elements the check reads,
// all of them or the first of each (sample, channel) (for results where a
// NaN anywhere in a sample's group of channels makes every element of the
// group NaN, as p83's GroupNorm does). On the GPU, on the current device and
// stream (cuda::Scope), so the call waits for that stream: every element,
// one small kernel and N int32 counts copied to the host; the first of each
// channel, those N x C floats copied to the host by one strided copy (or,
// for channels more than 2 GiB apart, which that copy cannot stride, by the
// kernel).
// FirstChannel: every element of channel 0 (for results where a NaN in any channel makes every
// channel at that position NaN, as a softmax over channels does), counted by count_nan's kernels
// over that channel alone.
enum class NanProbe { EveryElement, FirstOfEachChannel, FirstChannel };
std::vector<bool> nan_per_sample(const Tensor &t, NanProbe probe = NanProbe::EveryElement);

// Samples [first, first + count) of a 4D or 5D tensor, on its device,
// sharing its storage (a Halide crop: on the GPU a device crop, no copy).
Halide::Runtime::Buffer<float> sample_range(const Tensor &t, int first, int count);

// Whether the p25 / p32 generators' Winograd form computes the conv with
// these weights (Cout, Cin, kh, kw): 3x3 kernels only (generators/winograd.h).
// The models and the tuning binary ask here, so they take the same path.
bool winograd_applies(const Tensor &weight);

// Whether the GPU runs p25 / p32 with these weights in the F(4x4, 3x3)
// libraries (p25_xy_cuda, p32_xy_cuda) rather than the form along x: 3x3
// kernels with at most `max_in_channels` input channels, the library's
// limit (winograd2d_limits.h, generated from its gpu_wino2d_max_cin). Beyond
// it the library would compute the direct form, correct but slower than the
// form along x (schedules/NOTES.md).
bool winograd2d_applies(const Tensor &weight, int64_t max_in_channels);

// Whether the GPU runs p25 or p32 with these weights in the F(4x4, 3x3) form on tensor cores
// (p25_tc_cuda, p32_tc_cuda, generators/winograd2d_tensor_core.h): 3x3 kernels with at most
// `max_in_channels` input channels (kTensorCoreMaxInChannels, kTensorCoreWideMaxInChannels),
// on the current device when it has tf32 tensor cores, unless the environment variable
// FUSEDCONV_TENSOR_CORES is 0 (read once: then the F(4x4, 3x3) library without tensor cores
// runs, as before they were added).
bool tensor_core_form_applies(const Tensor &weight, int64_t max_in_channels);

// Whether the GPU runs p24 on this input (N, Cin, D, H, W) with these conv3d weights (Cout, Cin,
// kd, kh, kw) in the wgmma form (p24_wg_cuda, generators/conv3d_wgmma.h): 3x3x3 kernels with at
// most `max_in_channels` input and `max_out_channels` output channels and an output of at least
// `min_out_height` rows, on the current device when it runs wgmma (compute capability 9.0),
// unless FUSEDCONV_TENSOR_CORES is 0 (as above: then the SIMT library runs).
bool wgmma_form_applies(const Tensor &input, const Tensor &weight, int64_t max_in_channels,
                        int64_t max_out_channels, int64_t min_out_height);

// The same for p83's conv3d weights (Cout, Cin, kd, kh, kw) and the F(4x4,
// 3x3) library over x and y (p83_xy_cuda): 3x3x3 kernels with at most
// `max_in_channels` input channels (kP83XYMaxInChannels).
bool winograd3d_xy_applies(const Tensor &weight, int64_t max_in_channels);

// `run(winograd, input, output)` computes `output` from `input` (Halide
// buffers: the whole tensors or the same samples of both) in the Winograd
// form (true) or the direct form. With `winograd` (a 3x3 kernel) the
// Winograd form runs on the batch first; then each run of consecutive
// samples whose result holds NaN is recomputed in the direct form, which
// gives PyTorch's NaN and infinities there. Other samples keep the Winograd
// result.
// `probe` says which elements of the result the check reads (above).
template <typename Run>
void run_winograd_or_direct(bool winograd, const Tensor &input, const Tensor &output, Run run,
                            NanProbe probe = NanProbe::EveryElement) {
    run(winograd, input.raw(), output.raw());
    if (!winograd) return;
    const std::vector<bool> nan = nan_per_sample(output, probe);
    const int samples = static_cast<int>(nan.size());
    for (int first = 0; first < samples;) {
        if (!nan[first]) {
            ++first;
            continue;
        }
        int end = first + 1;
        while (end < samples && nan[end]) ++end;
        Halide::Runtime::Buffer<float> in = sample_range(input, first, end - first);
        Halide::Runtime::Buffer<float> out = sample_range(output, first, end - first);
        run(false, in.raw_buffer(), out.raw_buffer());
        first = end;
    }
}

}  // namespace fusedconv::detail
