#include "fusedconv/models.h"

#include "halide_call.h"
#include "model_util.h"

#include "p24_cpu.h"
#include "p24_cuda.h"

namespace fusedconv {

static constexpr const char *kName = "Conv3dMinSoftmax";

Conv3dMinSoftmax::Conv3dMinSoftmax(int in_channels, int out_channels, int kernel_size, int dim,
                                   DeviceChoice device, uint64_t seed)
    : Model(device), in_channels_(in_channels), out_channels_(out_channels),
      kernel_size_(kernel_size) {
    detail::require_positive(kName, "in_channels", in_channels);
    detail::require_positive(kName, "out_channels", out_channels);
    detail::require_positive(kName, "kernel_size", kernel_size);
    // The min runs over the output's depth; PyTorch also accepts -3 for it.
    if (dim != 2 && dim != -3) {
        throw Error(std::string(kName) + ": dim " + std::to_string(dim) +
                    " is not supported; only dim=2 (depth) is");
    }
    detail::init_conv_parameters(kName, out_channels, in_channels, kernel_size, 3, seed,
                                 device_, weight_, bias_);
}

void Conv3dMinSoftmax::set_parameters(const Tensor &conv_weight, const Tensor &conv_bias) {
    const int k = kernel_size_;
    Tensor w = adopt(conv_weight, {out_channels_, in_channels_, k, k, k}, "conv.weight");
    Tensor b = adopt(conv_bias, {out_channels_}, "conv.bias");
    weight_ = w, bias_ = b;
}

Shape Conv3dMinSoftmax::output_shape(const Shape &input_shape) const {
    Shape conv = detail::conv_output_shape(kName, input_shape, 3, in_channels_, out_channels_,
                                           kernel_size_);
    return detail::checked_output_shape(kName, input_shape, {conv[0], conv[1], conv[3], conv[4]});
}

void Conv3dMinSoftmax::forward_into(const Tensor &input, Tensor &output) {
    check_input(input);
    check_output(input, output, output_shape(input.shape()));
    auto fn = device_ == Device::GPU ? fusedconv_p24_cuda : fusedconv_p24_cpu;
    try {
        detail::check_halide(
            fn(input.raw(), weight_.raw(), bias_.raw(), output.raw()),
            std::string(kName) + " forward on input " + shape_string(input.shape()));
    } catch (const Error &e) {
        // The GPU schedule keeps a block's depth-min of every output channel
        // in shared memory (schedules/p24_schedule.h), at most 48 KB a block;
        // with too many channels the kernel cannot launch. Say so.
        const std::string what = e.what();
        if (device_ != Device::GPU || what.find("cuLaunchKernel") == std::string::npos) throw;
        throw Error(what + " (on the GPU each block keeps the depth-min of all " +
                    std::to_string(out_channels_) +
                    " output channels in at most 48 KB of shared memory; with this many "
                    "channels it may not fit: run the model on the CPU)");
    }
}

}  // namespace fusedconv
