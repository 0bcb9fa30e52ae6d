#include "fusedconv/models.h"

#include "cuda_context.h"
#include "halide_call.h"
#include "model_util.h"
#include "tensor_access.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

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

int64_t bounded_numel(const Shape &shape) {
    int64_t count = 1;
    for (int64_t s : shape) {
        if (s <= 0) return 0;
        if (s > kMaxElements || count > kMaxElements / s) return -1;
        count *= s;
    }
    return count;
}

std::string past_indexing_limit() {
    return "more than " + std::to_string(kMaxElements) +
           " elements (2 GiB), past Halide's 32-bit indexing";
}

Shape conv_weight_shape(const char *model, int out_channels, int in_channels, int kernel_size,
                        int spatial_dims) {
    Shape w = {out_channels, in_channels};
    for (int d = 0; d < spatial_dims; ++d) w.push_back(kernel_size);
    if (bounded_numel(w) < 0) {
        throw Error(std::string(model) + ": conv.weight shape " + shape_string(w) + " has " +
                    past_indexing_limit());
    }
    return w;
}

float init_bound(int in_channels, int kernel_size, int spatial_dims) {
    // fan_in in double: no int overflow for any kernel size. The rest is in
    // float32 as before, so seeded parameters are unchanged.
    double fan_in = in_channels;
    for (int d = 0; d < spatial_dims; ++d) fan_in *= kernel_size;
    return 1.0f / std::sqrt(static_cast<float>(fan_in));
}

void init_conv_parameters(const char *model, int out_channels, int in_channels, int kernel_size,
                          int spatial_dims, uint64_t seed, Device device, Tensor &weight,
                          Tensor &bias) {
    const Shape weight_shape =
        conv_weight_shape(model, out_channels, in_channels, kernel_size, spatial_dims);
    const float bound = init_bound(in_channels, kernel_size, spatial_dims);
    std::mt19937_64 rng(seed);
    weight = uniform_tensor(weight_shape, bound, rng, device);
    bias = uniform_tensor({out_channels}, bound, rng, device);
}

Shape checked_output_shape(const char *model, const Shape &input, Shape output) {
    if (bounded_numel(output) < 0) {
        throw Error(std::string(model) + ": input shape " + shape_string(input) +
                    " gives output shape " + shape_string(output) + ", " +
                    past_indexing_limit());
    }
    return output;
}

Shape conv_output_shape(const char *model, const Shape &input, int spatial_dims,
                        int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                        const std::string &expects) {
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
    if (bounded_numel(input) < 0) {
        throw Error(std::string(model) + ": input shape " + shape_string(input) + " has " +
                    past_indexing_limit());
    }
    if (input[1] != in_channels) {
        throw Error(std::string(model) + ": input shape " + shape_string(input) + " has " +
                    std::to_string(input[1]) + " channels, " + expects + " expects " +
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

Model::Model(DeviceChoice choice)
    : device_(resolve(choice)), device_index_(device_ == Device::GPU ? 0 : -1) {
    detail::install_halide_error_handler();
}

void Model::to(Device device, int device_index) {
    // Every parameter is copied first, so a failure leaves the model as it was.
    const auto params = parameters();
    std::vector<Tensor> moved;
    for (const auto &named : params) moved.push_back(named.second->to(device, device_index));
    for (size_t i = 0; i < params.size(); ++i) {
        // parameters() points at this object's own (non-const) members.
        *const_cast<Tensor *>(params[i].second) = std::move(moved[i]);
    }
    device_ = device;
    device_index_ = device == Device::GPU ? device_index : -1;
}

Tensor Model::forward(const Tensor &input, const ExecOptions &options) {
    check_input(input);
    const Shape shape = output_shape(input.shape());
    Tensor out;
    if (device_ == Device::GPU) {
        // The stream is checked before its allocation cache is used.
        cuda::Scope check(device_index_, options.stream);
        out = detail::TensorAccess::empty_on_stream(shape, device_, device_index_, options.stream);
    } else {
        out = Tensor::empty(shape, device_);
    }
    forward_into(input, out, options);
    return out;
}

void Model::check_input(const Tensor &input) const {
    if (!input.defined()) throw Error("forward: the input tensor is undefined");
    if (input.device() != device_) {
        throw Error("forward: input of shape " + shape_string(input.shape()) + " is on the " +
                    to_string(input.device()) + " but the model runs on the " +
                    to_string(device_) + "; move it with Tensor::to");
    }
    if (input.device_index() != device_index_) {
        throw Error("forward: input of shape " + shape_string(input.shape()) + " is on " +
                    device_string(input.device(), input.device_index()) +
                    " but the model runs on " + device_string(device_, device_index_) +
                    "; move it with Tensor::to");
    }
}

void Model::check_output(const Tensor &input, const Tensor &output,
                         const Shape &expected) const {
    if (!output.defined()) throw Error("forward_into: the output tensor is undefined");
    if (output.shape() != expected) {
        throw Error("forward_into: output has shape " + shape_string(output.shape()) +
                    ", expected " + shape_string(expected));
    }
    if (output.device() != device_) {
        throw Error("forward_into: output of shape " + shape_string(output.shape()) +
                    " is on the " + to_string(output.device()) + " but the model runs on the " +
                    to_string(device_));
    }
    if (output.device_index() != device_index_) {
        throw Error("forward_into: output of shape " + shape_string(output.shape()) + " is on " +
                    device_string(output.device(), output.device_index()) +
                    " but the model runs on " + device_string(device_, device_index_));
    }
    // The pipelines read the input while they write the output: storage
    // shared between the two (forward_into(x, x), overlapping wrap_host or
    // wrap_device views) would give garbage, so it is refused.
    auto range = [this](const Tensor &t) {
        const uintptr_t begin = device_ == Device::GPU
                                    ? reinterpret_cast<uintptr_t>(t.device_data())
                                    : reinterpret_cast<uintptr_t>(t.data());
        return std::make_pair(begin, begin + static_cast<uintptr_t>(t.numel()) * sizeof(float));
    };
    auto overlap = [](std::pair<uintptr_t, uintptr_t> a, std::pair<uintptr_t, uintptr_t> b) {
        return a.first < b.second && b.first < a.second;
    };
    const auto out = range(output);
    if (overlap(range(input), out)) {
        throw Error("forward_into: output of shape " + shape_string(output.shape()) +
                    " shares storage with the input of shape " + shape_string(input.shape()) +
                    "; the model cannot run in place");
    }
    // Nor over its own parameters (a copy of conv_weight() shares them).
    for (const auto &[name, t] : parameters()) {
        if (t->defined() && overlap(range(*t), out)) {
            throw Error("forward_into: output of shape " + shape_string(output.shape()) +
                        " shares storage with the model's parameter " + name + " of shape " +
                        shape_string(t->shape()));
        }
    }
}

Tensor Model::adopt(const Tensor &value, const Shape &expected, const char *name) const {
    if (!value.defined()) throw Error(std::string("parameter ") + name + " is undefined");
    if (value.shape() != expected) {
        throw Error(std::string("parameter ") + name + " has shape " +
                    shape_string(value.shape()) + ", expected " + shape_string(expected));
    }
    return value.to(device_, std::max(device_index_, 0));
}

}  // namespace fusedconv
