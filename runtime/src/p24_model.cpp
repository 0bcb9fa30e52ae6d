#include "fusedconv/models.h"

#include "model_util.h"
#include "ops_detail.h"

namespace fusedconv {

static constexpr const char *kName = "Conv3dMinSoftmax";

Conv3dMinSoftmax::Conv3dMinSoftmax(int in_channels, int out_channels, int kernel_size, int dim,
                                   DeviceChoice device, uint64_t seed)
    : Model(device), in_channels_(in_channels), out_channels_(out_channels),
      kernel_size_(kernel_size) {
    detail::require_positive(kName, "in_channels", in_channels);
    detail::require_positive(kName, "out_channels", out_channels);
    detail::require_positive(kName, "kernel_size", kernel_size);
    detail::check_p24_dim(kName, dim);
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

void Conv3dMinSoftmax::forward_into(const Tensor &input, Tensor &output,
                                    const ExecOptions &options) {
    check_input(input);
    check_output(input, output, output_shape(input.shape()));
    detail::p24_run(kName, input, weight_, bias_, 2, output, options);
}

}  // namespace fusedconv
