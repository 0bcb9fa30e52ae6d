// What the scaling bench (fusedconv_scaling) decides before it measures:
// which replica counts to run, which batch each model gets, and the record
// it writes per (model, system, replica count). GPU-free, so the tests and
// the simulated-device mode (--cpu-replicas) use the same code as a GPU run.
#pragma once

#include "fusedconv/tensor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fusedconv::bench {

// Powers of two up to `visible`, plus `visible` itself when it is not one
// (6 -> 1, 2, 4, 6); empty for visible < 1.
std::vector<int> default_device_counts(int visible);

// "1,2,4" -> {1, 2, 4}, sorted, duplicates dropped, 1 added when missing
// (the 1-replica run is the reference of the bit-identity check and of the
// efficiency). Throws Error naming the item for an empty list, a non-number
// or a count < 1.
std::vector<int> parse_device_counts(const std::string &text);

// Halide without large_buffers indexes a buffer with 32-bit offsets: at most
// 2^31 - 1 bytes, the same limit as runtime/src/model_util.h's kMaxElements.
constexpr int64_t kMaxBufferElements = (int64_t{1} << 31) / int64_t{sizeof(float)} - 1;

// Largest batch whose input and output (each sample `in_per_sample` and
// `out_per_sample` elements) fit one buffer; both arguments > 0.
int64_t max_batch_for_buffers(int64_t in_per_sample, int64_t out_per_sample);

// The batch a model runs at when the user did not name one: `wanted`
// (multiplier x the shape's batch), or when it does not fit one buffer the
// largest multiple of `largest_count` that fits (the largest batch that fits
// when not even `largest_count` samples do). `capped` says which.
struct BatchChoice {
    int64_t batch = 0;
    bool capped = false;
};
BatchChoice choose_batch(int64_t wanted, int64_t max_batch, int largest_count);

// One measurement, as it goes into bench/results/scaling-<slug>.json.
struct ScalingRecord {
    std::string problem, system;  // "p24", "halide-sharded" / "torchrun"
    int devices = 1;              // replicas, one per device
    Shape shape;                  // the whole batch's input shape
    double median_s = 0, min_s = 0;
    double samples_per_s = 0;
    double efficiency = 0;  // samples_per_s / (devices * samples_per_s with 1 device)
    std::string device;     // GPU name (or "cpu-replicas")
    int gpu_count = 0;      // CUDA devices visible to the run
    std::string date, commit, data, note;
    int reps = 0, warmup = 0;
    bool bit_identical = true;  // output equal to the 1-replica output, bit for bit
};
nlohmann::json to_json(const ScalingRecord &r);

// Bitwise comparison of two outputs (NaN payloads included): how many
// elements differ, and the first (sizes that differ count as every element).
struct BitDiff {
    size_t differing = 0, first = 0;
    bool identical() const { return differing == 0; }
};
BitDiff compare_bits(const std::vector<float> &got, const std::vector<float> &expected);

// samples / seconds; throws Error for seconds <= 0 (a clock that did not move).
double throughput(int64_t samples, double seconds);
// throughput_n / (n * throughput_1); throws Error for a non-positive input.
double efficiency(double throughput_n, int n, double throughput_1);

}  // namespace fusedconv::bench
