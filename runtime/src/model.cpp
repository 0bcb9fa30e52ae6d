#include "fusedconv/models.h"

#include "halide_call.h"
#include "model_util.h"

#include <cmath>

namespace fusedconv {

namespace detail {

Tensor uniform_tensor(const Shape &shape, float bound, std::mt19937_64 &rng, Device device) {
    Tensor t = Tensor::empty(shape, Device::CPU);
    std::uniform_real_distribution<float> dist(-bound, bound);
    float *p = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
    return device == Device::CPU ? t : t.to(device);
}

Tensor filled_tensor(const Shape &shape, float value, Device device) {
    Tensor t = Tensor::empty(shape, Device::CPU);
    float *p = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = value;
    return device == Device::CPU ? t : t.to(device);
}

void require_positive(const char *model, const char *name, int value) {
    if (value < 1) {
        throw Error(std::string(model) + ": " + name + " must be >= 1, got " +
                    std::to_string(value));
    }
}

Shape conv_output_shape(const char *model, const Shape &input, int spatial_dims,
                        int in_channels, int out_channels, int kernel_size) {
    const size_t rank = 2 + spatial_dims;
    const char *layout = spatial_dims == 3 ? "(N, C, D, H, W)" : "(N, C, H, W)";
    if (input.size() != rank) {
        throw Error(std::string(model) + ": input must have rank " + std::to_string(rank) + " " +
                    layout + ", got shape " + shape_string(input));
    }
    for (int64_t s : input) {
        if (s <= 0) {
            throw Error(std::string(model) + ": input shape " + shape_string(input) +
                        " has a non-positive size");
        }
    }
    if (input[1] != in_channels) {
        throw Error(std::string(model) + ": input shape " + shape_string(input) + " has " +
                    std::to_string(input[1]) + " channels, the model expects " +
                    std::to_string(in_channels));
    }
    Shape out = {input[0], out_channels};
    for (size_t d = 2; d < rank; ++d) {
        if (input[d] < kernel_size) {
            throw Error(std::string(model) + ": input shape " + shape_string(input) +
                        " is smaller than the kernel size " + std::to_string(kernel_size) +
                        " in dimension " + std::to_string(d));
        }
        out.push_back(input[d] - kernel_size + 1);
    }
    return out;
}

}  // namespace detail

Model::Model(DeviceChoice choice) : device_(resolve(choice)) {
    detail::install_halide_error_handler();
}

Tensor Model::forward(const Tensor &input) {
    check_input(input);
    Tensor out = Tensor::empty(output_shape(input.shape()), device_);
    forward_into(input, out);
    return out;
}

void Model::check_input(const Tensor &input) const {
    if (!input.defined()) throw Error("forward: the input tensor is undefined");
    if (input.device() != device_) {
        throw Error("forward: input of shape " + shape_string(input.shape()) + " is on the " +
                    to_string(input.device()) + " but the model runs on the " +
                    to_string(device_) + "; move it with Tensor::to");
    }
}

void Model::check_output(const Tensor &output, const Shape &expected) const {
    if (!output.defined()) throw Error("forward_into: the output tensor is undefined");
    if (output.shape() != expected) {
        throw Error("forward_into: output has shape " + shape_string(output.shape()) +
                    ", expected " + shape_string(expected));
    }
    if (output.device() != device_) {
        throw Error("forward_into: output is on the " + to_string(output.device()) +
                    " but the model runs on the " + to_string(device_));
    }
}

Tensor Model::adopt(const Tensor &value, const Shape &expected, const char *name) const {
    if (!value.defined()) throw Error(std::string("parameter ") + name + " is undefined");
    if (value.shape() != expected) {
        throw Error(std::string("parameter ") + name + " has shape " +
                    shape_string(value.shape()) + ", expected " + shape_string(expected));
    }
    return value.to(device_);
}

}  // namespace fusedconv
