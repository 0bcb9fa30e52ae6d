// The CLI's per-model runs: build the model (KernelBench's init arguments, or
// channels and kernel size from --weights and the other arguments from
// flags), time forward() at a given shape, and check the output against the
// float64 reference on sampled positions.
#pragma once

#include "fusedconv/device.h"
#include "model_args.h"
#include "fusedconv/tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fusedconv::cli {

struct RunOptions {
    DeviceChoice device = DeviceChoice::Auto;
    int64_t batch = 0;   // 0: the model's default batch
    int warmup = -1;     // -1: 3 on the GPU, 1 on the CPU
    int reps = 0;        // 0: 20 on the GPU, 3 on the CPU
    int samples = 256;   // output positions checked against float64
    uint64_t seed = 0;
    InitArgs init;       // p24's dim, p32's scale, p83's groups, bounds, p, eps
    bool eval = false;   // p83: eval mode (dropout is the identity); default training
    // --weights / --input (main loads the files): a PyTorch state_dict for the
    // model's parameters and a host input whose shape replaces the default
    // one. Paths "": the seeded init and a seeded random input.
    std::string weights_path, input_path;
    std::map<std::string, Tensor> weights;
    Tensor input;
    std::string output_path;  // --output: the output after the timed runs, key "output"
};

struct RunResult {
    std::string model, description;
    Shape input_shape, output_shape;
    Device device = Device::CPU;
    double median_ms = 0, min_ms = 0;
    double max_err = 0;
    std::vector<std::string> notes;  // extra checks, e.g. softmax row sums
    bool ok = false;
    std::string error;  // set when the run threw
};

// "p24", "p25", "p32", "p83".
const std::vector<std::string> &model_names();
// Throws Error for an unknown name.
RunResult run_model(const std::string &name, const RunOptions &options);

}  // namespace fusedconv::cli
