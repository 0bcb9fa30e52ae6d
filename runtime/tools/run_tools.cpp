#include "run_tools.h"

#include "fusedconv/error.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <sstream>

namespace fusedconv::tools {

std::vector<std::string> split_list(const std::string &s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

double median(std::vector<double> ms) {
    if (ms.empty()) return 0;
    std::sort(ms.begin(), ms.end());
    size_t h = ms.size() / 2;
    return ms.size() % 2 ? ms[h] : 0.5 * (ms[h - 1] + ms[h]);
}

Timing time_runs(const std::function<void()> &run, const std::function<void()> &sync, int warmup,
                 int reps, double cutoff_ms, int cutoff_after) {
    for (int i = 0; i < warmup; ++i) run();
    sync();
    Timing t;
    for (int i = 0; i < reps; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        run();
        sync();
        t.times_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (cutoff_ms > 0 && int(t.times_ms.size()) == cutoff_after && i + 1 < reps &&
            median(t.times_ms) > cutoff_ms) {
            t.cut_short = true;
            break;
        }
    }
    t.median_ms = median(t.times_ms);
    t.min_ms = t.times_ms.empty() ? 0 : *std::min_element(t.times_ms.begin(), t.times_ms.end());
    return t;
}

const KernelBenchConv &kernelbench_conv(const std::string &id) {
    static const std::map<std::string, KernelBenchConv> table = {
        {"p24", {3, 24, 3}}, {"p25", {16, 64, 3}}, {"p32", {64, 128, 3}}, {"p83", {3, 16, 3}}};
    auto it = table.find(id);
    if (it == table.end()) {
        throw Error("no KernelBench model named '" + id + "' (p24, p25, p32, p83)");
    }
    return it->second;
}

std::unique_ptr<Model> kernelbench_model(const std::string &id, DeviceChoice device,
                                         uint64_t seed) {
    const KernelBenchConv &c = kernelbench_conv(id);
    const int cin = c.in_channels, cout = c.out_channels, k = c.kernel_size;
    // The other init arguments: p24's min dimension, p32's scale factor,
    // p83's groups, min_value, max_value and dropout p.
    if (id == "p24") return std::make_unique<Conv3dMinSoftmax>(cin, cout, k, 2, device, seed);
    if (id == "p25") return std::make_unique<Conv2dMinTanhTanh>(cin, cout, k, device, seed);
    if (id == "p32") return std::make_unique<Conv2dScaleMin>(cin, cout, k, 2.0f, device, seed);
    return std::make_unique<Conv3dGroupNormMinClampDropout>(cin, cout, k, 8, 0.0f, 1.0f, 0.2f,
                                                            device, seed);
}

Tensor uniform_input(const Shape &shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape, Device::CPU);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    float *p = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
    return t;
}

reference::HostTensor host_copy(const Tensor &t) {
    std::vector<float> v = t.to_vector();
    return reference::from_float(t.shape(), v.data());
}

reference::P83Args p83_args(const Conv3dGroupNormMinClampDropout &m) {
    return {m.groups(),    m.eps(),       m.min_value(), m.clamp_min(),
            m.clamp_max(), m.dropout_p(), m.training(),  m.dropout_seed()};
}

}  // namespace fusedconv::tools
