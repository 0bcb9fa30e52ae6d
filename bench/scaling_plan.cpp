#include "scaling_plan.h"

#include "fusedconv/error.h"
#include "run_tools.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace fusedconv::bench {

std::vector<int> default_device_counts(int visible) {
    std::vector<int> counts;
    for (int n = 1; n > 0 && n <= visible; n *= 2) counts.push_back(n);
    if (visible >= 1 && counts.back() != visible) counts.push_back(visible);
    return counts;
}

std::vector<int> parse_device_counts(const std::string &text) {
    const std::vector<std::string> items = tools::split_list(text);
    if (items.empty()) throw Error("--devices '" + text + "' names no device count");
    std::vector<int> counts;
    for (const std::string &item : items) {
        errno = 0;
        char *end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (*end != '\0' || errno == ERANGE || v > 1024) {
            throw Error("--devices: '" + item + "' is not a device count (an integer from 1 to 1024)");
        }
        if (v < 1) throw Error("--devices: a count must be >= 1, got " + item);
        counts.push_back(static_cast<int>(v));
    }
    counts.push_back(1);
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

int64_t max_batch_for_buffers(int64_t in_per_sample, int64_t out_per_sample) {
    if (in_per_sample <= 0 || out_per_sample <= 0) {
        throw Error("max_batch_for_buffers: per-sample sizes must be > 0, got " +
                    std::to_string(in_per_sample) + " and " + std::to_string(out_per_sample));
    }
    return std::min(kMaxBufferElements / in_per_sample, kMaxBufferElements / out_per_sample);
}

BatchChoice choose_batch(int64_t wanted, int64_t max_batch, int largest_count) {
    if (wanted < 1 || max_batch < 1 || largest_count < 1) {
        throw Error("choose_batch: needs positive arguments, got batch " + std::to_string(wanted) +
                    ", limit " + std::to_string(max_batch) + ", count " +
                    std::to_string(largest_count));
    }
    if (wanted <= max_batch) return {wanted, false};
    const int64_t multiple = max_batch / largest_count * largest_count;
    return {multiple > 0 ? multiple : max_batch, true};
}

nlohmann::json to_json(const ScalingRecord &r) {
    const int64_t batch = r.shape.empty() ? 0 : r.shape[0];
    nlohmann::json j = {{"problem", r.problem},       {"system", r.system},
                        {"devices", r.devices},       {"shape", r.shape},
                        {"batch", batch},             {"median_s", r.median_s},
                        {"median_ms", r.median_s * 1e3}, {"min_ms", r.min_s * 1e3},
                        {"samples_per_s", r.samples_per_s}, {"efficiency", r.efficiency},
                        {"device", r.device},         {"gpu_count", r.gpu_count},
                        {"date", r.date},             {"commit", r.commit},
                        {"reps", r.reps},             {"warmup", r.warmup},
                        {"bit_identical_to_1", r.bit_identical}, {"data", r.data}};
    if (!r.note.empty()) j["note"] = r.note;
    return j;
}

BitDiff compare_bits(const std::vector<float> &got, const std::vector<float> &expected) {
    if (got.size() != expected.size()) return {std::max(got.size(), expected.size()), 0};
    BitDiff d;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &expected[i], sizeof(float)) == 0) continue;
        if (d.differing++ == 0) d.first = i;
    }
    return d;
}

double throughput(int64_t samples, double seconds) {
    if (!(seconds > 0)) {
        throw Error("throughput: " + std::to_string(samples) + " samples in " +
                    std::to_string(seconds) + " s (the clock did not advance)");
    }
    return static_cast<double>(samples) / seconds;
}

double efficiency(double throughput_n, int n, double throughput_1) {
    if (!(throughput_n > 0) || n < 1 || !(throughput_1 > 0)) {
        throw Error("efficiency: needs positive throughputs and n >= 1, got " +
                    std::to_string(throughput_n) + " with n = " + std::to_string(n) +
                    " against " + std::to_string(throughput_1));
    }
    return throughput_n / (n * throughput_1);
}

}  // namespace fusedconv::bench
