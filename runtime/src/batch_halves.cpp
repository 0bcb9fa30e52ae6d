#include "batch_halves.h"

#include "cuda_context.h"
#include "env_switch.h"
#include "fusedconv/error.h"
#include "nan_check.h"

#include <atomic>
#include <exception>

namespace fusedconv::detail {

namespace {
std::atomic<BatchHalves> &policy() {
    static std::atomic<BatchHalves> p{env_switch_on("FUSEDCONV_BATCH_HALVES") ? BatchHalves::Auto
                                                                              : BatchHalves::Never};
    return p;
}

std::atomic<int64_t> runs{0};

// `waiter`'s later work waits for the work queued on `stream` so far.
void wait_for(int device, void *waiter, void *stream) {
    void *done = cuda::event_record(device, stream);
    try {
        cuda::stream_wait_event(device, waiter, done);
    } catch (...) {
        cuda::event_destroy(device, done);
        throw;
    }
    cuda::event_destroy(device, done);
}
}  // namespace

void set_batch_halves(BatchHalves p) { policy().store(p); }
BatchHalves batch_halves() { return policy().load(); }
int64_t batch_halves_runs() { return runs.load(); }

bool batch_halves_apply(const Tensor &output) {
    const BatchHalves p = batch_halves();
    if (p == BatchHalves::Never || output.device() != Device::GPU || output.dim() < 1 ||
        output.shape()[0] < 2) {
        return false;
    }
    if (p == BatchHalves::Always) return true;
    const int64_t sms = cuda::sm_count(cuda::current_device());
    return sms > 0 && output.numel() / 2 >= kBatchHalfMinElementsPerSM * sms;
}

void run_batch_halves(const Tensor &input, const Tensor &output,
                      const std::function<void(halide_buffer_t *, halide_buffer_t *)> &run) {
    if (output.dim() < 1 || output.shape()[0] < 2 || input.dim() < 1 ||
        input.shape()[0] != output.shape()[0]) {
        throw Error("batch in two halves: needs an input and an output of one batch of at least "
                    "2 samples, got " + shape_string(input.shape()) + " and " +
                    shape_string(output.shape()));
    }
    const int device = cuda::current_device();
    void *main = cuda::current_stream();
    void *side = cuda::side_stream(device);
    const int n = static_cast<int>(output.shape()[0]), half = n / 2;
    runs.fetch_add(1);
    // The side stream's half reads what the caller's stream wrote before the call.
    wait_for(device, side, main);
    {
        Halide::Runtime::Buffer<float> in = sample_range(input, 0, half);
        Halide::Runtime::Buffer<float> out = sample_range(output, 0, half);
        run(in.raw_buffer(), out.raw_buffer());
    }
    std::exception_ptr failed;
    try {
        const cuda::Scope scope(device, side);
        Halide::Runtime::Buffer<float> in = sample_range(input, half, n - half);
        Halide::Runtime::Buffer<float> out = sample_range(output, half, n - half);
        run(in.raw_buffer(), out.raw_buffer());
    } catch (...) {
        failed = std::current_exception();
    }
    wait_for(device, main, side);
    if (failed) std::rethrow_exception(failed);
}

}  // namespace fusedconv::detail
