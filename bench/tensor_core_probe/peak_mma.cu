// Peak issue rates on this GPU for the probe's comparison: mma.sync tf32 (m16n8k4 and m16n8k8)
// and FFMA, each from 8 independent chains a thread and no memory traffic. Built with the cuDNN
// baselines' CUDA toolkit (README.md).
#include <cstdio>
#include <cuda_runtime.h>

template <int kKind>
__global__ void chains(float *out, int iters, float seed) {
    float c[8][4];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) c[i][j] = seed * (i + j);
    const unsigned a0 = __float_as_uint(seed), a1 = a0 + threadIdx.x, a2 = a0 ^ 5u, a3 = a1 ^ 7u;
    const unsigned b0 = a0 * 3u, b1 = b0 + 1u;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            if (kKind == 0)
                asm volatile("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                             : "+f"(c[i][0]), "+f"(c[i][1]), "+f"(c[i][2]), "+f"(c[i][3])
                             : "r"(a0), "r"(a1), "r"(b0));
            else if (kKind == 1)
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(c[i][0]), "+f"(c[i][1]), "+f"(c[i][2]), "+f"(c[i][3])
                             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            else
                for (int j = 0; j < 4; j++) c[i][j] = fmaf(c[i][j], 1.0001f, 0.5f);
        }
    }
    float s = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) s += c[i][j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // keeps the chains live
}

template <int kKind>
bool measure(const char *name, double macs_per_warp_op, int iters) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) return false;
    const int blocks = sms * 4, threads = 256;
    float *out = nullptr;
    if (cudaMalloc(&out, sizeof(float) * blocks * threads) != cudaSuccess) return false;
    chains<kKind><<<blocks, threads>>>(out, 10, 1.f);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0);
    chains<kKind><<<blocks, threads>>>(out, iters, 1.f);
    cudaEventRecord(e1);
    const bool ok = cudaEventSynchronize(e1) == cudaSuccess;
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double ops = static_cast<double>(blocks) * (threads / 32) * iters * 8 * macs_per_warp_op;
    if (ok) printf("%-28s %8.3f ms  %6.1f TFLOP/s\n", name, ms, 2 * ops / ms / 1e9);
    cudaFree(out);
    return ok;
}

int main() {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "tc_peak: no CUDA device\n");
        return 1;
    }
    printf("%s\n", prop.name);
    const bool ok = measure<0>("mma.sync m16n8k4 tf32", 16 * 8 * 4, 20000) &&
                    measure<1>("mma.sync m16n8k8 tf32", 16 * 8 * 8, 10000) &&
                    measure<2>("FFMA", 4 * 32, 20000);
    return ok ? 0 : 1;
}
