// A GPU call's batch in two halves: the first on the caller's stream, the second on the device's
// side stream, so that the first half's memory-bound kernels run beside the second half's
// compute-bound ones. p83 takes it: its conv kernel fills every multiprocessor's registers, so on
// one stream its element-wise kernel waits for the whole conv (H200, default shape: 0.807-0.814
// ms against 0.826-0.831 for one call; schedules/NOTES.md, "p83's batch in two halves").
#pragma once

#include "fusedconv/tensor.h"

#include <HalideRuntime.h>

#include <cstdint>
#include <functional>

namespace fusedconv::detail {

// Auto: halves where batch_halves_apply says so; Never: one call (also the initial policy when
// the environment variable FUSEDCONV_BATCH_HALVES is 0, read once); Always: every batch of at
// least 2 (for tests of the mechanism on small shapes).
enum class BatchHalves { Auto, Never, Always };
void set_batch_halves(BatchHalves policy);
BatchHalves batch_halves();

// Elements of output per multiprocessor that each half must hold under Auto: below it the
// second call's host time outweighs the overlap (H200, p83: batch 64, 209K a multiprocessor per
// half, 0.420 ms against 0.430 for one call; batch 32, 104K, 0.238 against 0.232).
constexpr int64_t kBatchHalfMinElementsPerSM = int64_t(1) << 17;

// Whether a call writing `output` (on the GPU, samples its outermost dimension) on the current
// device splits its batch, under the current policy.
bool batch_halves_apply(const Tensor &output);

// How many calls split their batch so far (for tests).
int64_t batch_halves_runs();

// run(in, out) on Halide buffers of samples [0, n/2) of input and output on the current stream,
// then of samples [n/2, n) on the current device's side stream, which first waits for the
// current stream's work; the current stream then waits for both halves (also when the second
// half throws; a throw of the first leaves nothing queued on the side stream but a wait). The
// crops keep the samples' coordinates, so per-element functions of the index (p83's dropout
// mask) give the one call's values.
void run_batch_halves(const Tensor &input, const Tensor &output,
                      const std::function<void(halide_buffer_t *, halide_buffer_t *)> &run);

}  // namespace fusedconv::detail
