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
    auto run_samples = [&](int first, int count) {
        Halide::Runtime::Buffer<float> in = sample_range(input, first, count);
        Halide::Runtime::Buffer<float> out = sample_range(output, first, count);
        run(in.raw_buffer(), out.raw_buffer());
    };
    // The side stream's half reads what the caller's stream wrote before the call.
    cuda::stream_wait_stream(device, side, main);
    run_samples(0, half);
    std::exception_ptr failed;
    try {
        const cuda::Scope scope(device, side);
        run_samples(half, n - half);
    } catch (...) {
        failed = std::current_exception();
    }
    cuda::stream_wait_stream(device, main, side);
    if (failed) std::rethrow_exception(failed);
}

}  // namespace fusedconv::detail
