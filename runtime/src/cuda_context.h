// The CUDA driver, loaded at run time (no link-time dependency, so the
// library runs on machines without CUDA), and Halide's CUDA runtime pointed
// at each device's primary context and at the caller's stream, so that
// pointers and streams from the CUDA runtime API, cuDNN or PyTorch can be
// used without copies.
//
// Halide's CUDA runtime asks three hooks, installed here, for the context
// and stream of every operation (allocation, kernel launch, copy, free).
// They answer from a thread-local "current device and stream" that a Scope
// sets for the duration of a call; without a Scope it is device 0 and its
// default (legacy) stream, as before streams were supported. Thread-locals
// suffice because the GPU pipelines' host code has no parallel loops (their
// .stmt files hold no halide_do_par_for): every CUDA call of a pipeline
// runs on the calling thread.
//
// What Halide 14's runtime (src/runtime/cuda.cpp) caches, and why that is
// safe with several devices and streams:
// - compiled modules: per (context, pipeline), so each device loads its own;
// - freed device allocations (halide_reuse_device_allocations): a free list
//   of (pointer, context, stream, size); an allocation is reused only by the
//   same context AND the same stream handle it was freed on, so work queued
//   on one stream never shares memory with another stream's queued work.
//   The per-thread default stream (CU_STREAM_PER_THREAD) is one handle for
//   different streams on different threads: it is refused (Scope).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace fusedconv::cuda {

// Loads the driver, initializes it and installs Halide's hooks once.
// Returns "" on success, else why the GPU cannot be used.
const std::string &init();
// CUDA devices the driver reports (0 when the GPU is unusable).
int device_count();
// Whether `device` runs mma.sync with tf32 operands (compute capability 8.0 or later), which the
// tensor-core kernels (generators/winograd2d_tensor_core.h) need; false without a usable GPU.
bool has_tf32_tensor_cores(int device);
// Whether `device` runs Hopper's warpgroup mma (wgmma, PTX target sm_90a): compute capability
// 9.0 exactly (later architectures dropped it).
bool has_wgmma(int device);
// Throws Error naming `device` unless 0 <= device < device_count() (and the
// GPU is usable); `what` names the caller.
void check_device(int device, const std::string &what);

// Makes (device, stream) current for Halide's hooks on this thread and
// restores the previous pair when destroyed. The checked constructor
// validates the index and the stream (a stream of another device or
// context, the per-thread default stream and invalid handles are refused
// with an Error); the unchecked one (for destructors) validates nothing.
class Scope {
public:
    Scope(int device, void *stream);
    struct Unchecked {};
    Scope(int device, void *stream, Unchecked) noexcept;
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

private:
    int prev_device_;
    void *prev_stream_;
};
int current_device();
void *current_stream();

// Whether the current stream is being captured into a CUDA graph. Throws
// Error when the driver refuses to say (e.g. the legacy stream while another
// thread captures in global mode).
enum class Capture { None, Active, Invalidated };
Capture capture_status();

// Copies `bytes` from device memory to host memory on the current stream
// and waits for that stream only (not the whole device).
void copy_to_host_and_wait(void *host, uint64_t device_ptr, size_t bytes);
// The same for `rows` rows of `row_bytes` bytes, `pitch` bytes apart on the
// device (pitch >= row_bytes), packed on the host: one strided copy.
void copy_rows_to_host_and_wait(void *host, uint64_t device_ptr, size_t pitch, size_t row_bytes,
                                size_t rows);

// Writes to the host without a copy: `queue(address)` queues work on the
// current stream that writes at most `bytes` at `address`, the device's view
// of a page-locked host block; this then waits for that stream (only) and
// copies the block's bytes to `host`. Returns false, having queued nothing,
// when the driver gives no such block (the caller then copies instead).
bool write_to_host_and_wait(void *host, size_t bytes, const std::function<void(uint64_t)> &queue);

// Copies `bytes` between two GPUs' memory peer to peer (NVLink or PCIe; the
// driver stages through the host only where the hardware has no peer path)
// and waits for it. It starts after the work queued on the legacy default
// stream of `stream_device` (one of the two; the host waits for that stream)
// and runs on a non-blocking stream of that device, so that it waits for
// nothing else: the caller waits for the other device's work on either
// range first.
void copy_peer_and_wait(int stream_device, int dst_device, uint64_t dst, int src_device,
                        uint64_t src, size_t bytes);

// `device`'s side stream: a non-blocking stream on which a call runs part of
// its work beside the caller's stream (batch_halves.h), created on first use
// and kept for the process's life. Every call's work on it waits for its
// caller's stream first and is waited for by it, so calls from several
// threads only queue behind one another there.
void *side_stream(int device);
// `device`'s multiprocessor count, read at initialization (0 without a GPU,
// for a bad index, or when the driver did not say).
int sm_count(int device);

// The pieces of a copy pipeline (sharded.cpp), all asynchronous:
// - copy_stream: `device`'s non-blocking stream of peer copies for `lane` (0
//   or 1: two lanes let copies in and out of a device run at once), created
//   on first use and kept for the process's life;
// - copy_peer_async: queues a peer copy on `stream` of `stream_device` (one
//   of the two devices), without waiting for anything;
// - event_record: a new event (no timing) recorded on `stream`, to pass to
//   stream_wait_event and then to event_destroy (which ignores null and
//   never throws).
void *copy_stream(int device, int lane);
void copy_peer_async(void *stream, int stream_device, int dst_device, uint64_t dst,
                     int src_device, uint64_t src, size_t bytes);
void *event_record(int device, void *stream);
void stream_wait_event(int device, void *stream, void *event);
void event_destroy(int device, void *event) noexcept;
// `waiter`'s later work waits for the work queued on `stream` so far (an event
// recorded there, waited for, and destroyed).
void stream_wait_stream(int device, void *waiter, void *stream);

// Waits for all work of every device this process used (cuCtxSynchronize of
// each retained primary context); no-op without a GPU.
void synchronize();
// Waits for all work on one device; throws Error for a bad index.
void synchronize(int device);

// Free and total memory of a device; throws Error when unavailable.
void memory_info(int device, size_t *free_bytes, size_t *total_bytes);
// A device's name and attributes; throws Error when unavailable.
struct Attributes {
    std::string name;
    int sm_count = 0, cc_major = 0, cc_minor = 0, clock_khz = 0, mem_clock_khz = 0,
        bus_width_bits = 0;
    size_t total_bytes = 0;
};
Attributes attributes(int device);

// Driver-API helpers for tests and tools (no CUDA toolkit needed): a stream
// of `device` (non_blocking: CU_STREAM_NON_BLOCKING, so it does not wait for
// the legacy default stream), its synchronization and destruction, and
// graph capture of a stream (global mode) with a one-shot replay.
void *stream_create(int device, bool non_blocking);
void stream_synchronize(int device, void *stream);
void stream_destroy(int device, void *stream);
void begin_capture(int device, void *stream);
// Ends the capture and returns the graph (CUgraph); throws Error when the
// capture was invalidated.
void *end_capture(int device, void *stream);
// Instantiates `graph`, launches it on `stream`, waits for it, frees both.
void launch_graph_and_wait(int device, void *graph, void *stream);
void graph_destroy(void *graph);

}  // namespace fusedconv::cuda
