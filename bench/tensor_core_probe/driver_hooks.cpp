#include "driver_hooks.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "HalideRuntime.h"
#include "mma_splice.h"

namespace tc_probe {
namespace {

using LoadDataEx = int (*)(void **, const void *, unsigned, int *, void **);
using LaunchKernel = int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                             void **, void **);
using FuncSetAttribute = int (*)(void *, int, int);

const char *tool_name = "tc_probe";
LoadDataEx real_load = nullptr;
LaunchKernel real_launch = nullptr;
FuncSetAttribute set_attribute = nullptr;
int groups = -1;
std::string message;

int load_spliced(void **module, const void *image, unsigned n, int *options, void **values) {
    std::string ptx(static_cast<const char *>(image));
    try {
        ptx = fusedconv::cuda::splice_mma(ptx, &groups);
    } catch (const std::exception &e) {
        fprintf(stderr, "%s: the module's tensor-core calls cannot be spliced: %s\n", tool_name, e.what());
        return 218;  // CUDA_ERROR_INVALID_PTX
    }
    static char log[16384];
    std::vector<int> opts(options, options + n);
    std::vector<void *> vals(values, values + n);
    opts.push_back(5);  // CU_JIT_ERROR_LOG_BUFFER
    vals.push_back(log);
    opts.push_back(6);  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
    vals.push_back(reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof(log))));
    const int rc = real_load(module, ptx.c_str(), static_cast<unsigned>(opts.size()), opts.data(), vals.data());
    if (rc != 0) fprintf(stderr, "%s: the driver's JIT refused the spliced module (%d): %s\n", tool_name, rc, log);
    return rc;
}

int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
           void *stream, void **params, void **extra) {
    if (shared > 48 * 1024) {
        const int rc = set_attribute(f, 8 /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */,
                                     static_cast<int>(shared));
        if (rc != 0) {
            fprintf(stderr, "%s: cuFuncSetAttribute(%u bytes of shared memory) failed (%d)\n", tool_name, shared, rc);
            return rc;
        }
    }
    return real_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

void *get_symbol(void *lib, const char *name) {
    void *s = dlsym(lib, name);
    if (s && strcmp(name, "cuModuleLoadDataEx") == 0) {
        real_load = reinterpret_cast<LoadDataEx>(s);
        return reinterpret_cast<void *>(&load_spliced);
    }
    if (s && strcmp(name, "cuLaunchKernel") == 0) {
        set_attribute = reinterpret_cast<FuncSetAttribute>(dlsym(lib, "cuFuncSetAttribute"));
        if (!set_attribute) return s;  // a launch past 48 KB then fails with the driver's error
        real_launch = reinterpret_cast<LaunchKernel>(s);
        return reinterpret_cast<void *>(&launch);
    }
    return s;
}

void on_halide_error(void *, const char *msg) { message = msg; }

}  // namespace

void install_driver_hooks(const char *tool) {
    tool_name = tool;
    setenv("HL_CUDA_JIT_MAX_REGISTERS", "255", 0);
    halide_set_custom_get_library_symbol(get_symbol);
    halide_set_error_handler(on_halide_error);
}

int spliced_groups() { return groups; }

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
