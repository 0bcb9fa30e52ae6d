#include "sampled_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace fusedconv::reference {

namespace {

int64_t pick(std::mt19937_64 &rng, int64_t n) {
    return std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
}

// Calls at(i) for the positions among `count` to check, and counts them in
// r.checked: every one, in order, when `samples` reaches `count` (drawing
// that many would repeat some, miss others and take longer than checking
// them all); otherwise `samples` drawn uniformly.
template <typename At>
void for_each_position(int64_t count, int samples, uint64_t seed, SampleReport &r, At at) {
    if (samples >= count) {
        for (int64_t i = 0; i < count; ++i) at(i);
        r.checked += count;
        return;
    }
    std::mt19937_64 rng(seed);
    for (int i = 0; i < samples; ++i) at(pick(rng, count));
    r.checked += samples;
}

// The (n, y, x) pixels to check of an output (N, C, H, W): p24, p25, p32.
template <typename At>
void for_each_pixel(const std::vector<int64_t> &s, int samples, uint64_t seed, SampleReport &r,
                    At at) {
    for_each_position(s[0] * s[2] * s[3], samples, seed, r, [&](int64_t i) {
        at(i / (s[2] * s[3]), i / s[3] % s[2], i % s[3]);
    });
}

// p25 and p32: one value per (n, y, x) of an (N, 1, H, W) output.
template <typename RefAt>
SampleReport check_channel_min(const float *out, const std::vector<int64_t> &s, int samples,
                               uint64_t seed, RefAt ref_at) {
    SampleReport r;
    for_each_pixel(s, samples, seed, r, [&](int64_t n, int64_t y, int64_t x) {
        r.add(out[(n * s[2] + y) * s[3] + x], ref_at(n, y, x));
    });
    return r;
}

}  // namespace

double scaled_error(double got, double ref) {
    if (std::isnan(got) && std::isnan(ref)) return 0.0;
    if (std::isnan(got) || std::isnan(ref)) return INFINITY;
    if (got == ref) return 0.0;
    return std::abs(got - ref) / std::max(1.0, std::abs(ref));
}

void SampleReport::add(double got, double ref) {
    if ((std::isnan(got) && std::isnan(ref)) || got == ref) return;
    // A NaN on one side only, or unequal infinities, is an infinite error.
    double e = scaled_error(got, ref), a = std::abs(got - ref);
    max_err = std::max(max_err, std::isnan(e) ? INFINITY : e);
    max_abs_err = std::max(max_abs_err, std::isnan(a) ? INFINITY : a);
}

SampleReport check_p24(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       const float *out, const std::vector<int64_t> &s, int samples,
                       uint64_t seed) {
    SampleReport r;
    for_each_pixel(s, samples, seed, r, [&](int64_t n, int64_t y, int64_t x) {
        std::vector<double> ref = p24_pixel(in, w, b, n, y, x);
        double sum = 0;
        for (int64_t c = 0; c < s[1]; ++c) {
            double g = out[((n * s[1] + c) * s[2] + y) * s[3] + x];
            r.add(g, ref[c]);
            sum += g;
        }
        r.max_row_sum_dev = std::max(r.max_row_sum_dev, std::abs(sum - 1.0));
    });
    return r;
}

SampleReport check_p32(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       double scale, const float *out, const std::vector<int64_t> &s,
                       int samples, uint64_t seed) {
    return check_channel_min(out, s, samples, seed, [&](int64_t n, int64_t y, int64_t x) {
        return p32_at(in, w, b, scale, n, y, x);
    });
}

SampleReport check_p25(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       const float *out, const std::vector<int64_t> &s, int samples,
                       uint64_t seed) {
    return check_channel_min(out, s, samples, seed, [&](int64_t n, int64_t y, int64_t x) {
        return p25_at(in, w, b, n, y, x);
    });
}

SampleReport check_p83(const HostTensor &in, const HostTensor &w, const HostTensor &b,
                       const HostTensor &gamma, const HostTensor &beta, const P83Args &args,
                       const float *out, const std::vector<int64_t> &s, int samples,
                       uint64_t seed) {
    SampleReport r;
    std::map<std::pair<int64_t, int64_t>, GroupStats> stats;
    const int64_t cpg = s[1] / args.groups;
    const int64_t per_sample = s[1] * s[2] * s[3] * s[4];
    for_each_position(std::min<int64_t>(s[0], 2) * per_sample, samples, seed, r, [&](int64_t i) {
        const int64_t n = i / per_sample, c = i / (s[2] * s[3] * s[4]) % s[1];
        const int64_t z = i / (s[3] * s[4]) % s[2], y = i / s[4] % s[3], x = i % s[4];
        auto key = std::make_pair(n, c / cpg);
        auto it = stats.find(key);
        if (it == stats.end()) {
            it = stats.emplace(key, p83_group_stats(in, w, b, args.groups, n, c / cpg)).first;
        }
        double ref = p83_at(in, w, b, gamma, beta, args, it->second, n, c, z, y, x);
        double g = out[(((n * s[1] + c) * s[2] + z) * s[3] + y) * s[4] + x];
        r.add(g, ref);
    });
    return r;
}

}  // namespace fusedconv::reference
