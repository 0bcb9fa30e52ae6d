#include "fusedconv/device.h"

#include "fusedconv/error.h"

#include "cuda_context.h"

namespace fusedconv {

bool gpu_available() { return cuda::init().empty(); }

std::string gpu_unavailable_reason() { return cuda::init(); }

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

DeviceChoice parse_device_choice(const std::string &name) {
    if (name == "auto") return DeviceChoice::Auto;
    if (name == "cpu") return DeviceChoice::CPU;
    if (name == "gpu" || name == "cuda") return DeviceChoice::GPU;
    throw Error("unknown device '" + name + "' (expected auto, cpu or gpu)");
}

void synchronize() { cuda::synchronize(); }

}  // namespace fusedconv
