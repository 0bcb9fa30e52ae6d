#include "driver_hooks.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "HalideRuntime.h"

namespace tc_probe {
namespace {

std::string message;

void on_halide_error(void *, const char *msg) { message = msg; }

}  // namespace

void install_driver_hooks() {
    setenv("HL_CUDA_JIT_MAX_REGISTERS", "255", 0);
    fusedconv::cuda::install_tensor_core_hooks();
    halide_set_error_handler(on_halide_error);
}

const std::string &halide_message() { return message; }

double median_ms(const std::function<int()> &run, halide_buffer_t *out, int runs) {
    std::vector<double> ms;
    for (int i = 0; i < runs + 3; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        if (run() != 0 || halide_device_sync(nullptr, out) != 0) return -1;
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace tc_probe
