#include "model_args.h"

#include "fusedconv/error.h"
#include "run_tools.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace fusedconv::cli {

namespace {

// %.9g: distinct floats print distinctly (to_string's 6 decimals do not).
std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

std::string weight_layout(int dims) {
    return dims == 3 ? "(Cout, Cin, k, k, k)" : "(Cout, Cin, k, k)";
}

}  // namespace

int spatial_dims(const std::string &model) {
    return model == "p25" || model == "p32" ? 2 : 3;
}

ConvArgs conv_args(const std::string &model, const std::map<std::string, Tensor> *weights) {
    const int dims = spatial_dims(model);
    ConvArgs c;
    if (!weights) {
        const tools::KernelBenchConv &kb = tools::kernelbench_conv(model);
        c.in_channels = kb.in_channels;
        c.out_channels = kb.out_channels;
        c.kernel_size = kb.kernel_size;
        c.weight_shape = {kb.out_channels, kb.in_channels};
        for (int d = 0; d < dims; ++d) c.weight_shape.push_back(kb.kernel_size);
        c.source = "KernelBench's " + model + " (conv.weight " + shape_string(c.weight_shape) + ")";
        return c;
    }
    auto it = weights->find("conv.weight");
    if (it == weights->end()) {
        throw Error("--weights: no tensor conv.weight, whose shape " + weight_layout(dims) +
                    " sets " + model + "'s channel counts and kernel size");
    }
    const Shape &w = it->second.shape();
    c.weight_shape = w;
    c.source = "conv.weight " + shape_string(w) + " of --weights";
    if (static_cast<int>(w.size()) != 2 + dims) {
        throw Error("--weights: conv.weight has shape " + shape_string(w) + ", but " + model +
                    " takes " + weight_layout(dims));
    }
    for (int64_t s : w) {
        if (s < 1 || s > std::numeric_limits<int>::max()) {
            throw Error("--weights: conv.weight has shape " + shape_string(w) +
                        ": every size must be from 1 to " +
                        std::to_string(std::numeric_limits<int>::max()));
        }
    }
    for (int d = 3; d < 2 + dims; ++d) {
        if (w[d] != w[2]) {
            throw Error("--weights: conv.weight has shape " + shape_string(w) +
                        ": the kernel is not " + (dims == 3 ? "cubic" : "square") +
                        " (the models take one kernel_size k)");
        }
    }
    c.out_channels = static_cast<int>(w[0]);
    c.in_channels = static_cast<int>(w[1]);
    c.kernel_size = static_cast<int>(w[2]);
    return c;
}

void check_init_args(const std::string &model, const ConvArgs &conv, const InitArgs &init) {
    if (model == "p24" && init.dim != 2) {
        throw Error("--dim " + std::to_string(init.dim) +
                    ": only 2 (the min over the conv output's depth) is supported");
    }
    if (model == "p32" && !std::isfinite(init.scale)) {
        throw Error("--scale must be a finite number, got " + number(init.scale));
    }
    if (model != "p83") return;
    if (conv.out_channels % init.groups != 0) {
        throw Error("--groups " + std::to_string(init.groups) + " does not divide the " +
                    std::to_string(conv.out_channels) + " output channels of " + conv.source);
    }
    if (!std::isfinite(init.min_value)) {
        throw Error("--min-value must be a finite number, got " + number(init.min_value));
    }
    if (!std::isfinite(init.max_value)) {
        throw Error("--max-value must be a finite number, got " + number(init.max_value));
    }
    if (!(init.dropout_p >= 0.0f && init.dropout_p <= 1.0f)) {
        throw Error("--dropout-p must be between 0 and 1, got " + number(init.dropout_p));
    }
    if (!(init.eps > 0.0f) || !std::isfinite(init.eps)) {
        throw Error("--eps must be a finite number > 0, got " + number(init.eps));
    }
}

void check_input_shape(const std::string &model, const ConvArgs &conv, const Shape &input) {
    const int dims = spatial_dims(model);
    if (static_cast<int>(input.size()) != 2 + dims) {
        throw Error("--input has shape " + shape_string(input) + ", but " + model + " takes " +
                    (dims == 3 ? "(N, C, D, H, W)" : "(N, C, H, W)") + " inputs (" +
                    conv.source + ")");
    }
    if (input[1] != conv.in_channels) {
        throw Error("--input has shape " + shape_string(input) + " with " +
                    std::to_string(input[1]) + " channels, but " + conv.source + " takes " +
                    std::to_string(conv.in_channels));
    }
}

}  // namespace fusedconv::cli
