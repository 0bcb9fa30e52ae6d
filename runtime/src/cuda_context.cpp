#include "cuda_context.h"

#include "fusedconv/error.h"

#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"

#include <dlfcn.h>

#include <cstdlib>

#include <mutex>

namespace fusedconv::cuda {

namespace {

// The few driver API entry points used here, declared by hand so that no
// CUDA header is needed to build.
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;

struct Driver {
    CUresult (*cuInit)(unsigned) = nullptr;
    CUresult (*cuDeviceGetCount)(int *) = nullptr;
    CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
    CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
    CUresult (*cuCtxPopCurrent)(CUcontext *) = nullptr;
    CUresult (*cuCtxSynchronize)() = nullptr;
    CUresult (*cuMemGetInfo)(size_t *, size_t *) = nullptr;
    CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;
    CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice) = nullptr;
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice) = nullptr;
    CUdevice device = 0;
    CUcontext primary = nullptr;
    std::string failure;  // "" when usable
};

Driver &driver() {
    static Driver d;
    return d;
}

std::string describe(CUresult r) {
    const char *s = nullptr;
    if (driver().cuGetErrorString && driver().cuGetErrorString(r, &s) == 0 && s) {
        return std::string(s) + " (" + std::to_string(r) + ")";
    }
    return "CUDA error " + std::to_string(r);
}

template <typename F>
bool load(void *lib, const char *name, F &fn) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    return fn != nullptr;
}

constexpr const char *kJitMaxRegisters = "255";

int acquire_primary(void *, void **ctx, bool) {
    *ctx = driver().primary;
    return driver().primary ? 0 : -1;
}

int release_primary(void *) { return 0; }

std::string try_init() {
    Driver &d = driver();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "the CUDA driver (libcuda.so.1) is not installed";
    if (!load(lib, "cuInit", d.cuInit) || !load(lib, "cuDeviceGetCount", d.cuDeviceGetCount) ||
        !load(lib, "cuDeviceGet", d.cuDeviceGet) ||
        !load(lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain) ||
        !load(lib, "cuCtxPushCurrent_v2", d.cuCtxPushCurrent) ||
        !load(lib, "cuCtxPopCurrent_v2", d.cuCtxPopCurrent) ||
        !load(lib, "cuCtxSynchronize", d.cuCtxSynchronize) ||
        !load(lib, "cuMemGetInfo_v2", d.cuMemGetInfo) ||
        !load(lib, "cuDeviceGetName", d.cuDeviceGetName) ||
        !load(lib, "cuDeviceGetAttribute", d.cuDeviceGetAttribute) ||
        !load(lib, "cuDeviceTotalMem_v2", d.cuDeviceTotalMem)) {
        return "the CUDA driver lacks a required entry point";
    }
    load(lib, "cuGetErrorString", d.cuGetErrorString);
    if (CUresult r = d.cuInit(0)) return "cuInit failed: " + describe(r);
    int count = 0;
    if (CUresult r = d.cuDeviceGetCount(&count)) return "cuDeviceGetCount failed: " + describe(r);
    if (count < 1) return "no CUDA device is present";
    CUdevice dev = 0;
    if (CUresult r = d.cuDeviceGet(&dev, 0)) return "cuDeviceGet failed: " + describe(r);
    d.device = dev;
    if (CUresult r = d.cuDevicePrimaryCtxRetain(&d.primary, dev)) {
        return "cuDevicePrimaryCtxRetain failed: " + describe(r);
    }
    // The context's cache preference (cuCtxSetCacheConfig) stays the
    // driver's: measured (H200, 2026-11-22, two runs each, p24 / p25 / p32 /
    // p83 ms) against 0.421-0.424 / 3.463 / 11.84 / 1.10-1.11 with none set:
    // prefer shared 0.436-0.442 / 3.461 / 11.84 / 1.20-1.22, prefer equal
    // 0.427-0.433 / 4.33-4.37 / 14.5 / 1.14, prefer L1 0.89-0.90 / 16.4 /
    // 64.6 / 1.10 (fewer blocks per SM fit in the smaller shared memory).
    // Halide 14's CUDA runtime JIT-compiles each kernel's PTX with at most
    // 64 registers per thread unless HL_CUDA_JIT_MAX_REGISTERS says
    // otherwise; the GPU schedules keep a whole tile of accumulators in
    // registers and spill to local memory under that cap. 255 lets ptxas
    // pick (a value the user set is kept).
    setenv("HL_CUDA_JIT_MAX_REGISTERS", kJitMaxRegisters, 0);
    halide_set_cuda_acquire_context(acquire_primary);
    halide_set_cuda_release_context(release_primary);
    // Freed device buffers go to Halide's cache and are reused by the next
    // allocation of a fitting size, instead of cuMemFree/cuMemAlloc per call.
    halide_reuse_device_allocations(nullptr, true);
    return "";
}

// Runs `f` with the primary context current.
template <typename F>
CUresult with_context(F f) {
    Driver &d = driver();
    if (CUresult r = d.cuCtxPushCurrent(d.primary)) return r;
    CUresult r = f();
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
    return r;
}

}  // namespace

const std::string &init() {
    static std::once_flag once;
    std::call_once(once, [] { driver().failure = try_init(); });
    return driver().failure;
}

void synchronize() {
    if (!init().empty()) return;
    if (CUresult r = with_context([] { return driver().cuCtxSynchronize(); })) {
        throw Error("GPU synchronize failed: " + describe(r));
    }
}

void memory_info(size_t *free_bytes, size_t *total_bytes) {
    if (!init().empty()) throw Error("GPU unavailable: " + init());
    if (CUresult r = with_context([&] { return driver().cuMemGetInfo(free_bytes, total_bytes); })) {
        throw Error("cuMemGetInfo failed: " + describe(r));
    }
}

Attributes attributes() {
    if (!init().empty()) throw Error("GPU unavailable: " + init());
    Driver &d = driver();
    Attributes a;
    char name[256] = {0};
    if (CUresult r = d.cuDeviceGetName(name, sizeof name - 1, d.device)) {
        throw Error("cuDeviceGetName failed: " + describe(r));
    }
    a.name = name;
    // CUdevice_attribute values from cuda.h; an attribute the driver no
    // longer reports is left at 0.
    auto attr = [&](int which) {
        int v = 0;
        return d.cuDeviceGetAttribute(&v, which, d.device) == 0 ? v : 0;
    };
    a.clock_khz = attr(13);        // CU_DEVICE_ATTRIBUTE_CLOCK_RATE
    a.sm_count = attr(16);         // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    a.mem_clock_khz = attr(36);    // CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
    a.bus_width_bits = attr(37);   // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
    a.cc_major = attr(75);         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    a.cc_minor = attr(76);         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
    d.cuDeviceTotalMem(&a.total_bytes, d.device);
    return a;
}

}  // namespace fusedconv::cuda
