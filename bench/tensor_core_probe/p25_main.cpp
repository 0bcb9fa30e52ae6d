// Runs p25_probe_generator.cpp's fused p25 kernel on the GPU: a float64 check on a small shape
// (odd sizes, two samples), then the median time at p25's shape. The kernel's placeholder calls
// are spliced into mma.sync when the driver loads the module, and its launch takes more than
// 48 KB of shared memory, which needs the kernel's attribute raised first: both through the
// Halide runtime's driver entry points (halide_get_library_symbol). README.md gives the figures.
#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "mma_splice.h"
#include "tc_p25_presplit.h"
#include "tc_p25_split.h"

namespace {

using Halide::Runtime::Buffer;
using LoadDataEx = int (*)(void **, const void *, unsigned, int *, void **);
using LaunchKernel = int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                             void **, void **);
using FuncSetAttribute = int (*)(void *, int, int);
LoadDataEx real_load = nullptr;
LaunchKernel real_launch = nullptr;
FuncSetAttribute set_attribute = nullptr;
int spliced_groups = -1;
std::string halide_message;

int load_spliced(void **module, const void *image, unsigned n, int *options, void **values) {
    std::string ptx(static_cast<const char *>(image));
    try {
        ptx = tc_probe::splice_mma(ptx, &spliced_groups);
    } catch (const std::exception &e) {
        fprintf(stderr, "tc_p25: the module's tensor-core calls cannot be spliced: %s\n", e.what());
        return 218;  // CUDA_ERROR_INVALID_PTX
    }
    static char log[16384];
    std::vector<int> opts(options, options + n);
    std::vector<void *> vals(values, values + n);
    opts.push_back(5);  // CU_JIT_ERROR_LOG_BUFFER
    vals.push_back(log);
    opts.push_back(6);  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
    vals.push_back(reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof(log))));
    const int rc = real_load(module, ptx.c_str(), static_cast<unsigned>(opts.size()), opts.data(), vals.data());
    if (rc != 0) fprintf(stderr, "tc_p25: the driver's JIT refused the spliced module (%d): %s\n", rc, log);
    return rc;
}

// Halide 14 launches with its shared memory as dynamic shared memory and never raises the
// kernel's limit from 48 KB.
int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
           void *stream, void **params, void **extra) {
    if (shared > 48 * 1024) {
        const int rc = set_attribute(f, 8 /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */,
                                     static_cast<int>(shared));
        if (rc != 0) {
            fprintf(stderr, "tc_p25: cuFuncSetAttribute(%u bytes of shared memory) failed (%d)\n", shared, rc);
            return rc;
        }
    }
    return real_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

void *get_symbol(void *lib, const char *name) {
    void *s = dlsym(lib, name);
    if (s && strcmp(name, "cuModuleLoadDataEx") == 0) {
        real_load = reinterpret_cast<LoadDataEx>(s);
        return reinterpret_cast<void *>(&load_spliced);
    }
    if (s && strcmp(name, "cuLaunchKernel") == 0) {
        set_attribute = reinterpret_cast<FuncSetAttribute>(dlsym(lib, "cuFuncSetAttribute"));
        if (!set_attribute) return s;  // the launch then fails past 48 KB, with the driver's error
        real_launch = reinterpret_cast<LaunchKernel>(s);
        return reinterpret_cast<void *>(&launch);
    }
    return s;
}

void on_halide_error(void *, const char *msg) { halide_message = msg; }

float tf32(float x) {  // cvt.rna.tf32.f32: nearest, ties away from zero
    uint32_t b;
    memcpy(&b, &x, 4);
    b = (b + 0x1000u) & ~0x1FFFu;
    memcpy(&x, &b, 4);
    return x;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"tc_p25: p25 (conv2d 3x3, 16 -> 64 channels, min over channels, tanh, tanh) as one fused "
                 "kernel on tensor cores; see bench/tensor_core_probe/README.md"};
    std::string mode = "check", operands = "presplit";
    int runs = 20;
    app.add_option("mode", mode, "check (float64 comparison, 72 x 11 x 2 outputs) or bench (p25's shape)")
        ->check(CLI::IsMember({"check", "bench"}));
    app.add_option("--operands", operands, "presplit (u as tf32 and remainder) or split (in the kernel)")
        ->check(CLI::IsMember({"presplit", "split"}));
    app.add_option("--runs", runs, "timed runs (bench; the median is printed)")->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);
    setenv("HL_CUDA_JIT_MAX_REGISTERS", "255", 0);
    halide_set_custom_get_library_symbol(get_symbol);
    halide_set_error_handler(on_halide_error);

    const bool bench = mode == "bench", presplit = operands == "presplit";
    const int W = bench ? 256 : 74, H = bench ? 256 : 13, N = bench ? 128 : 2, CI = 16, CO = 64;
    Buffer<float> in(W, H, CI, N), w(3, 3, CI, CO), bias(CO), out(W - 2, H - 2, N);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> unit(-1.f, 1.f), taps(-1.f / 12, 1.f / 12);  // PyTorch's init bound
    in.for_each_value([&](float &x) { x = unit(rng); });
    w.for_each_value([&](float &x) { x = taps(rng); });
    bias.for_each_value([&](float &x) { x = taps(rng); });
    // u = G g G^T at point p = kx + 6 ky, as fragments (mma_splice.h): lane l, g = l / 4, t = l % 4.
    const double G[6][3] = {{0.25, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6},
                            {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}};
    Buffer<float> uf(presplit ? 8 : 4, 32, 4, 2, 36);
    uf.for_each_element([&](int q, int l, int cg, int ks, int p) {
        const int j = q % 4, co = cg * 16 + l / 4 + ((j & 1) ? 8 : 0), c = ks * 8 + l % 4 + ((j & 2) ? 4 : 0);
        double u = 0;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) u += G[p % 6][a] * G[p / 6][b] * w(a, b, c, co);
        const float x = static_cast<float>(u), hi = tf32(x);
        uf(q, l, cg, ks, p) = !presplit ? x : q < 4 ? hi : tf32(x - hi);
    });
    in.set_host_dirty();
    uf.set_host_dirty();
    bias.set_host_dirty();
    auto run = [&]() { return presplit ? tc_p25_presplit(in, uf, bias, out) : tc_p25_split(in, uf, bias, out); };
    if (int rc = run()) {
        fprintf(stderr, "tc_p25: the pipeline failed (%d): %s\n", rc, halide_message.c_str());
        return 1;
    }
    out.copy_to_host();
    printf("spliced groups: %d\n", spliced_groups);
    if (!bench) {
        double worst = 0;
        out.for_each_element([&](int x, int y, int n) {
            double mn = INFINITY;
            for (int co = 0; co < CO; co++) {
                double s = bias(co);
                for (int c = 0; c < CI; c++)
                    for (int b = 0; b < 3; b++)
                        for (int a = 0; a < 3; a++) s += static_cast<double>(w(a, b, c, co)) * in(x + a, y + b, c, n);
                mn = std::min(mn, s);
            }
            worst = std::max(worst, std::fabs(out(x, y, n) - std::tanh(std::tanh(mn))));
        });
        printf("check (%s, %d x %d x %d outputs): max abs error against float64 %.3g\n", operands.c_str(), W - 2,
               H - 2, N, worst);
        return worst <= 1e-4 ? 0 : 3;
    }
    std::vector<double> ms;
    for (int i = 0; i < runs + 3; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        if (run() != 0 || halide_device_sync(nullptr, out.raw_buffer()) != 0) {
            fprintf(stderr, "tc_p25: a timed run failed: %s\n", halide_message.c_str());
            return 1;
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    printf("bench (%s): p25 at 128 x 16 x 256 x 256: %.3f ms (median of %d)\n", operands.c_str(),
           ms[ms.size() / 2], runs);
    return 0;
}
