#include "cuda_context.h"
#include "tensor_core_hooks.h"

#include "fusedconv/error.h"

#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace fusedconv::cuda {

namespace {

// The driver API entry points used here, declared by hand so that no CUDA
// header is needed to build. Values of enums and flags are cuda.h's.
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUstream = void *;
using CUgraph = void *;
using CUgraphExec = void *;
using CUdeviceptr = unsigned long long;
using CUevent = void *;

constexpr uintptr_t kStreamLegacy = 0x1;     // CU_STREAM_LEGACY
constexpr uintptr_t kStreamPerThread = 0x2;  // CU_STREAM_PER_THREAD
constexpr unsigned kStreamNonBlocking = 0x1; // CU_STREAM_NON_BLOCKING
constexpr int kCaptureModeGlobal = 0;        // CU_STREAM_CAPTURE_MODE_GLOBAL
constexpr unsigned kEventDisableTiming = 0x2; // CU_EVENT_DISABLE_TIMING
constexpr int kCaptureActive = 1, kCaptureInvalidated = 2;
constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kMultiprocessorCount = 16;     // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

// cuda.h's CUDA_MEMCPY2D (cuMemcpy2DAsync_v2's argument).
constexpr int kMemoryTypeHost = 1, kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_*
struct Memcpy2D {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
};

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
    CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream) = nullptr;
    CUresult (*cuMemcpy2DAsync)(const Memcpy2D *, CUstream) = nullptr;
    // Present in every driver of CUDA 11+; checked where used.
    CUresult (*cuStreamGetCtx)(CUstream, CUcontext *) = nullptr;
    CUresult (*cuStreamIsCapturing)(CUstream, int *) = nullptr;
    CUresult (*cuStreamCreate)(CUstream *, unsigned) = nullptr;
    CUresult (*cuStreamDestroy)(CUstream) = nullptr;
    CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *) = nullptr;
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long) = nullptr;
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
    CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
    CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
    CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                  CUstream) = nullptr;
    CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice) = nullptr;
    CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned) = nullptr;
    CUresult (*cuEventCreate)(CUevent *, unsigned) = nullptr;
    CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
    CUresult (*cuEventDestroy)(CUevent) = nullptr;
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned) = nullptr;
    CUresult (*cuMemHostGetDevicePointer)(uint64_t *, void *, unsigned) = nullptr;

    int count = 0;
    // Primary context per device index, retained on first use (retaining
    // creates the context, which takes device memory: only devices used).
    std::unique_ptr<std::atomic<CUcontext>[]> primary;
    std::mutex retain_mutex;
    // Ordered device pairs (accessing, accessed) whose peer access was
    // tried (enabled, or refused by the hardware: copies are then staged).
    std::set<std::pair<int, int>> peer_tried;
    // Per (device, lane), a non-blocking stream of peer copies (created on
    // first use, kept for the process's life like the primary contexts).
    std::map<std::pair<int, int>, CUstream> copy_streams;
    std::mutex peer_mutex;
    // Page-locked host blocks of copy_to_host_and_wait, free ones by size
    // (kept for the process's life; as many as calls ever ran at once).
    std::multimap<size_t, void *> pinned_free;
    std::mutex pinned_mutex;
    std::string failure;  // "" when usable
    std::vector<int> cc_major, cc_minor;  // per device, read at init
    std::vector<int> sm_counts;            // per device, read at init (0: unknown)
    // Per device, the side stream of side_stream (created on first use, kept).
    std::map<int, CUstream> side_streams;
    std::mutex side_mutex;
};

Driver &driver() {
    static Driver d;
    return d;
}

thread_local int tl_device = 0;
thread_local void *tl_stream = nullptr;

std::string describe(CUresult r) {
    const char *s = nullptr;
    if (driver().cuGetErrorString && driver().cuGetErrorString(r, &s) == 0 && s) {
        return std::string(s) + " (" + std::to_string(r) + ")";
    }
    return "CUDA error " + std::to_string(r);
}

std::string pointer_string(const void *p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

template <typename F>
bool load(void *lib, const char *name, F &fn) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    return fn != nullptr;
}

// The device's primary context, retained on first use; nullptr when the
// index is out of range or the driver refuses (`why` says why).
CUcontext primary_context(int device, std::string *why = nullptr) {
    Driver &d = driver();
    if (device < 0 || device >= d.count) {
        if (why) *why = "no such device";
        return nullptr;
    }
    if (CUcontext c = d.primary[device].load(std::memory_order_acquire)) return c;
    std::lock_guard<std::mutex> lock(d.retain_mutex);
    if (CUcontext c = d.primary[device].load(std::memory_order_relaxed)) return c;
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (CUresult r = d.cuDeviceGet(&dev, device)) {
        if (why) *why = "cuDeviceGet failed: " + describe(r);
        return nullptr;
    }
    if (CUresult r = d.cuDevicePrimaryCtxRetain(&ctx, dev)) {
        if (why) *why = "cuDevicePrimaryCtxRetain failed: " + describe(r);
        return nullptr;
    }
    d.primary[device].store(ctx, std::memory_order_release);
    return ctx;
}

// Halide's hooks: the current device's primary context and current stream.
int acquire_context(void *, void **ctx, bool) {
    *ctx = primary_context(tl_device);
    return *ctx ? 0 : -1;
}

int release_context(void *) { return 0; }

int get_stream(void *, void *, void **stream) {
    *stream = tl_stream;
    return 0;
}

constexpr const char *kJitMaxRegisters = "255";

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
        !load(lib, "cuDeviceTotalMem_v2", d.cuDeviceTotalMem) ||
        !load(lib, "cuStreamSynchronize", d.cuStreamSynchronize) ||
        !load(lib, "cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync) ||
        !load(lib, "cuMemcpy2DAsync_v2", d.cuMemcpy2DAsync)) {
        return "the CUDA driver lacks a required entry point";
    }
    load(lib, "cuGetErrorString", d.cuGetErrorString);
    load(lib, "cuStreamGetCtx", d.cuStreamGetCtx);
    load(lib, "cuStreamIsCapturing", d.cuStreamIsCapturing);
    load(lib, "cuStreamCreate", d.cuStreamCreate);
    load(lib, "cuStreamDestroy_v2", d.cuStreamDestroy);
    load(lib, "cuStreamBeginCapture_v2", d.cuStreamBeginCapture);
    load(lib, "cuStreamEndCapture", d.cuStreamEndCapture);
    load(lib, "cuGraphInstantiateWithFlags", d.cuGraphInstantiateWithFlags);
    load(lib, "cuGraphLaunch", d.cuGraphLaunch);
    load(lib, "cuGraphExecDestroy", d.cuGraphExecDestroy);
    load(lib, "cuGraphDestroy", d.cuGraphDestroy);
    load(lib, "cuMemcpyPeerAsync", d.cuMemcpyPeerAsync);
    load(lib, "cuDeviceCanAccessPeer", d.cuDeviceCanAccessPeer);
    load(lib, "cuCtxEnablePeerAccess", d.cuCtxEnablePeerAccess);
    load(lib, "cuEventCreate", d.cuEventCreate);
    load(lib, "cuEventRecord", d.cuEventRecord);
    load(lib, "cuEventDestroy_v2", d.cuEventDestroy);
    load(lib, "cuStreamWaitEvent", d.cuStreamWaitEvent);
    load(lib, "cuMemHostAlloc", d.cuMemHostAlloc);
    load(lib, "cuMemHostGetDevicePointer_v2", d.cuMemHostGetDevicePointer);
    if (CUresult r = d.cuInit(0)) return "cuInit failed: " + describe(r);
    int count = 0;
    if (CUresult r = d.cuDeviceGetCount(&count)) return "cuDeviceGetCount failed: " + describe(r);
    if (count < 1) return "no CUDA device is present";
    for (int i = 0; i < count; ++i) {
        CUdevice dev = 0;
        int major = 0, minor = 0, sms = 0;
        if (d.cuDeviceGet(&dev, i) != 0 ||
            d.cuDeviceGetAttribute(&major, kComputeCapabilityMajor, dev) != 0 ||
            d.cuDeviceGetAttribute(&minor, kComputeCapabilityMinor, dev) != 0) {
            major = minor = 0;  // unknown: no tensor-core kernels on it
        }
        if (d.cuDeviceGetAttribute(&sms, kMultiprocessorCount, dev) != 0) sms = 0;
        d.cc_major.push_back(major);
        d.cc_minor.push_back(minor);
        d.sm_counts.push_back(sms);
    }
    d.primary.reset(new std::atomic<CUcontext>[count]);
    for (int i = 0; i < count; ++i) d.primary[i].store(nullptr);
    d.count = count;
    // Device 0 is retained now, as the default of every call without a Scope.
    std::string why;
    if (!primary_context(0, &why)) {
        d.count = 0;
        return why;
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
    // registers and spill to local memory under that cap. At 255 ptxas
    // schedules the big kernels for 250-255 registers, which measured faster
    // than its own choice without a cap (schedules/NOTES.md, "Registers: the
    // JIT's cap"). A value the user set is kept.
    setenv("HL_CUDA_JIT_MAX_REGISTERS", kJitMaxRegisters, 0);
    install_tensor_core_hooks();
    halide_set_cuda_acquire_context(acquire_context);
    halide_set_cuda_release_context(release_context);
    halide_set_cuda_get_stream(get_stream);
    // Freed device buffers go to Halide's cache and are reused by the next
    // allocation of a fitting size on the same context and stream, instead
    // of cuMemFree/cuMemAlloc per call.
    halide_reuse_device_allocations(nullptr, true);
    return "";
}

void require_usable(const char *what) {
    if (!init().empty()) throw Error(std::string(what) + ": GPU unavailable: " + init());
}

// Runs `f` with `device`'s primary context current.
template <typename F>
CUresult with_context(int device, F f) {
    Driver &d = driver();
    std::string why;
    CUcontext ctx = primary_context(device, &why);
    if (!ctx) throw Error("CUDA device " + std::to_string(device) + ": " + why);
    if (CUresult r = d.cuCtxPushCurrent(ctx)) return r;
    CUresult r = f();
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
    return r;
}

void check(CUresult r, const std::string &what) {
    if (r) throw Error(what + " failed: " + describe(r));
}

template <typename Fn>
Fn require_entry(Fn fn, const char *name) {
    if (!fn) throw Error(std::string("the CUDA driver lacks ") + name);
    return fn;
}

}  // namespace

const std::string &init() {
    static std::once_flag once;
    std::call_once(once, [] { driver().failure = try_init(); });
    return driver().failure;
}

int device_count() { return init().empty() ? driver().count : 0; }

bool has_tf32_tensor_cores(int device) {
    const Driver &d = driver();
    return init().empty() && device >= 0 && device < d.count && d.cc_major[device] >= 8;
}

bool has_wgmma(int device) {
    const Driver &d = driver();
    return init().empty() && device >= 0 && device < d.count && d.cc_major[device] == 9 &&
           d.cc_minor[device] == 0;
}

void check_device(int device, const std::string &what) {
    if (!init().empty()) throw Error(what + ": GPU unavailable: " + init());
    const int count = driver().count;
    if (device < 0 || device >= count) {
        throw Error(what + ": CUDA device index " + std::to_string(device) +
                    " is out of range (" + std::to_string(count) + " device" +
                    (count == 1 ? "" : "s") + " present: 0.." + std::to_string(count - 1) + ")");
    }
    std::string why;
    if (!primary_context(device, &why)) {
        throw Error(what + ": CUDA device " + std::to_string(device) + ": " + why);
    }
}

Scope::Scope(int device, void *stream) : prev_device_(tl_device), prev_stream_(tl_stream) {
    const std::string what = "CUDA device " + std::to_string(device);
    check_device(device, "stream scope");
    const uintptr_t handle = reinterpret_cast<uintptr_t>(stream);
    if (handle == kStreamPerThread) {
        // One handle names a different stream on each thread; Halide's
        // allocation cache keys on the handle, so it could hand memory in use
        // by one thread's queued work to another thread's work.
        throw Error(what + ": the per-thread default stream (CU_STREAM_PER_THREAD, 0x2) is not "
                           "supported; pass a created stream or NULL (the legacy default stream)");
    }
    if (stream && handle != kStreamLegacy && driver().cuStreamGetCtx) {
        CUcontext ctx = nullptr;
        const CUresult r = driver().cuStreamGetCtx(stream, &ctx);
        if (r) {
            throw Error(what + ": stream " + pointer_string(stream) +
                        " is not a valid CUDA stream: " + describe(r));
        }
        if (ctx != primary_context(device)) {
            throw Error(what + ": stream " + pointer_string(stream) +
                        " belongs to another device or context than device " +
                        std::to_string(device) + "'s primary context");
        }
    }
    tl_device = device;
    tl_stream = stream;
}

Scope::Scope(int device, void *stream, Unchecked) noexcept
    : prev_device_(tl_device), prev_stream_(tl_stream) {
    tl_device = device;
    tl_stream = stream;
}

Scope::~Scope() {
    tl_device = prev_device_;
    tl_stream = prev_stream_;
}

int current_device() { return tl_device; }
void *current_stream() { return tl_stream; }

Capture capture_status() {
    require_usable("capture status");
    Driver &d = driver();
    if (!d.cuStreamIsCapturing) return Capture::None;  // a driver without graphs
    int status = 0;
    void *stream = tl_stream;
    const CUresult r = with_context(tl_device, [&] { return d.cuStreamIsCapturing(stream, &status); });
    if (r) {
        throw Error("CUDA device " + std::to_string(tl_device) + ": cuStreamIsCapturing on stream " +
                    pointer_string(stream) + " failed: " + describe(r) +
                    " (the legacy default stream cannot be used while another stream is "
                    "captured in global mode)");
    }
    if (status == kCaptureActive) return Capture::Active;
    if (status == kCaptureInvalidated) return Capture::Invalidated;
    return Capture::None;
}

namespace {

constexpr unsigned kMemHostAllocPortable = 0x1;   // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kMemHostAllocDeviceMap = 0x2;  // CU_MEMHOSTALLOC_DEVICEMAP
constexpr size_t kPinnedBlockBytes = 64 * 1024;

// A page-locked host block of at least `bytes` (from the free list, else
// new, portable to every context and mapped into the devices' address space),
// or null when the driver cannot give one.
// cuMemHostAlloc needs a current context (without one it fails with
// CUDA_ERROR_INVALID_CONTEXT): `device`'s is pushed for it.
std::pair<void *, size_t> pinned_acquire(int device, size_t bytes) {
    Driver &d = driver();
    {
        std::lock_guard<std::mutex> lock(d.pinned_mutex);
        auto it = d.pinned_free.lower_bound(bytes);
        if (it != d.pinned_free.end()) {
            std::pair<void *, size_t> block{it->second, it->first};
            d.pinned_free.erase(it);
            return block;
        }
    }
    if (!d.cuMemHostAlloc) return {nullptr, 0};
    const size_t size = std::max(bytes, kPinnedBlockBytes);
    void *p = nullptr;
    const unsigned flags = kMemHostAllocPortable | kMemHostAllocDeviceMap;
    if (with_context(device, [&] { return d.cuMemHostAlloc(&p, size, flags); }) || !p) {
        return {nullptr, 0};
    }
    return {p, size};
}

void pinned_release(std::pair<void *, size_t> block) {
    if (!block.first) return;
    Driver &d = driver();
    std::lock_guard<std::mutex> lock(d.pinned_mutex);
    d.pinned_free.emplace(block.second, block.first);
}

}  // namespace

// Through a page-locked block, which the copy engine writes directly (a copy
// into pageable memory is staged by the driver): H100, 2026-11-26, medians
// of 20 in one call, p25 2.914-2.917 ms against 2.925-2.937, p32
// 10.057-10.073 against 10.092-10.127, p83 1.100-1.102 against 1.101-1.106.
void copy_to_host_and_wait(void *host, uint64_t device_ptr, size_t bytes) {
    copy_rows_to_host_and_wait(host, device_ptr, bytes, bytes, 1);
}

bool write_to_host_and_wait(void *host, size_t bytes, const std::function<void(uint64_t)> &queue) {
    require_usable("write to host");
    Driver &d = driver();
    if (!d.cuMemHostGetDevicePointer) return false;
    void *stream = tl_stream;
    const int device = tl_device;
    const std::pair<void *, size_t> block = pinned_acquire(device, bytes);
    if (!block.first) return false;
    uint64_t address = 0;
    if (with_context(device, [&] { return d.cuMemHostGetDevicePointer(&address, block.first, 0); }) ||
        !address) {
        pinned_release(block);
        return false;
    }
    auto wait = [&] { return with_context(device, [&] { return d.cuStreamSynchronize(stream); }); };
    try {
        queue(address);
    } catch (...) {
        // Whatever was queued may still write the block: it goes back to the free list only
        // once the stream is idle (or never, if even that fails).
        if (!wait()) pinned_release(block);
        throw;
    }
    const CUresult r = wait();
    if (!r) {
        std::memcpy(host, block.first, bytes);
        pinned_release(block);
    }
    check(r, "CUDA device " + std::to_string(device) + ", stream " + pointer_string(stream) +
                 ": waiting for " + std::to_string(bytes) + " bytes written to host memory");
    return true;
}

void copy_rows_to_host_and_wait(void *host, uint64_t device_ptr, size_t pitch, size_t row_bytes,
                                size_t rows) {
    require_usable("copy to host");
    Driver &d = driver();
    void *stream = tl_stream;
    const size_t bytes = row_bytes * rows;
    const std::string where = "CUDA device " + std::to_string(tl_device) + ", stream " +
                              pointer_string(stream) + ": ";
    const std::pair<void *, size_t> block = pinned_acquire(tl_device, bytes);
    void *target = block.first ? block.first : host;
    CUresult r = with_context(tl_device, [&] {
        if (rows == 1) return d.cuMemcpyDtoHAsync(target, device_ptr, bytes, stream);
        Memcpy2D c{};
        c.srcMemoryType = kMemoryTypeDevice;
        c.srcDevice = device_ptr;
        c.srcPitch = pitch;
        c.dstMemoryType = kMemoryTypeHost;
        c.dstHost = target;
        c.dstPitch = row_bytes;
        c.WidthInBytes = row_bytes;
        c.Height = rows;
        return d.cuMemcpy2DAsync(&c, stream);
    });
    if (!r) r = with_context(tl_device, [&] { return d.cuStreamSynchronize(stream); });
    if (!r && block.first) std::memcpy(host, block.first, bytes);
    pinned_release(block);
    check(r, where + "copy to host of " +
                 (rows == 1 ? std::to_string(bytes) + " bytes"
                            : std::to_string(rows) + " x " + std::to_string(row_bytes) +
                                  " bytes (" + std::to_string(pitch) + " bytes apart)"));
}

namespace {

constexpr CUresult kPeerAccessAlreadyEnabled = 704;  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED

// Lets `accessing`'s context reach `accessed`'s memory where the hardware
// allows (NVLink or PCIe peer to peer), once per ordered pair: copies
// between contexts without it are staged through host memory by the driver.
// A refusal is not an error (the copy still works, staged).
void enable_peer_access(int accessing, int accessed) {
    Driver &d = driver();
    if (!d.cuDeviceCanAccessPeer || !d.cuCtxEnablePeerAccess) return;
    std::lock_guard<std::mutex> lock(d.peer_mutex);
    if (!d.peer_tried.insert({accessing, accessed}).second) return;
    CUdevice a = 0, b = 0;
    int can = 0;
    if (d.cuDeviceGet(&a, accessing) || d.cuDeviceGet(&b, accessed) ||
        d.cuDeviceCanAccessPeer(&can, a, b) || !can) {
        return;
    }
    CUcontext peer = primary_context(accessed);
    const CUresult r = with_context(accessing, [&] { return d.cuCtxEnablePeerAccess(peer, 0); });
    if (r && r != kPeerAccessAlreadyEnabled) {
        throw Error("CUDA device " + std::to_string(accessing) +
                    ": cuCtxEnablePeerAccess to device " + std::to_string(accessed) +
                    " failed: " + describe(r));
    }
}

std::string peer_copy_what(int src_device, int dst_device, size_t bytes) {
    return "peer copy of " + std::to_string(bytes) + " bytes from CUDA device " +
           std::to_string(src_device) + " to device " + std::to_string(dst_device);
}

// A non-blocking stream of `device` kept in `streams` under `key` (guarded by
// `mutex`), created on first use and kept for the process's life; `what`
// names it in the driver's error.
template <typename Key>
CUstream kept_stream(std::map<Key, CUstream> &streams, std::mutex &mutex, const Key &key,
                     int device, const char *what) {
    auto create = require_entry(driver().cuStreamCreate, "cuStreamCreate");
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(key);
    if (it != streams.end()) return it->second;
    CUstream s = nullptr;
    check(with_context(device, [&] { return create(&s, kStreamNonBlocking); }),
          "CUDA device " + std::to_string(device) + ": cuStreamCreate (" + what + ")");
    streams[key] = s;
    return s;
}

}  // namespace

int sm_count(int device) {
    Driver &d = driver();
    return init().empty() && device >= 0 && device < d.count ? d.sm_counts[device] : 0;
}

void *side_stream(int device) {
    check_device(device, "side stream");
    Driver &d = driver();
    return kept_stream(d.side_streams, d.side_mutex, device, device, "side stream");
}

// A peer copy on a blocking stream (the legacy default stream included) was
// measured to wait for the kernels queued on the other GPU too (2 x H100,
// 2026-11-25: the sharded forward's second shard ran after the first, 4.0 ms
// for p24's batch 1024 against 1.7 ms per half): the copies run on
// non-blocking streams.
void *copy_stream(int device, int lane) {
    check_device(device, "copy stream");
    if (lane < 0 || lane > 1) {
        throw Error("copy stream of CUDA device " + std::to_string(device) + ": lane " +
                    std::to_string(lane) + " (0 or 1)");
    }
    Driver &d = driver();
    return kept_stream(d.copy_streams, d.peer_mutex, {device, lane}, device, "peer copies");
}

void copy_peer_async(void *stream, int stream_device, int dst_device, uint64_t dst,
                     int src_device, uint64_t src, size_t bytes) {
    const std::string what = peer_copy_what(src_device, dst_device, bytes);
    check_device(src_device, what);
    check_device(dst_device, what);
    if (stream_device != src_device && stream_device != dst_device) {
        throw Error(what + ": the copy's stream must be on one of the two devices, not device " +
                    std::to_string(stream_device));
    }
    Driver &d = driver();
    auto copy = require_entry(d.cuMemcpyPeerAsync, "cuMemcpyPeerAsync");
    enable_peer_access(src_device, dst_device);
    enable_peer_access(dst_device, src_device);
    CUcontext dst_ctx = primary_context(dst_device), src_ctx = primary_context(src_device);
    check(with_context(stream_device,
                       [&] { return copy(dst, dst_ctx, src, src_ctx, bytes, stream); }),
          what + ": cuMemcpyPeerAsync");
}

void copy_peer_and_wait(int stream_device, int dst_device, uint64_t dst, int src_device,
                        uint64_t src, size_t bytes) {
    const std::string what = peer_copy_what(src_device, dst_device, bytes);
    check_device(stream_device, what);
    void *stream = copy_stream(stream_device, 0);
    // After the work queued on stream_device's legacy default stream (the
    // host waits for it), on a stream that waits for nothing else.
    check(with_context(stream_device, [&] { return driver().cuStreamSynchronize(nullptr); }),
          what + ": cuStreamSynchronize (legacy default stream)");
    copy_peer_async(stream, stream_device, dst_device, dst, src_device, src, bytes);
    check(with_context(stream_device, [&] { return driver().cuStreamSynchronize(stream); }),
          what + ": cuStreamSynchronize");
}

void *event_record(int device, void *stream) {
    check_device(device, "event_record");
    Driver &d = driver();
    auto create = require_entry(d.cuEventCreate, "cuEventCreate");
    auto record = require_entry(d.cuEventRecord, "cuEventRecord");
    auto destroy = require_entry(d.cuEventDestroy, "cuEventDestroy");
    CUevent e = nullptr;
    check(with_context(device, [&] { return create(&e, kEventDisableTiming); }),
          "CUDA device " + std::to_string(device) + ": cuEventCreate");
    if (CUresult r = with_context(device, [&] { return record(e, stream); })) {
        with_context(device, [&] { return destroy(e); });
        check(r, "CUDA device " + std::to_string(device) + ": cuEventRecord on stream " +
                     pointer_string(stream));
    }
    return e;
}

void stream_wait_event(int device, void *stream, void *event) {
    check_device(device, "stream_wait_event");
    auto wait = require_entry(driver().cuStreamWaitEvent, "cuStreamWaitEvent");
    check(with_context(device, [&] { return wait(stream, event, 0); }),
          "CUDA device " + std::to_string(device) + ": cuStreamWaitEvent on stream " +
              pointer_string(stream));
}

void stream_wait_stream(int device, void *waiter, void *stream) {
    check_device(device, "stream_wait_stream");
    Driver &d = driver();
    auto create = require_entry(d.cuEventCreate, "cuEventCreate");
    auto record = require_entry(d.cuEventRecord, "cuEventRecord");
    auto wait = require_entry(d.cuStreamWaitEvent, "cuStreamWaitEvent");
    auto destroy = require_entry(d.cuEventDestroy, "cuEventDestroy");
    // One context push for the four calls; the event may go once the wait is queued.
    CUresult r = with_context(device, [&] {
        CUevent e = nullptr;
        if (CUresult c = create(&e, kEventDisableTiming)) return c;
        CUresult c = record(e, stream);
        if (!c) c = wait(waiter, e, 0);
        destroy(e);
        return c;
    });
    check(r, "CUDA device " + std::to_string(device) + ": stream " + pointer_string(waiter) +
                 " waiting for stream " + pointer_string(stream));
}

void event_destroy(int device, void *event) noexcept {
    Driver &d = driver();
    if (!event || !d.cuEventDestroy || device < 0 || device >= d.count) return;
    CUcontext ctx = d.primary[device].load(std::memory_order_acquire);
    if (!ctx || d.cuCtxPushCurrent(ctx)) return;
    d.cuEventDestroy(event);
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
}

void synchronize() {
    if (!init().empty()) return;
    Driver &d = driver();
    for (int i = 0; i < d.count; ++i) {
        if (!d.primary[i].load(std::memory_order_acquire)) continue;  // never used
        if (CUresult r = with_context(i, [&] { return d.cuCtxSynchronize(); })) {
            throw Error("GPU synchronize of device " + std::to_string(i) + " failed: " +
                        describe(r));
        }
    }
}

void synchronize(int device) {
    check_device(device, "synchronize");
    Driver &d = driver();
    if (CUresult r = with_context(device, [&] { return d.cuCtxSynchronize(); })) {
        throw Error("GPU synchronize of device " + std::to_string(device) + " failed: " +
                    describe(r));
    }
}

void memory_info(int device, size_t *free_bytes, size_t *total_bytes) {
    if (!init().empty()) throw Error("GPU unavailable: " + init());
    check_device(device, "memory info");
    Driver &d = driver();
    check(with_context(device, [&] { return d.cuMemGetInfo(free_bytes, total_bytes); }),
          "cuMemGetInfo");
}

Attributes attributes(int device) {
    if (!init().empty()) throw Error("GPU unavailable: " + init());
    check_device(device, "device attributes");
    Driver &d = driver();
    CUdevice dev = 0;
    check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
    Attributes a;
    char name[256] = {0};
    check(d.cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
    a.name = name;
    // CUdevice_attribute values from cuda.h; an attribute the driver no
    // longer reports is left at 0.
    auto attr = [&](int which) {
        int v = 0;
        return d.cuDeviceGetAttribute(&v, which, dev) == 0 ? v : 0;
    };
    a.clock_khz = attr(13);        // CU_DEVICE_ATTRIBUTE_CLOCK_RATE
    a.sm_count = attr(16);         // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    a.mem_clock_khz = attr(36);    // CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
    a.bus_width_bits = attr(37);   // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
    a.cc_major = attr(75);         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    a.cc_minor = attr(76);         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
    d.cuDeviceTotalMem(&a.total_bytes, dev);
    return a;
}

void *stream_create(int device, bool non_blocking) {
    check_device(device, "stream_create");
    Driver &d = driver();
    auto create = require_entry(d.cuStreamCreate, "cuStreamCreate");
    CUstream s = nullptr;
    check(with_context(device, [&] { return create(&s, non_blocking ? kStreamNonBlocking : 0); }),
          "cuStreamCreate");
    return s;
}

void stream_synchronize(int device, void *stream) {
    check_device(device, "stream_synchronize");
    Driver &d = driver();
    check(with_context(device, [&] { return d.cuStreamSynchronize(stream); }),
          "cuStreamSynchronize");
}

void stream_destroy(int device, void *stream) {
    check_device(device, "stream_destroy");
    auto destroy = require_entry(driver().cuStreamDestroy, "cuStreamDestroy");
    check(with_context(device, [&] { return destroy(stream); }), "cuStreamDestroy");
}

void begin_capture(int device, void *stream) {
    check_device(device, "begin_capture");
    auto begin = require_entry(driver().cuStreamBeginCapture, "cuStreamBeginCapture");
    check(with_context(device, [&] { return begin(stream, kCaptureModeGlobal); }),
          "cuStreamBeginCapture");
}

void *end_capture(int device, void *stream) {
    check_device(device, "end_capture");
    auto end = require_entry(driver().cuStreamEndCapture, "cuStreamEndCapture");
    CUgraph graph = nullptr;
    check(with_context(device, [&] { return end(stream, &graph); }), "cuStreamEndCapture");
    return graph;
}

void launch_graph_and_wait(int device, void *graph, void *stream) {
    check_device(device, "launch_graph_and_wait");
    Driver &d = driver();
    auto instantiate = require_entry(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    auto launch = require_entry(d.cuGraphLaunch, "cuGraphLaunch");
    auto destroy = require_entry(d.cuGraphExecDestroy, "cuGraphExecDestroy");
    CUgraphExec exec = nullptr;
    check(with_context(device, [&] { return instantiate(&exec, graph, 0); }),
          "cuGraphInstantiateWithFlags");
    CUresult r = with_context(device, [&] { return launch(exec, stream); });
    if (!r) r = with_context(device, [&] { return d.cuStreamSynchronize(stream); });
    with_context(device, [&] { return destroy(exec); });
    check(r, "graph launch");
}

void graph_destroy(void *graph) {
    if (graph && driver().cuGraphDestroy) driver().cuGraphDestroy(graph);
}

}  // namespace fusedconv::cuda
