// Fixture of the cli_interchange test (cli_interchange.cmake): writes the
// safetensors files a PyTorch user would hand to the CLI for p25
// (Conv2dMinTanhTanh(16, 64, 3)), and checks the output file the CLI wrote.
//
//   make_interchange_fixture write DIR   weights.safetensors (state_dict),
//                                        input.safetensors ("input" + one more
//                                        tensor), p32_input / p83_input (one
//                                        tensor each), bad.safetensors (malformed),
//                                        and user_<model>_{weights,input} of
//                                        models with other channel counts and
//                                        kernel sizes than KernelBench's, plus
//                                        state_dicts of unusable shapes
//   make_interchange_fixture check DIR   output.safetensors must hold "output",
//                                        the library's forward with those
//                                        weights, within float32 accuracy of
//                                        the float64 reference
#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "fusedconv/safetensors.h"
#include "reference.h"
#include "run_tools.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

namespace {

using namespace fusedconv;

const Shape kInputShape = {1, 16, 6, 9};  // odd and tiny: the CPU run takes milliseconds

Tensor random_tensor(const Shape &shape, uint64_t seed, float lo, float hi) {
    Tensor t = Tensor::empty(shape, Device::CPU);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
    return t;
}

// Not the CLI's seeded init (seed 0), so the check sees whether --weights was used.
std::map<std::string, Tensor> weights() {
    return {{"conv.weight", random_tensor({64, 16, 3, 3}, 1234, -0.1f, 0.1f)},
            {"conv.bias", random_tensor({64}, 1235, -0.1f, 0.1f)}};
}

Tensor input() { return random_tensor(kInputShape, 1236, -1.0f, 1.0f); }

using tools::host_copy;

// A user's own models: channel counts and kernel sizes that are not
// KernelBench's (the CLI takes them from conv.weight's shape), odd shapes.
void write_user_models(const std::string &dir) {
    auto conv = [](Shape w, uint64_t seed) {
        const int64_t cout = w[0];
        return std::map<std::string, Tensor>{{"conv.weight", random_tensor(w, seed, -0.3f, 0.3f)},
                                             {"conv.bias", random_tensor({cout}, seed + 1, -0.3f, 0.3f)}};
    };
    auto save = [&](const std::string &model, std::map<std::string, Tensor> w, Shape in,
                    uint64_t seed) {
        save_safetensors(dir + "/user_" + model + "_weights.safetensors", w);
        save_safetensors(dir + "/user_" + model + "_input.safetensors",
                         {{"input", random_tensor(in, seed, -1.0f, 1.0f)}});
    };
    save("p24", conv({5, 2, 2, 2, 2}, 10), {1, 2, 4, 5, 6}, 12);
    save("p25", conv({4, 3, 5, 5}, 20), {1, 3, 7, 8}, 22);
    save("p32", conv({6, 5, 3, 3}, 30), {2, 5, 6, 9}, 32);  // 3x3: the Winograd form
    std::map<std::string, Tensor> p83 = conv({8, 2, 2, 2, 2}, 40);
    p83["norm.weight"] = random_tensor({8}, 42, 0.5f, 1.5f);
    p83["norm.bias"] = random_tensor({8}, 43, -0.5f, 0.5f);
    save("p83", p83, {1, 2, 5, 6, 7}, 44);
    // Unusable conv.weight shapes: rank 3 for a 2D model, a kernel that is not square.
    save_safetensors(dir + "/rank3_weights.safetensors", conv({4, 3, 3}, 50));
    save_safetensors(dir + "/nonsquare_weights.safetensors", conv({4, 3, 3, 5}, 60));
}

int write(const std::string &dir) {
    save_safetensors(dir + "/weights.safetensors", weights());
    save_safetensors(dir + "/input.safetensors",
                     {{"input", input()}, {"other", random_tensor({2, 3}, 1, 0.0f, 1.0f)}});
    // Inputs for --scale (p32) and --eval (p83), each the file's only tensor.
    save_safetensors(dir + "/p32_input.safetensors",
                     {{"x", random_tensor({1, 64, 5, 6}, 2, 0.0f, 1.0f)}});
    save_safetensors(dir + "/p83_input.safetensors",
                     {{"x", random_tensor({1, 3, 5, 6, 7}, 3, 0.0f, 1.0f)}});
    std::ofstream(dir + "/bad.safetensors", std::ios::binary) << "not a safetensors file";
    write_user_models(dir);
    std::remove((dir + "/output.safetensors").c_str());
    std::printf("wrote %s/{weights,input,p32_input,p83_input,bad}.safetensors\n", dir.c_str());
    return 0;
}

int check(const std::string &dir) {
    std::map<std::string, Tensor> out = load_safetensors(dir + "/output.safetensors");
    if (out.size() != 1 || !out.count("output")) {
        std::fprintf(stderr, "output.safetensors should hold exactly the tensor \"output\"\n");
        return 1;
    }
    const Tensor &got = out.at("output");
    Conv2dMinTanhTanh model(16, 64, 3, DeviceChoice::CPU, 0);
    const Tensor seeded = model.forward(input());
    load_state_dict(model, weights());
    const Tensor expected = model.forward(input());
    if (got.shape() != expected.shape()) {
        std::fprintf(stderr, "output shape %s, expected %s\n", shape_string(got.shape()).c_str(),
                     shape_string(expected.shape()).c_str());
        return 1;
    }
    std::map<std::string, Tensor> w = weights();
    reference::HostTensor ref = reference::p25(host_copy(input()), host_copy(w.at("conv.weight")),
                                               host_copy(w.at("conv.bias")));
    std::vector<float> g = got.to_vector(), e = expected.to_vector(), s = seeded.to_vector();
    double worst_lib = 0, worst_ref = 0, seeded_diff = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        worst_lib = std::max(worst_lib, std::abs(static_cast<double>(g[i]) - e[i]));
        worst_ref = std::max(worst_ref, std::abs(g[i] - ref.values[i]));
        seeded_diff = std::max(seeded_diff, std::abs(static_cast<double>(g[i]) - s[i]));
    }
    std::printf(
        "output %s: max |cli - library| %.2e, max |cli - float64| %.2e, "
        "max |cli - seeded init| %.2e\n",
        shape_string(got.shape()).c_str(), worst_lib, worst_ref, seeded_diff);
    // Same CPU code: bit-identical in practice; tanh keeps values in [-1, 1].
    const bool ok = worst_lib <= 1e-6 && worst_ref <= 2e-5 && seeded_diff > 1e-3;
    if (!ok) std::fprintf(stderr, "mismatch (or --weights ignored)\n");
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3 || (std::string(argv[1]) != "write" && std::string(argv[1]) != "check")) {
        std::fprintf(stderr, "usage: %s write|check DIR\n", argv[0]);
        return 2;
    }
    try {
        return std::string(argv[1]) == "write" ? write(argv[2]) : check(argv[2]);
    } catch (const Error &e) {
        std::fprintf(stderr, "make_interchange_fixture: %s\n", e.what());
        return 1;
    }
}
