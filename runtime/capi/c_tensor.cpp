#include "c_tensor.h"

#include "fusedconv/error.h"

#include <string>

namespace fusedconv::capi {

namespace {
std::string prefix(const char *fn, const char *name) {
    return std::string(fn) + ": " + name;
}
}  // namespace

Shape shape_of(const char *fn, const char *name, const fc_tensor *t) {
    if (!t) throw Error(prefix(fn, name) + " is a null pointer");
    if (t->ndim < 1 || t->ndim > FC_MAX_DIMS) {
        throw Error(prefix(fn, name) + " has ndim " + std::to_string(t->ndim) + ", outside 1.." +
                    std::to_string(FC_MAX_DIMS));
    }
    if (t->device < FC_DEVICE_CPU) {
        throw Error(prefix(fn, name) + " has device " + std::to_string(t->device) +
                    "; expected FC_DEVICE_CPU (-1) or a CUDA device index >= 0");
    }
    return Shape(t->shape, t->shape + t->ndim);
}

Tensor view_of(const char *fn, const char *name, const fc_tensor *t) {
    const Shape shape = shape_of(fn, name, t);
    if (!t->data) {
        throw Error(prefix(fn, name) + " of shape " + shape_string(shape) +
                    " has a null data pointer");
    }
    try {
        if (t->device == FC_DEVICE_CPU) return Tensor::wrap_host(static_cast<float *>(t->data), shape);
        return Tensor::wrap_device(t->data, shape, t->device);
    } catch (const Error &e) {
        throw Error(prefix(fn, name) + ": " + e.what());
    }
}

}  // namespace fusedconv::capi
