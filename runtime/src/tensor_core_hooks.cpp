#include "tensor_core_hooks.h"

#include "mma_splice.h"
#include "shape_variants.h"

#include "HalideRuntime.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace fusedconv::cuda {
namespace {

// The two entry points' signatures (cuda.h's, its types as plain ones), and the values used.
using LoadDataEx = int (*)(void **, const void *, unsigned, int *, void **);
using LaunchKernel = int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void *, void **, void **);
using FuncSetAttribute = int (*)(void *, int, int);
using GetFunction = int (*)(void **, void *, const char *);
using Unload = int (*)(void *);
constexpr int kInvalidPtx = 218;                 // CUDA_ERROR_INVALID_PTX
constexpr int kJitErrorLogBuffer = 5;            // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferBytes = 6;       // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
constexpr int kMaxDynamicSharedBytes = 8;        // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr unsigned kDefaultSharedBytes = 48 * 1024;

// Set once, before any pipeline runs (halide_get_library_symbol is called while Halide's
// runtime initializes, under its own lock).
LoadDataEx real_load = nullptr;
LaunchKernel real_launch = nullptr;
FuncSetAttribute set_attribute = nullptr;
GetFunction real_get_function = nullptr;
Unload real_unload = nullptr;
std::atomic<int> last_groups{-1};

int load_spliced(void **module, const void *image, unsigned n, int *options, void **values) {
    std::string ptx;
    int groups = 0;
    try {
        ptx = splice_mma(static_cast<const char *>(image), &groups);
        last_groups.store(groups);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv: a kernel's tensor-core steps cannot be spliced: %s\n", e.what());
        return kInvalidPtx;
    }
    char log[8192] = "";
    std::vector<int> opts(options, options + n);
    std::vector<void *> vals(values, values + n);
    opts.push_back(kJitErrorLogBuffer);
    vals.push_back(log);
    opts.push_back(kJitErrorLogBufferBytes);
    vals.push_back(reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof log)));
    const int rc = real_load(module, ptx.c_str(), static_cast<unsigned>(opts.size()), opts.data(),
                             vals.data());
    if (rc != 0 && log[0]) std::fprintf(stderr, "fusedconv: the CUDA JIT refused a module (%d): %s\n", rc, log);
    if (rc == 0) forget_variant_module(*module, false);
    if (rc == 0 && groups > 0) note_variant_module(*module, ptx, n, options, values);
    return rc;
}

int get_function(void **f, void *module, const char *name) {
    const int rc = real_get_function(f, module, name);
    if (rc == 0) note_variant_function(*f, module, name);
    return rc;
}

int unload(void *module) {
    forget_variant_module(module);
    return real_unload(module);
}

int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
           unsigned shared, void *stream, void **params, void **extra) {
    f = variant_for_launch(f, params);
    if (shared > kDefaultSharedBytes) {
        if (int rc = set_attribute(f, kMaxDynamicSharedBytes, static_cast<int>(shared))) return rc;
    }
    return real_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

// The shape variants compile and unload through the driver's own entry points (each set as
// Halide's runtime asks for it).
void set_driver() {
    DriverEntryPoints d;
    d.load = real_load;
    d.get_function = real_get_function;
    d.unload = real_unload;
    set_variant_driver(d);
}

void *get_symbol(void *lib, const char *name) {
    void *s = halide_default_get_library_symbol(lib, name);
    if (!s) return s;
    if (std::strcmp(name, "cuModuleLoadDataEx") == 0) {
        real_load = reinterpret_cast<LoadDataEx>(s);
        set_driver();
        return reinterpret_cast<void *>(&load_spliced);
    }
    if (std::strcmp(name, "cuModuleGetFunction") == 0) {
        real_get_function = reinterpret_cast<GetFunction>(s);
        set_driver();
        return reinterpret_cast<void *>(&get_function);
    }
    if (std::strcmp(name, "cuModuleUnload") == 0) {
        real_unload = reinterpret_cast<Unload>(s);
        set_driver();
        return reinterpret_cast<void *>(&unload);
    }
    if (std::strcmp(name, "cuLaunchKernel") == 0) {
        set_attribute = reinterpret_cast<FuncSetAttribute>(halide_default_get_library_symbol(lib, "cuFuncSetAttribute"));
        if (!set_attribute) return s;  // a launch past 48 KB then fails with the driver's error
        real_launch = reinterpret_cast<LaunchKernel>(s);
        return reinterpret_cast<void *>(&launch);
    }
    return s;
}

}  // namespace

void install_tensor_core_hooks() { halide_set_custom_get_library_symbol(get_symbol); }

int spliced_groups() { return last_groups.load(); }

}  // namespace fusedconv::cuda
