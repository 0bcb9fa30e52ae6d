#include "fusedconv/models.h"

#include "model_util.h"
#include "ops_detail.h"

#include <cmath>
#include <cstdio>

namespace fusedconv {

static constexpr const char *kName = "Conv3dGroupNormMinClampDropout";

Conv3dGroupNormMinClampDropout::Conv3dGroupNormMinClampDropout(
    int in_channels, int out_channels, int kernel_size, int groups, float min_value,
    float max_value, float dropout_p, DeviceChoice device, uint64_t seed)
    : Model(device), in_channels_(in_channels), out_channels_(out_channels),
      kernel_size_(kernel_size), groups_(groups), min_value_(min_value),
      clamp_lo_(min_value), clamp_hi_(max_value), p_(0.0f) {
    detail::require_positive(kName, "in_channels", in_channels);
    detail::require_positive(kName, "out_channels", out_channels);
    detail::require_positive(kName, "kernel_size", kernel_size);
    detail::check_groups(kName, groups, out_channels);
    set_dropout_p(dropout_p);
    detail::init_conv_parameters(kName, out_channels, in_channels, kernel_size, 3, seed,
                                 device_, weight_, bias_);
    gamma_ = detail::filled_tensor({out_channels}, 1.0f, device_);
    beta_ = detail::filled_tensor({out_channels}, 0.0f, device_);
}

void Conv3dGroupNormMinClampDropout::set_parameters(const Tensor &conv_weight,
                                                    const Tensor &conv_bias,
                                                    const Tensor &norm_weight,
                                                    const Tensor &norm_bias) {
    const int k = kernel_size_;
    Tensor w = adopt(conv_weight, {out_channels_, in_channels_, k, k, k}, "conv.weight");
    Tensor b = adopt(conv_bias, {out_channels_}, "conv.bias");
    Tensor g = adopt(norm_weight, {out_channels_}, "norm.weight");
    Tensor be = adopt(norm_bias, {out_channels_}, "norm.bias");
    weight_ = w, bias_ = b, gamma_ = g, beta_ = be;
}

void Conv3dGroupNormMinClampDropout::set_min_value(float min_value) { min_value_ = min_value; }

void Conv3dGroupNormMinClampDropout::set_clamp(float clamp_min, float clamp_max) {
    clamp_lo_ = clamp_min;
    clamp_hi_ = clamp_max;
}

void Conv3dGroupNormMinClampDropout::set_dropout_p(float p) {
    detail::check_dropout_p(kName, p);
    p_ = p;
}

void Conv3dGroupNormMinClampDropout::set_eps(float eps) {
    // eps > 0 keeps 1/sqrt(var + eps) finite for a constant group, where
    // var is 0 (or, in float32, a rounding residue that float64 does not have).
    if (!(eps > 0.0f) || !std::isfinite(eps)) {
        char value[32];
        std::snprintf(value, sizeof value, "%.9g", static_cast<double>(eps));
        throw Error(std::string(kName) + ": GroupNorm eps has to be a finite number > 0, but got " +
                    value);
    }
    eps_ = eps;
}

void Conv3dGroupNormMinClampDropout::set_training(bool training) { training_ = training; }

void Conv3dGroupNormMinClampDropout::set_dropout_seed(uint32_t seed) { dropout_seed_ = seed; }

Shape Conv3dGroupNormMinClampDropout::output_shape(const Shape &input_shape) const {
    return detail::checked_output_shape(
        kName, input_shape,
        detail::conv_output_shape(kName, input_shape, 3, in_channels_, out_channels_,
                                  kernel_size_));
}

void Conv3dGroupNormMinClampDropout::forward_into(const Tensor &input, Tensor &output,
                                                  const ExecOptions &options) {
    check_input(input);
    check_output(input, output, output_shape(input.shape()));
    P83Params params;
    params.groups = groups_;
    params.eps = eps_;
    params.min_value = min_value_;
    params.clamp_min = clamp_lo_;
    params.clamp_max = clamp_hi_;
    params.dropout_p = p_;
    params.training = training_;
    params.seed = dropout_seed_;
    detail::p83_run(kName, input, weight_, bias_, gamma_, beta_, params, output, options);
}

}  // namespace fusedconv
