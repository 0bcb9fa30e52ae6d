// The CUDA driver, loaded at run time (no link-time dependency, so the
// library runs on machines without CUDA), and Halide's CUDA runtime pointed
// at the device's primary context so that pointers from the CUDA runtime
// API, cuDNN or PyTorch can be used without copies.
#pragma once

#include <string>

namespace fusedconv::cuda {

// Loads the driver, initializes it and installs Halide's context hooks once.
// Returns "" on success, else why the GPU cannot be used.
const std::string &init();
// cuCtxSynchronize on the primary context; throws Error on failure.
void synchronize();
// Free and total device memory in bytes; throws Error when unavailable.
void memory_info(size_t *free_bytes, size_t *total_bytes);
// Device 0's name and attributes; throws Error when unavailable.
struct Attributes {
    std::string name;
    int sm_count = 0, cc_major = 0, cc_minor = 0, clock_khz = 0, mem_clock_khz = 0,
        bus_width_bits = 0;
    size_t total_bytes = 0;
};
Attributes attributes();

}  // namespace fusedconv::cuda
