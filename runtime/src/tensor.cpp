#include "fusedconv/tensor.h"

#include "fusedconv/error.h"

#include "cuda_context.h"
#include "halide_call.h"
#include "model_util.h"
#include "tensor_access.h"

#include "HalideBuffer.h"
#include "HalideRuntimeCuda.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>

namespace fusedconv {

struct Tensor::Impl {
    Shape shape;
    Device device = Device::CPU;
    int device_index = -1;  // CUDA device of a GPU tensor
    // The stream of the latest forward that used this tensor (nullptr: the
    // default stream): its storage goes back to Halide's cache for that
    // stream, whose later work is ordered after the work queued with it.
    std::atomic<void *> last_stream{nullptr};
    Halide::Runtime::Buffer<float> buf;
    // The tensor whose storage a batch_range view points into (kept alive
    // by the view); null for a tensor that owns or wraps its storage.
    std::shared_ptr<Impl> base;

    ~Impl() {
        if (device != Device::GPU) return;
        // Halide frees (or caches) the allocation in the context and for the
        // stream that its hooks report: this tensor's own.
        cuda::Scope scope(device_index, last_stream.load(), cuda::Scope::Unchecked{});
        buf = Halide::Runtime::Buffer<float>();
    }
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

// malloc that throws std::bad_alloc instead of returning null.
void *host_allocate(size_t bytes) {
    void *p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
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

namespace detail {

Tensor TensorAccess::empty_on_stream(const Shape &shape, Device device, int device_index,
                                     void *stream) {
    validate_shape(shape);
    auto impl = std::make_shared<Tensor::Impl>();
    impl->shape = shape;
    impl->device = device;
    if (device == Device::CPU) {
        // Halide's Buffer writes its allocation header without checking
        // what malloc returned; allocating through host_allocate turns a
        // failed malloc into an Error instead of a crash.
        impl->buf = Halide::Runtime::Buffer<float>(nullptr, halide_sizes(shape));
        try {
            impl->buf.allocate(host_allocate, std::free);
        } catch (const std::bad_alloc &) {
            throw Error("allocating a CPU tensor of shape " + shape_string(shape) + " (" +
                        std::to_string(detail::bounded_numel(shape) * int64_t(sizeof(float))) +
                        " bytes): out of host memory");
        }
    } else {
        const halide_device_interface_t *iface = cuda_interface();
        const std::string what = "allocating a GPU tensor of shape " + shape_string(shape);
        cuda::check_device(device_index, what);
        impl->device_index = device_index;
        impl->last_stream = stream;
        cuda::Scope scope(device_index, stream, cuda::Scope::Unchecked{});
        impl->buf = Halide::Runtime::Buffer<float>(nullptr, halide_sizes(shape));
        detail::check_halide(impl->buf.device_malloc(iface), what);
    }
    return Tensor(impl);
}

void TensorAccess::note_stream(const Tensor &t, void *stream) {
    if (!t.impl_ || t.impl_->device != Device::GPU) return;
    // A view's storage goes back to the cache with its base tensor.
    for (Tensor::Impl *impl = t.impl_.get(); impl; impl = impl->base.get()) {
        impl->last_stream = stream;
    }
}

void TensorAccess::copy_into(const Tensor &src, Tensor &dst) {
    Tensor::Impl &from = src.checked("copy_into (source)");
    Tensor::Impl &to = dst.checked("copy_into (destination)");
    if (from.shape != to.shape) {
        throw Error("copy_into: source of shape " + shape_string(from.shape) +
                    " into a destination of shape " + shape_string(to.shape));
    }
    if (from.device == Device::CPU && to.device == Device::CPU) {
        std::memcpy(to.buf.data(), from.buf.data(), src.numel() * sizeof(float));
        return;
    }
    if (from.device == Device::GPU && to.device == Device::GPU &&
        from.device_index != to.device_index) {
        // dst's device may still have queued work using dst: wait for it,
        // then copy on src's stream (after the work that wrote src).
        cuda::stream_synchronize(to.device_index, nullptr);
        copy_peer(src, dst, from.device_index);
        return;
    }
    const int gpu = from.device == Device::GPU ? from.device_index : to.device_index;
    cuda::Scope scope(gpu, nullptr, cuda::Scope::Unchecked{});
    detail::install_halide_error_handler();
    detail::check_halide(
        halide_buffer_copy(nullptr, from.buf.raw_buffer(),
                           to.device == Device::GPU ? cuda_interface() : nullptr, to.buf.raw_buffer()),
        "copying a tensor of shape " + shape_string(from.shape) + " from " +
            device_string(from.device, from.device_index) + " into one on " +
            device_string(to.device, to.device_index));
}

void TensorAccess::copy_peer(const Tensor &src, Tensor &dst, int stream_device) {
    Tensor::Impl &from = src.checked("copy_peer (source)");
    Tensor::Impl &to = dst.checked("copy_peer (destination)");
    if (from.shape != to.shape || from.device != Device::GPU || to.device != Device::GPU ||
        from.device_index == to.device_index) {
        throw Error("copy_peer: needs two GPU tensors of one shape on different devices, got " +
                    shape_string(from.shape) + " on " +
                    device_string(from.device, from.device_index) + " and " +
                    shape_string(to.shape) + " on " + device_string(to.device, to.device_index));
    }
    cuda::copy_peer_and_wait(stream_device, to.device_index, to.buf.raw_buffer()->device,
                             from.device_index, from.buf.raw_buffer()->device,
                             static_cast<size_t>(src.numel()) * sizeof(float));
}

}  // namespace detail

Tensor Tensor::empty(const Shape &shape, Device device, int device_index) {
    return detail::TensorAccess::empty_on_stream(shape, device, device_index, nullptr);
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

Tensor Tensor::wrap_device(void *device_ptr, const Shape &shape, int device_index) {
    if (!device_ptr) throw Error("wrap_device: null pointer for shape " + shape_string(shape));
    validate_shape(shape);
    const halide_device_interface_t *iface = cuda_interface();
    cuda::check_device(device_index, "wrap_device of shape " + shape_string(shape));
    auto impl = std::make_shared<Impl>();
    impl->shape = shape;
    impl->device = Device::GPU;
    impl->device_index = device_index;
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
int Tensor::device_index() const { return checked("Tensor::device_index()").device_index; }

Tensor Tensor::to(Device device, int device_index) const {
    Impl &src = checked("Tensor::to()");
    Tensor dst = empty(src.shape, device, device_index);
    if (src.device == Device::GPU && device == Device::GPU && src.device_index != device_index) {
        // Peer to peer (Halide's copy uses cuMemcpyDtoD, which is meant for
        // one context); see copy_into.
        detail::TensorAccess::copy_into(*this, dst);
        return dst;
    }
    const halide_device_interface_t *iface =
        device == Device::GPU ? cuda_interface() : nullptr;
    if (src.device == Device::CPU && device == Device::CPU) {
        std::memcpy(dst.data(), src.buf.data(), numel() * sizeof(float));
        return dst;
    }
    // The copy runs in the context of the GPU side (one GPU at most here).
    const int gpu = src.device == Device::GPU ? src.device_index : device_index;
    cuda::Scope scope(gpu, nullptr, cuda::Scope::Unchecked{});
    detail::install_halide_error_handler();
    detail::check_halide(halide_buffer_copy(nullptr, src.buf.raw_buffer(), iface, dst.raw()),
                         "copying a tensor of shape " + shape_string(src.shape) + " from " +
                             device_string(src.device, src.device_index) + " to " +
                             device_string(device, device_index));
    return dst;
}

Tensor Tensor::clone() const {
    checked("Tensor::clone()");
    return to(device(), std::max(device_index(), 0));
}

Tensor Tensor::batch_range(int64_t begin, int64_t end) const {
    Impl &src = checked("Tensor::batch_range()");
    const int64_t batch = src.shape[0];
    if (begin < 0 || end > batch || begin >= end) {
        throw Error("batch_range(" + std::to_string(begin) + ", " + std::to_string(end) +
                    "): needs 0 <= begin < end <= " + std::to_string(batch) +
                    " for a tensor of shape " + shape_string(src.shape));
    }
    Shape shape = src.shape;
    shape[0] = end - begin;
    const int64_t offset = begin * (numel() / batch);  // elements before sample `begin`
    auto impl = std::make_shared<Impl>();
    impl->shape = shape;
    impl->device = src.device;
    impl->device_index = src.device_index;
    impl->last_stream = src.last_stream.load();
    // Views always point into the storage's owner, so that chains of views
    // keep one tensor alive rather than a chain.
    impl->base = src.base ? src.base : impl_;
    if (src.device == Device::CPU) {
        impl->buf = Halide::Runtime::Buffer<float>(src.buf.data() + offset, halide_sizes(shape));
    } else {
        impl->buf = Halide::Runtime::Buffer<float>(nullptr, halide_sizes(shape));
        const uint64_t address = src.buf.raw_buffer()->device +
                                 static_cast<uint64_t>(offset) * sizeof(float);
        detail::check_halide(impl->buf.device_wrap_native(cuda_interface(), address),
                             "batch_range of a GPU tensor of shape " + shape_string(src.shape));
    }
    return Tensor(impl);
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
