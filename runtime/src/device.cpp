#include "fusedconv/device.h"

#include "fusedconv/error.h"

#include "cuda_context.h"

#include "HalideRuntimeCuda.h"

namespace fusedconv {

bool gpu_available() { return cuda::init().empty(); }

std::string gpu_unavailable_reason() { return cuda::init(); }

int cuda_device_count() { return cuda::device_count(); }

Device resolve(DeviceChoice choice) {
    switch (choice) {
    case DeviceChoice::CPU:
        return Device::CPU;
    case DeviceChoice::GPU:
        if (!gpu_available()) throw Error("device gpu requested but unusable: " + cuda::init());
        return Device::GPU;
    case DeviceChoice::Auto:
        break;
    }
    return gpu_available() ? Device::GPU : Device::CPU;
}

std::string to_string(Device d) { return d == Device::GPU ? "gpu" : "cpu"; }

std::string device_string(Device d, int index) {
    return d == Device::GPU ? "cuda:" + std::to_string(index) : "cpu";
}

DeviceChoice parse_device_choice(const std::string &name) {
    if (name == "auto") return DeviceChoice::Auto;
    if (name == "cpu") return DeviceChoice::CPU;
    if (name == "gpu" || name == "cuda") return DeviceChoice::GPU;
    throw Error("unknown device '" + name + "' (expected auto, cpu or gpu)");
}

void synchronize() { cuda::synchronize(); }

void synchronize_device(int device_index) { cuda::synchronize(device_index); }

GpuInfo gpu_info(int device_index) {
    cuda::Attributes a = cuda::attributes(device_index);
    GpuInfo g;
    g.name = a.name;
    g.sm_count = a.sm_count;
    g.cc_major = a.cc_major;
    g.cc_minor = a.cc_minor;
    g.sm_clock_mhz = a.clock_khz / 1000.0;
    g.mem_clock_mhz = a.mem_clock_khz / 1000.0;
    g.bus_width_bits = a.bus_width_bits;
    g.total_bytes = a.total_bytes;
    return g;
}

void gpu_memory(size_t *free_bytes, size_t *total_bytes, int device_index) {
    cuda::memory_info(device_index, free_bytes, total_bytes);
}

void release_cached_gpu_memory() {
    if (gpu_available()) halide_cuda_release_unused_device_allocations(nullptr);
}

}  // namespace fusedconv
