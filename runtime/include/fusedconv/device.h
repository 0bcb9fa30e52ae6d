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
// Why the GPU is not available ("" when it is).
std::string gpu_unavailable_reason();
// Resolves a choice to a device; throws Error for GPU when none is usable.
Device resolve(DeviceChoice choice);

std::string to_string(Device d);
// "auto", "cpu" or "gpu" ("cuda" is taken as "gpu"); throws Error on anything else.
DeviceChoice parse_device_choice(const std::string &name);

// Waits until all GPU work queued by this library has finished (no-op when
// the GPU was never used).
void synchronize();

// What the CUDA driver reports of device 0 (throws Error without a GPU).
struct GpuInfo {
    std::string name;
    int sm_count = 0, cc_major = 0, cc_minor = 0;
    double sm_clock_mhz = 0, mem_clock_mhz = 0;  // 0 when the driver does not say
    int bus_width_bits = 0;
    size_t total_bytes = 0;
};
GpuInfo gpu_info();
// Free and total device memory in bytes (throws Error without a GPU).
void gpu_memory(size_t *free_bytes, size_t *total_bytes);
// Returns the device allocations Halide keeps for reuse to the driver.
void release_cached_gpu_memory();

}  // namespace fusedconv
