// The fc_* functions: each converts its arguments (c_tensor.h), calls the
// functional entry point of fusedconv/ops.h and reports failures through
// c_errors.h. Only these functions are exported from libfusedconv_c.so.
#include "fusedconv/fusedconv_c.h"

#include "c_errors.h"
#include "c_tensor.h"

#include "fusedconv/device.h"
#include "fusedconv/error.h"
#include "fusedconv/ops.h"

#include <cstring>
#include <string>

using namespace fusedconv;
using fusedconv::capi::call;
using fusedconv::capi::shape_of;
using fusedconv::capi::view_of;

namespace {

ExecOptions options(void *stream) {
    ExecOptions o;
    o.stream = stream;
    return o;
}

}  // namespace

extern "C" {

const char *fc_last_error(void) { return capi::last_error().c_str(); }

int fc_abi_version(void) { return 1; }

int fc_cuda_device_count(void) {
    int count = 0;
    call([&] { count = cuda_device_count(); });
    return count;
}

const char *fc_gpu_unavailable_reason(void) {
    static thread_local std::string reason;
    if (call([&] { reason = gpu_unavailable_reason(); }) != 0) reason = capi::last_error();
    return reason.c_str();
}

// Every build holds the CUDA libraries next to the CPU ones (generators/).
int fc_has_gpu_kernels(void) { return 1; }

int fc_p24_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                   int32_t dim, fc_tensor *out, void *stream) {
    return call([&] {
        const char *fn = "fc_p24_forward";
        Tensor in = view_of(fn, "x", x), w = view_of(fn, "weight", weight),
               b = view_of(fn, "bias", bias), o = view_of(fn, "out", out);
        p24_forward(in, w, b, dim, o, options(stream));
    });
}

int fc_p25_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                   fc_tensor *out, void *stream) {
    return call([&] {
        const char *fn = "fc_p25_forward";
        Tensor in = view_of(fn, "x", x), w = view_of(fn, "weight", weight),
               b = view_of(fn, "bias", bias), o = view_of(fn, "out", out);
        p25_forward(in, w, b, o, options(stream));
    });
}

int fc_p32_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                   float scale_factor, fc_tensor *out, void *stream) {
    return call([&] {
        const char *fn = "fc_p32_forward";
        Tensor in = view_of(fn, "x", x), w = view_of(fn, "weight", weight),
               b = view_of(fn, "bias", bias), o = view_of(fn, "out", out);
        p32_forward(in, w, b, scale_factor, o, options(stream));
    });
}

int fc_p83_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                   const fc_tensor *norm_weight, const fc_tensor *norm_bias, int32_t groups,
                   float eps, float min_value, float clamp_min, float clamp_max, float dropout_p,
                   int32_t training, uint32_t seed, fc_tensor *out, void *stream) {
    return call([&] {
        const char *fn = "fc_p83_forward";
        Tensor in = view_of(fn, "x", x), w = view_of(fn, "weight", weight),
               b = view_of(fn, "bias", bias), g = view_of(fn, "norm_weight", norm_weight),
               be = view_of(fn, "norm_bias", norm_bias), o = view_of(fn, "out", out);
        P83Params p;
        p.groups = groups;
        p.eps = eps;
        p.min_value = min_value;
        p.clamp_min = clamp_min;
        p.clamp_max = clamp_max;
        p.dropout_p = dropout_p;
        p.training = training != 0;
        p.seed = seed;
        p83_forward(in, w, b, g, be, p, o, options(stream));
    });
}

int fc_output_shape(const char *model, const fc_tensor *x, const fc_tensor *weight,
                    int32_t dim_or_groups, fc_tensor *out_shape_only) {
    return call([&] {
        const char *fn = "fc_output_shape";
        if (!model) throw Error(std::string(fn) + ": model is a null pointer");
        if (!out_shape_only) throw Error(std::string(fn) + ": out_shape_only is a null pointer");
        const Shape in = shape_of(fn, "x", x), w = shape_of(fn, "weight", weight);
        const std::string name = model;
        Shape out;
        if (name == "p24") {
            out = p24_output_shape(in, w, dim_or_groups);
        } else if (name == "p25") {
            out = p25_output_shape(in, w);
        } else if (name == "p32") {
            out = p32_output_shape(in, w);
        } else if (name == "p83") {
            out = p83_output_shape(in, w, dim_or_groups);
        } else {
            throw Error(std::string(fn) + ": unknown model \"" + name +
                        "\" (expected p24, p25, p32 or p83)");
        }
        out_shape_only->ndim = static_cast<int32_t>(out.size());
        std::memset(out_shape_only->shape, 0, sizeof out_shape_only->shape);
        for (size_t d = 0; d < out.size(); ++d) out_shape_only->shape[d] = out[d];
        out_shape_only->device = x->device;
    });
}

int fc_synchronize(int32_t device) {
    return call([&] {
        if (device == FC_DEVICE_CPU) return;
        if (device < 0) {
            throw Error("fc_synchronize: device " + std::to_string(device) +
                        "; expected FC_DEVICE_CPU (-1) or a CUDA device index >= 0");
        }
        synchronize_device(device);
    });
}

}  // extern "C"
