// Where tensors live and models run.
#pragma once

#include <string>

namespace fusedconv {

enum class Device { CPU, GPU };

// What the caller asks for: Auto picks the GPU when a CUDA device and driver
// are usable, else the CPU.
enum class DeviceChoice { Auto, CPU, GPU };

// True when the CUDA driver loads and reports at least one device.
bool gpu_available();
// CUDA devices the driver reports (0 when the GPU is unusable). GPU tensors
// and models live on one of them, by index (cuda:N), device 0 by default.
int cuda_device_count();
// Why the GPU is not available ("" when it is).
std::string gpu_unavailable_reason();
// Resolves a choice to a device; throws Error for GPU when none is usable.
Device resolve(DeviceChoice choice);

std::string to_string(Device d);
// "cpu" or "cuda:<index>": how error messages name where a tensor lives.
std::string device_string(Device d, int index);
// "auto", "cpu" or "gpu" ("cuda" is taken as "gpu"); throws Error on anything else.
DeviceChoice parse_device_choice(const std::string &name);

// How a call runs on the GPU (ignored on the CPU): `stream` is a CUstream /
// cudaStream_t of the device that the call's tensors are on (nullptr: that
// device's legacy default stream). A call returns once its work is queued
// on the stream, except where it needs a host round trip (p25 / p32's NaN
// check), which then waits for that stream only. The per-thread default
// stream (CU_STREAM_PER_THREAD) is refused.
struct ExecOptions {
    void *stream = nullptr;
};

// Waits until all GPU work of every device this process used has finished
// (no-op when the GPU was never used).
void synchronize();
// Waits until all work on one CUDA device has finished; throws Error naming
// an index out of range. (Not an overload of synchronize(): callers pass
// &synchronize as a callback.)
void synchronize_device(int device_index);

// What the CUDA driver reports of a device (throws Error without a GPU or
// for an index out of range).
struct GpuInfo {
    std::string name;
    int sm_count = 0, cc_major = 0, cc_minor = 0;
    double sm_clock_mhz = 0, mem_clock_mhz = 0;  // 0 when the driver does not say
    int bus_width_bits = 0;
    size_t total_bytes = 0;
};
GpuInfo gpu_info(int device_index = 0);
// Free and total memory of a device in bytes (throws Error without a GPU).
void gpu_memory(size_t *free_bytes, size_t *total_bytes, int device_index = 0);
// Returns the device allocations Halide keeps for reuse to the driver.
void release_cached_gpu_memory();

}  // namespace fusedconv
