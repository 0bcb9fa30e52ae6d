// A float32 tensor in PyTorch's contiguous layout, on the host or the GPU.
#pragma once

#include "fusedconv/device.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct halide_buffer_t;

namespace fusedconv {

using Shape = std::vector<int64_t>;

std::string shape_string(const Shape &shape);  // "(2, 3, 8, 8)"

// Copies share storage (like torch.Tensor); clone() makes a deep copy.
class Tensor {
public:
    Tensor();  // an empty tensor with no storage; defined() is false

    // Uninitialized storage on `device`.
    static Tensor empty(const Shape &shape, Device device = Device::CPU);
    // A host tensor holding a copy of `values` (values.size() must match).
    static Tensor from_vector(const Shape &shape, const std::vector<float> &values);
    // Views of memory the caller owns and keeps alive; nothing is copied.
    // `device_ptr` is a CUDA device pointer of the primary context (cudaMalloc,
    // cuDNN or PyTorch memory on device 0).
    static Tensor wrap_host(float *data, const Shape &shape);
    static Tensor wrap_device(void *device_ptr, const Shape &shape);

    bool defined() const;
    const Shape &shape() const;
    int dim() const;
    int64_t numel() const;
    Device device() const;

    // A copy on `device` (a copy even when already there).
    Tensor to(Device device) const;
    Tensor clone() const;
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
    struct Impl;
    explicit Tensor(std::shared_ptr<Impl> impl);
    Impl &checked(const char *what) const;  // throws Error naming `what` for an undefined tensor
    std::shared_ptr<Impl> impl_;
};

}  // namespace fusedconv
