// Helpers shared by the programs that run the models (the CLI, the benchmark
// harness and the tuning binary): list arguments, timing, the models at their
// KernelBench init arguments, seeded inputs and float64 copies for the
// reference checks.
#pragma once

#include "fusedconv/models.h"
#include "fusedconv/tensor.h"
#include "reference.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fusedconv::tools {

// "p24,p83" -> {"p24", "p83"}; empty items are dropped.
std::vector<std::string> split_list(const std::string &s);

struct Timing {
    double median_ms = 0, min_ms = 0;
    std::vector<double> times_ms;  // every timed run, in order
    bool cut_short = false;        // stopped early: slower than the cutoff
};

// Median of `ms` (mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> ms);

// `warmup` untimed calls of run() then sync(); then up to `reps` calls, each
// timed on the host clock around run() + sync(). When cutoff_ms > 0 and the
// median of the first `cutoff_after` timed runs exceeds cutoff_ms, stops there
// (cut_short): a candidate far slower than the default is not worth the time.
Timing time_runs(const std::function<void()> &run, const std::function<void()> &sync, int warmup,
                 int reps, double cutoff_ms = 0, int cutoff_after = 3);

// The convolution's init arguments of the KernelBench problem `id` (p24,
// p25, p32 or p83; PROBLEMS.md): the one place they are written down, read
// by kernelbench_model and by the benchmark's problem table. Throws Error
// for another id.
struct KernelBenchConv {
    int in_channels, out_channels, kernel_size;
};
const KernelBenchConv &kernelbench_conv(const std::string &id);

// Model `id` (p24, p25, p32 or p83) with the init arguments of the KernelBench
// problem of that name (PROBLEMS.md) and the seeded default parameter init;
// p83 in training mode. Throws Error for another id.
std::unique_ptr<Model> kernelbench_model(const std::string &id, DeviceChoice device,
                                         uint64_t seed = 0);

// A host tensor of U[0, 1) values (torch.rand, as KernelBench draws inputs)
// from a std::mt19937_64 seeded with `seed`.
Tensor uniform_input(const Shape &shape, uint64_t seed);

// A float64 copy of a tensor from either device, for the reference checks.
reference::HostTensor host_copy(const Tensor &t);

// The settings of a p83 model as the float64 reference takes them.
reference::P83Args p83_args(const Conv3dGroupNormMinClampDropout &m);

}  // namespace fusedconv::tools
