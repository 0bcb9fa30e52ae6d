// A float32 tensor in PyTorch's contiguous layout, on the host or the GPU.
#pragma once

#include "fusedconv/device.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct halide_buffer_t;

namespace fusedconv {

namespace detail {
struct TensorAccess;  // the library's own access to a tensor's bookkeeping
}

using Shape = std::vector<int64_t>;

std::string shape_string(const Shape &shape);  // "(2, 3, 8, 8)"

// Copies share storage (like torch.Tensor); clone() makes a deep copy.
// A GPU tensor lives on one CUDA device, by index (device_index()); GPU
// storage that the library allocates comes from Halide's allocation cache,
// ordered on that device's legacy default stream: before using a new
// tensor on a stream created non-blocking, synchronize the device (or use
// Model::forward with that stream, which allocates on it). When the last
// copy of such a tensor goes, its storage returns to the cache for the
// stream of its last use by a forward, so drop it only when work on other
// streams that uses it is finished.
class Tensor {
public:
    Tensor();  // an empty tensor with no storage; defined() is false

    // Uninitialized storage on `device` (for the GPU: CUDA device `device_index`).
    static Tensor empty(const Shape &shape, Device device = Device::CPU, int device_index = 0);
    // A host tensor holding a copy of `values` (values.size() must match).
    static Tensor from_vector(const Shape &shape, const std::vector<float> &values);
    // Views of memory the caller owns and keeps alive; nothing is copied.
    // `device_ptr` is a CUDA device pointer of device `device_index`'s
    // primary context (cudaMalloc, cuDNN or PyTorch memory on cuda:N); throws
    // Error naming an index out of range.
    static Tensor wrap_host(float *data, const Shape &shape);
    static Tensor wrap_device(void *device_ptr, const Shape &shape, int device_index = 0);

    bool defined() const;
    const Shape &shape() const;
    int dim() const;
    int64_t numel() const;
    Device device() const;
    // The CUDA device index of a GPU tensor; -1 for a CPU tensor.
    int device_index() const;

    // A copy on `device` (a copy even when already there). Copies that
    // involve the GPU run on the device's legacy default stream, which waits
    // for work on blocking streams but not on streams created non-blocking:
    // synchronize such a stream first. Between two GPUs the copy goes peer
    // to peer (NVLink or PCIe) and returns when it is done.
    Tensor to(Device device, int device_index = 0) const;
    Tensor clone() const;
    // A view of samples [begin, end) along dim 0 (the batch), like PyTorch's
    // t[begin:end]: it shares this tensor's storage (writes through either
    // show in the other) and keeps it alive; nothing is copied. Throws Error
    // naming the range and shape unless 0 <= begin < end <= shape()[0].
    Tensor batch_range(int64_t begin, int64_t end) const;
    // All values, copied to a host vector (from either device).
    std::vector<float> to_vector() const;
    // Host pointer of a CPU tensor; throws Error for a GPU tensor.
    float *data();
    const float *data() const;
    // CUDA device pointer of a GPU tensor; throws Error for a CPU tensor.
    void *device_data() const;

    // The Halide buffer (dimensions innermost first) handed to generated code.
    halide_buffer_t *raw() const;

private:
    friend struct detail::TensorAccess;
    struct Impl;
    explicit Tensor(std::shared_ptr<Impl> impl);
    Impl &checked(const char *what) const;  // throws Error naming `what` for an undefined tensor
    std::shared_ptr<Impl> impl_;
};

}  // namespace fusedconv
