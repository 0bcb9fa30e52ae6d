#include "gpu_ceilings.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fusedconv::bench {

namespace {

void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Times `f` with events: the best of `reps` runs, in ms.
template <typename F>
float best_ms(F f, int reps) {
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    float best = 1e30f;
    for (int i = 0; i < reps; ++i) {
        check(cudaEventRecord(a), "cudaEventRecord");
        f();
        check(cudaEventRecord(b), "cudaEventRecord");
        check(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        best = std::min(best, ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

constexpr int kChains = 8;
constexpr int kIters = 2048;

__global__ void fma_chains(float *out, float seed) {
    float acc[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c) acc[c] = seed + threadIdx.x + c;
    const float m = 0.999999f, a = 1e-7f;
    for (int i = 0; i < kIters; ++i) {
#pragma unroll
        for (int c = 0; c < kChains; ++c) acc[c] = fmaf(acc[c], m, a);
    }
    float s = 0;
#pragma unroll
    for (int c = 0; c < kChains; ++c) s += acc[c];
    if (s == 12345.678f) out[0] = s;  // keeps the chains alive, never true in practice
}

}  // namespace

double measure_copy_gbps(size_t bytes) {
    void *src = nullptr, *dst = nullptr;
    check(cudaMalloc(&src, bytes), "cudaMalloc (copy source)");
    check(cudaMalloc(&dst, bytes), "cudaMalloc (copy destination)");
    check(cudaMemset(src, 1, bytes), "cudaMemset");
    float ms = best_ms([&] { cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice); }, 10);
    check(cudaGetLastError(), "cudaMemcpy");
    cudaFree(src);
    cudaFree(dst);
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

double measure_fma_tflops() {
    int dev = 0, sms = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    float *out = nullptr;
    check(cudaMalloc(&out, sizeof(float)), "cudaMalloc");
    const int threads = 256, blocks = sms * 16;
    float ms = best_ms([&] { fma_chains<<<blocks, threads>>>(out, 1.0f); }, 5);
    check(cudaGetLastError(), "fma_chains launch");
    cudaFree(out);
    double flops = 2.0 * kChains * kIters * double(threads) * blocks;
    return flops / (ms * 1e-3) / 1e12;
}

}  // namespace fusedconv::bench
