#include "fusedconv/tensor.h"

#include "fusedconv/error.h"

#include "cuda_context.h"
#include "halide_call.h"
#include "model_util.h"

#include "HalideBuffer.h"
#include "HalideRuntimeCuda.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace fusedconv {

struct Tensor::Impl {
    Shape shape;
    Device device = Device::CPU;
    Halide::Runtime::Buffer<float> buf;
};

namespace {

void validate_shape(const Shape &shape) {
    if (shape.empty()) throw Error("tensor shape () has no dimensions");
    const int64_t count = detail::bounded_numel(shape);
    if (count == 0) throw Error("tensor shape " + shape_string(shape) + " has a non-positive size");
    if (count < 0) {
        throw Error("tensor shape " + shape_string(shape) + " has " +
                    detail::past_indexing_limit());
    }
}

// Halide lists dimensions innermost first: PyTorch's shape reversed.
std::vector<int> halide_sizes(const Shape &shape) {
    return std::vector<int>(shape.rbegin(), shape.rend());
}

const halide_device_interface_t *cuda_interface() {
    const std::string &why = cuda::init();
    if (!why.empty()) throw Error("GPU tensor requested but the GPU is unusable: " + why);
    detail::install_halide_error_handler();
    return halide_cuda_device_interface();
}

}  // namespace

std::string shape_string(const Shape &shape) {
    std::ostringstream os;
    os << "(";
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    if (shape.size() == 1) os << ",";
    os << ")";
    return os.str();
}

Tensor::Tensor() = default;
Tensor::Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Tensor Tensor::empty(const Shape &shape, Device device) {
    validate_shape(shape);
    auto impl = std::make_shared<Impl>();
    impl->shape = shape;
    impl->device = device;
    if (device == Device::CPU) {
        impl->buf = Halide::Runtime::Buffer<float>(halide_sizes(shape));
    } else {
        const halide_device_interface_t *iface = cuda_interface();
        impl->buf = Halide::Runtime::Buffer<float>(nullptr, halide_sizes(shape));
        detail::check_halide(impl->buf.device_malloc(iface),
                             "allocating a GPU tensor of shape " + shape_string(shape));
    }
    return Tensor(impl);
}

Tensor Tensor::from_vector(const Shape &shape, const std::vector<float> &values) {
    Tensor t = empty(shape, Device::CPU);
    if (static_cast<int64_t>(values.size()) != t.numel()) {
        throw Error("from_vector: shape " + shape_string(shape) + " needs " +
                    std::to_string(t.numel()) + " values, got " + std::to_string(values.size()));
    }
    std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
    return t;
}

Tensor Tensor::wrap_host(float *data, const Shape &shape) {
    if (!data) throw Error("wrap_host: null pointer for shape " + shape_string(shape));
    validate_shape(shape);
    auto impl = std::make_shared<Impl>();
    impl->shape = shape;
    impl->buf = Halide::Runtime::Buffer<float>(data, halide_sizes(shape));
    return Tensor(impl);
}

Tensor Tensor::wrap_device(void *device_ptr, const Shape &shape) {
    if (!device_ptr) throw Error("wrap_device: null pointer for shape " + shape_string(shape));
    validate_shape(shape);
    const halide_device_interface_t *iface = cuda_interface();
    auto impl = std::make_shared<Impl>();
    impl->shape = shape;
    impl->device = Device::GPU;
    impl->buf = Halide::Runtime::Buffer<float>(nullptr, halide_sizes(shape));
    detail::check_halide(
        impl->buf.device_wrap_native(iface, reinterpret_cast<uint64_t>(device_ptr)),
        "wrapping a device pointer as shape " + shape_string(shape));
    return Tensor(impl);
}

bool Tensor::defined() const { return impl_ != nullptr; }

Tensor::Impl &Tensor::checked(const char *what) const {
    if (!impl_) throw Error(std::string(what) + ": use of an undefined (empty) tensor");
    return *impl_;
}

const Shape &Tensor::shape() const { return checked("Tensor::shape()").shape; }
int Tensor::dim() const { return static_cast<int>(shape().size()); }
int64_t Tensor::numel() const {
    int64_t n = 1;
    for (int64_t s : shape()) n *= s;
    return n;
}
Device Tensor::device() const { return checked("Tensor::device()").device; }

Tensor Tensor::to(Device device) const {
    Impl &src = checked("Tensor::to()");
    Tensor dst = empty(src.shape, device);
    const halide_device_interface_t *iface =
        device == Device::GPU ? cuda_interface() : nullptr;
    if (src.device == Device::CPU && device == Device::CPU) {
        std::memcpy(dst.data(), src.buf.data(), numel() * sizeof(float));
        return dst;
    }
    detail::install_halide_error_handler();
    detail::check_halide(halide_buffer_copy(nullptr, src.buf.raw_buffer(), iface, dst.raw()),
                         "copying a tensor of shape " + shape_string(src.shape) + " from " +
                             to_string(src.device) + " to " + to_string(device));
    return dst;
}

Tensor Tensor::clone() const {
    checked("Tensor::clone()");
    return to(device());
}

std::vector<float> Tensor::to_vector() const {
    checked("Tensor::to_vector()");
    Tensor host = device() == Device::CPU ? *this : to(Device::CPU);
    const float *p = host.data();
    return std::vector<float>(p, p + numel());
}

float *Tensor::data() {
    const Impl &impl = checked("Tensor::data()");
    if (impl.device != Device::CPU) {
        throw Error("data(): tensor of shape " + shape_string(impl.shape) +
                    " is on the GPU; use to(Device::CPU) or device_data()");
    }
    return impl_->buf.data();
}

const float *Tensor::data() const { return const_cast<Tensor *>(this)->data(); }

void *Tensor::device_data() const {
    const Impl &impl = checked("Tensor::device_data()");
    if (impl.device != Device::GPU) {
        throw Error("device_data(): tensor of shape " + shape_string(impl.shape) +
                    " is on the CPU; use to(Device::GPU) or data()");
    }
    return reinterpret_cast<void *>(impl.buf.raw_buffer()->device);
}

halide_buffer_t *Tensor::raw() const {
    checked("Tensor::raw()");
    return impl_->buf.raw_buffer();
}

}  // namespace fusedconv
