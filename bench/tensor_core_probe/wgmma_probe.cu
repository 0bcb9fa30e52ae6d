// p32's transform-domain product on Hopper's warpgroup mma (wgmma), measured on its own: does the
// structure that schedules/NOTES.md names as p32's next step ("wgmma with B read from shared
// memory") run fast enough to be worth building into the library? Built with the cuDNN
// baselines' CUDA toolkit for sm_90a (README.md); not part of the library.
//
// The product, for each of the 36 points p of F(4x4, 3x3) and a block of 8 tiles:
//   M(p, cout, tile) = sum over cin of U(p, cout, cin) V(p, cin, tile),  cin < 64, cout < 128.
// One warpgroup (4 warps) computes a round of 64 output channels as 36 wgmma accumulators of
// m64n8 (4 floats a thread each, so each thread holds all 36 points of its 2 channels x 2
// tiles: the output transform could then run in registers). Each k-step of 8 input channels is
// three wgmma.m64n8k8 in tf32 (3xTF32: A_lo B_hi + A_hi B_lo + A_hi B_hi, as the library's
// mma.sync splice computes it):
//   - B = V, split once a block into tf32 values and remainders as it is staged in shared
//     memory (the library's mma.sync kernels split it again for every round), K-major core
//     matrices of 8 tiles x 4 channels;
//   - A = U, read as float32 from global memory (L2) in the fragment's order, 16 bytes a
//     thread, and split in registers.
// The block stages V for all 64 input channels (8 tiles: 147 KB split), so one block an SM.
// With 2 warpgroups a block, they compute the two rounds at once from the same V.
//
// V is read from global memory where the library would compute it from the input (the
// transform's loads are the same bytes); the probe cycles over 512 blocks of it (v_blocks) so
// that they stay in L2, as the library's input windows do.
#include "launch_timing.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

namespace {

constexpr int kPoints = 36, kCin = 64, kCout = 128, kSteps = kCin / 8, kTiles = 8;
constexpr int kRounds = kCout / 64;
// Shared V: [point][step][part hi/lo][k-core 2][tile 8][4 channels] as uint32 (tf32 bits).
constexpr int kStepWords = 2 * 2 * kTiles * 4;  // both parts of one (point, step): 128 words
constexpr int kSharedBytes = kPoints * kSteps * kStepWords * 4;

__device__ __forceinline__ uint64_t desc_of(uint32_t smem_addr) {
    // K-major, no swizzle: core matrices of 8 rows x 16 bytes, contiguous (128 bytes); the two
    // k-cores of a step 128 bytes apart (the leading-dimension offset). n8 has one core matrix
    // along N, so the stride-dimension offset is unused (set the same).
    const uint64_t lbo = 128 >> 4, sbo = 128 >> 4;
    return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (lbo << 16) | (sbo << 32);
}

__device__ __forceinline__ void wgmma_m64n8k8(float (&d)[4], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// The same for n16, n24 and n32 (accumulators: 4 a thread per 8 columns).
#define TC_WGMMA_ASM(N, DREGS, AREGS, BREG)                                                     \
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                  \
    "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" DREGS "}, {" AREGS "}, " BREG \
    ", p, 1, 1;\n}\n"
template <int kN>
__device__ __forceinline__ void wgmma_m64nk8(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t b);
template <>
__device__ __forceinline__ void wgmma_m64nk8<8>(float (&d)[4], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n8k8(d, a, b);
}
template <>
__device__ __forceinline__ void wgmma_m64nk8<16>(float (&d)[8], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(TC_WGMMA_ASM(16, "%0,%1,%2,%3,%4,%5,%6,%7", "%8,%9,%10,%11", "%12")
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <>
__device__ __forceinline__ void wgmma_m64nk8<24>(float (&d)[12], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(TC_WGMMA_ASM(24, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11", "%12,%13,%14,%15", "%16")
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <>
__device__ __forceinline__ void wgmma_m64nk8<32>(float (&d)[16], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(TC_WGMMA_ASM(32, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15",
                              "%16,%17,%18,%19", "%20")
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

__device__ __forceinline__ void fence_operand(float &x) { asm volatile("" : "+f"(x)::"memory"); }

__device__ __forceinline__ uint32_t tf32_rna(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// kGroups warpgroups a block (1: the rounds one after the other; 2: one round each);
// kBatch points a commit group, kDepth groups in flight (their A registers held until then);
// within a group the three products go point by point (kInterleave 0) or each product over
// the group's points in turn (1), so that consecutive wgmma use different accumulators.
// kPrefetch: each batch's U loaded one batch ahead. kUPoints < 36 (a diagnostic, results
// wrong by construction): U of point p % kUPoints, so that U stays in L1.
template <int kGroups, int kBatch, int kDepth = 2, int kInterleave = 0, int kPrefetch = 0,
          int kUPoints = kPoints>
__global__ void __launch_bounds__(128 * kGroups, 1)
    product(const float *__restrict__ v_global, const float4 *__restrict__ u_frag, int blocks,
            int v_blocks, float *__restrict__ sink, float *__restrict__ full, int restage) {
    // restage 0 (a diagnostic, results wrong by construction): V staged for the block's first
    // iteration only.
    extern __shared__ __align__(128) uint32_t v_shared[];
    const int tid = threadIdx.x, group = tid / 128, gtid = tid % 128;
    const uint32_t v_base = static_cast<uint32_t>(__cvta_generic_to_shared(v_shared));
    float keep = 0.f;
    for (int blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        if (restage || blk == blockIdx.x) {
        // Stage V: item = (point, cin, tile), tile innermost as in global memory.
        const float *vb = v_global + static_cast<size_t>(blk % v_blocks) * kPoints * kCin * kTiles;
        for (int i = tid; i < kPoints * kCin * kTiles; i += 128 * kGroups) {
            const int tile = i % kTiles, cin = (i / kTiles) % kCin, p = i / (kTiles * kCin);
            const float x = vb[i];
            const uint32_t hi = tf32_rna(x);
            const uint32_t lo = tf32_rna(x - __uint_as_float(hi));
            const int s = cin / 8, k = cin % 8;
            const int w = (p * kSteps + s) * kStepWords + (k / 4) * 32 + tile * 4 + (k % 4);
            v_shared[w] = hi;
            v_shared[w + 64] = lo;
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        }
        __syncthreads();
        for (int round = group; round < kRounds; round += kGroups) {
            float acc[kPoints][4];
#pragma unroll
            for (int p = 0; p < kPoints; p++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[p][j] = 0.f;
#pragma unroll
            for (int p = 0; p < kPoints; p++)
#pragma unroll
                for (int j = 0; j < 4; j++) fence_operand(acc[p][j]);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            auto load_u = [&](int s, int p) {
                return u_frag[(((p % kUPoints) * kRounds + round) * kSteps + s) * 128 + gtid];
            };
            float4 u_next[kBatch];
            if (kPrefetch)
#pragma unroll
                for (int b = 0; b < kBatch; b++) u_next[b] = load_u(0, b);
#pragma unroll 1
            for (int s = 0; s < kSteps; s++) {
#pragma unroll
                for (int p0 = 0; p0 < kPoints; p0 += kBatch) {
                    uint32_t a_hi[kBatch][4], a_lo[kBatch][4];
                    float4 u_now[kBatch];
#pragma unroll
                    for (int b = 0; b < kBatch; b++) u_now[b] = kPrefetch ? u_next[b] : load_u(s, p0 + b);
                    if (kPrefetch) {
                        // The next batch: this step's, or the next step's first.
                        const int pn = p0 + kBatch < kPoints ? p0 + kBatch : 0;
                        const int sn = p0 + kBatch < kPoints ? s : (s + 1 < kSteps ? s + 1 : s);
#pragma unroll
                        for (int b = 0; b < kBatch; b++) u_next[b] = load_u(sn, pn + b);
                    }
#pragma unroll
                    for (int b = 0; b < kBatch; b++) {
                        const float uv[4] = {u_now[b].x, u_now[b].y, u_now[b].z, u_now[b].w};
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            a_hi[b][j] = __float_as_uint(uv[j]) & 0xFFFFE000u;
                            a_lo[b][j] = tf32_rna(uv[j] - __uint_as_float(a_hi[b][j]));
                        }
                    }
                    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                    if (kInterleave) {
#pragma unroll
                        for (int b = 0; b < kBatch; b++) {
                            const uint32_t at = v_base + ((p0 + b) * kSteps + s) * kStepWords * 4;
                            wgmma_m64n8k8(acc[p0 + b], a_lo[b], desc_of(at));
                        }
#pragma unroll
                        for (int b = 0; b < kBatch; b++) {
                            const uint32_t at = v_base + ((p0 + b) * kSteps + s) * kStepWords * 4;
                            wgmma_m64n8k8(acc[p0 + b], a_hi[b], desc_of(at + 256));
                        }
#pragma unroll
                        for (int b = 0; b < kBatch; b++) {
                            const uint32_t at = v_base + ((p0 + b) * kSteps + s) * kStepWords * 4;
                            wgmma_m64n8k8(acc[p0 + b], a_hi[b], desc_of(at));
                        }
                    } else {
#pragma unroll
                        for (int b = 0; b < kBatch; b++) {
                            const int p = p0 + b;
                            const uint32_t at = v_base + (p * kSteps + s) * kStepWords * 4;
                            wgmma_m64n8k8(acc[p], a_lo[b], desc_of(at));
                            wgmma_m64n8k8(acc[p], a_hi[b], desc_of(at + 256));
                            wgmma_m64n8k8(acc[p], a_hi[b], desc_of(at));
                        }
                    }
                    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kDepth - 1) : "memory");
                }
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
            for (int p = 0; p < kPoints; p++)
#pragma unroll
                for (int j = 0; j < 4; j++) fence_operand(acc[p][j]);
            if (full != nullptr) {
                // [blk][round][point][thread of the warpgroup][4]
                float *f = full + ((static_cast<size_t>(blk) * kRounds + round) * kPoints) * 512;
#pragma unroll
                for (int p = 0; p < kPoints; p++)
#pragma unroll
                    for (int j = 0; j < 4; j++) f[p * 512 + gtid * 4 + j] = acc[p][j];
            }
#pragma unroll
            for (int p = 0; p < kPoints; p++)
#pragma unroll
                for (int j = 0; j < 4; j++) keep = fminf(keep, acc[p][j]);
        }
        __syncthreads();  // V is restaged for the next block
    }
    sink[blockIdx.x * blockDim.x + tid] = keep;
}

// The width study: the product alone (V staged once a block's life, U of kUPoints points from
// L1, as the `core` diagnostic above) at kN tiles a block and kP points, so that the
// accumulators stay at kP x kN / 2 = 144 a thread: is the tensor pipe busier with a wider n?
// Results are right only for the first block (`full`), which the check compares.
// Shared V per (point, step): [part][k-core 2][tile core kN/8][tile 8][4 channels].
template <int kP, int kN, int kUPoints = 2>
__global__ void __launch_bounds__(256, 1)
    product_wide(const float *__restrict__ v_global, const float4 *__restrict__ u_frag, int blocks,
                 float *__restrict__ sink, float *__restrict__ full) {
    extern __shared__ __align__(128) uint32_t v_shared[];
    constexpr int kWords = 2 * 2 * kN * 4;  // both parts of one (point, step)
    const int tid = threadIdx.x, round = tid / 128, gtid = tid % 128;
    const uint32_t v_base = static_cast<uint32_t>(__cvta_generic_to_shared(v_shared));
    for (int i = tid; i < kP * kCin * kN; i += 256) {
        const int tile = i % kN, cin = (i / kN) % kCin, p = i / (kN * kCin);
        const float x = v_global[i];
        const uint32_t hi = tf32_rna(x), lo = tf32_rna(x - __uint_as_float(hi));
        const int s = cin / 8, k = cin % 8;
        const int w = (p * kSteps + s) * kWords + (k / 4) * (kN * 4) + tile * 4 + (k % 4);
        v_shared[w] = hi;
        v_shared[w + kN * 8] = lo;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    float keep = 0.f;
    for (int blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        float acc[kP][kN / 2];
#pragma unroll
        for (int p = 0; p < kP; p++)
#pragma unroll
            for (int j = 0; j < kN / 2; j++) acc[p][j] = 0.f;
#pragma unroll
        for (int p = 0; p < kP; p++)
#pragma unroll
            for (int j = 0; j < kN / 2; j++) fence_operand(acc[p][j]);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll 1
        for (int s = 0; s < kSteps; s++) {
#pragma unroll
            for (int p = 0; p < kP; p++) {
                const float4 u = u_frag[(((p % kUPoints) * kRounds + round) * kSteps + s) * 128 + gtid];
                const float uv[4] = {u.x, u.y, u.z, u.w};
                uint32_t a_hi[4], a_lo[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    a_hi[j] = __float_as_uint(uv[j]) & 0xFFFFE000u;
                    a_lo[j] = tf32_rna(uv[j] - __uint_as_float(a_hi[j]));
                }
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                const uint32_t at = v_base + (p * kSteps + s) * kWords * 4;
                // K-major, no swizzle: the k-cores kN/8 x 128 bytes apart (leading dimension),
                // the tile cores 128 bytes apart (stride dimension).
                auto desc = [](uint32_t a) {
                    return static_cast<uint64_t>((a & 0x3FFFF) >> 4) |
                           (static_cast<uint64_t>(kN * 16 >> 4) << 16) | (static_cast<uint64_t>(128 >> 4) << 32);
                };
                wgmma_m64nk8<kN>(acc[p], a_lo, desc(at));
                wgmma_m64nk8<kN>(acc[p], a_hi, desc(at + kN * 32));
                wgmma_m64nk8<kN>(acc[p], a_hi, desc(at));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            }
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int p = 0; p < kP; p++)
#pragma unroll
            for (int j = 0; j < kN / 2; j++) fence_operand(acc[p][j]);
        if (full != nullptr && blk == 0) {  // [round][point][thread][kN / 2]
#pragma unroll
            for (int p = 0; p < kP; p++)
#pragma unroll
                for (int j = 0; j < kN / 2; j++) full[((round * kP + p) * 128 + gtid) * (kN / 2) + j] = acc[p][j];
        }
#pragma unroll
        for (int p = 0; p < kP; p++)
#pragma unroll
            for (int j = 0; j < kN / 2; j++) keep = fminf(keep, acc[p][j]);
    }
    sink[blockIdx.x * blockDim.x + tid] = keep;
}

bool check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fprintf(stderr, "tc_wgmma: %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

template <int kGroups, int kBatch, int kDepth = 2, int kInterleave = 0, int kPrefetch = 0,
          int kUPoints = kPoints>
bool run(const char *name, const float *v, const float4 *u, int blocks, int v_blocks, float *sink,
         float *full, int reps, int sms, std::vector<float> *full_host, int restage = 1) {
    auto kernel = product<kGroups, kBatch, kDepth, kInterleave, kPrefetch, kUPoints>;
    if (!check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kSharedBytes),
               "shared memory attribute"))
        return false;
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, kernel);
    const int grid = full != nullptr ? blocks : sms;
    kernel<<<grid, 128 * kGroups, kSharedBytes>>>(v, u, blocks, v_blocks, sink, full, restage);
    if (!check(cudaDeviceSynchronize(), name)) return false;
    if (full != nullptr) {
        full_host->resize(static_cast<size_t>(blocks) * kRounds * kPoints * 512);
        return check(cudaMemcpy(full_host->data(), full, full_host->size() * 4,
                                cudaMemcpyDeviceToHost),
                     "copy back");
    }
    std::vector<float> sorted;
    if (!check(sorted_launch_ms([&] { kernel<<<grid, 128 * kGroups, kSharedBytes>>>(v, u, blocks, v_blocks, sink, nullptr, restage); },
                                reps, &sorted),
               name))
        return false;
    const double med = sorted[reps / 2];
    // float32-equivalent flops of the product: 2 x points x cout x cin x tiles.
    const double flops = 2.0 * kPoints * kCout * kCin * kTiles * static_cast<double>(blocks);
    printf("%-34s %3d regs  median %.3f ms (min %.3f)  %6.1f TFLOP/s float32-equivalent\n", name,
           attr.numRegs, med, sorted[0], flops / med / 1e9);
    return true;
}

// The width study at kP points x kN tiles: checks the first block against float64 (U of
// point p % 2, as the kernel reads it), then times `blocks` blocks; returns false on an error.
template <int kP, int kN>
bool run_wide(const std::vector<float> &v, const std::vector<float> &u, const float *dv,
              const float4 *du, int blocks, float *sink, float *full, int reps, int sms) {
    auto kernel = product_wide<kP, kN>;
    const int bytes = kP * kSteps * 2 * 2 * kN * 4 * 4;
    if (!check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
               "shared memory attribute"))
        return false;
    kernel<<<1, 256, bytes>>>(dv, du, 1, sink, full);
    if (!check(cudaDeviceSynchronize(), "width study check")) return false;
    std::vector<float> got(static_cast<size_t>(kRounds) * kP * 128 * (kN / 2));
    if (!check(cudaMemcpy(got.data(), full, got.size() * 4, cudaMemcpyDeviceToHost), "copy back"))
        return false;
    double worst = 0;
    for (int r = 0; r < kRounds; r++)
        for (int p = 0; p < kP; p++)
            for (int th = 0; th < 128; th++)
                for (int j = 0; j < kN / 2; j++) {
                    const int w = th / 32, g = (th % 32) / 4, t = th % 4, q = j % 4;
                    const int cout = r * 64 + 16 * w + g + (q >= 2 ? 8 : 0);
                    const int tile = 8 * (j / 4) + 2 * t + (q % 2);
                    double sum = 0, mag = 0;
                    for (int c = 0; c < kCin; c++) {
                        const double term = static_cast<double>(u[(static_cast<size_t>(p % 2) * kCout + cout) * kCin + c]) *
                                            v[(static_cast<size_t>(p) * kCin + c) * kN + tile];
                        sum += term;
                        mag += std::fabs(term);
                    }
                    const double e = std::fabs(got[((r * kP + p) * 128 + th) * (kN / 2) + j] - sum) / (mag > 0 ? mag : 1);
                    worst = std::max(worst, e);
                }
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, kernel);
    kernel<<<sms, 256, bytes>>>(dv, du, blocks, sink, nullptr);
    std::vector<float> ms;
    if (!check(sorted_launch_ms([&] { kernel<<<sms, 256, bytes>>>(dv, du, blocks, sink, nullptr); }, reps, &ms),
               "width study"))
        return false;
    const double flops = 2.0 * kP * kCout * kCin * kN * static_cast<double>(blocks);
    printf("product alone, %2d points x n%-2d  %3d regs  median %.3f ms  %6.1f TFLOP/s float32-equivalent"
           "  (first block's largest error %.1e of sum |terms|)\n",
           kP, kN, attr.numRegs, ms[reps / 2], flops / ms[reps / 2] / 1e9, worst);
    return worst < 1e-5;
}

}  // namespace

int main(int argc, char **argv) {
    // tc_wgmma [BLOCKS [one|core]]: BLOCKS blocks of 8 tiles (p32: 64 samples x 64 x 64 tiles
    // = 262144 tiles, 32768 blocks); `one` times only the 2-warpgroup kernel, `core` only its
    // diagnostic with V staged once and U in L1 (for ncu).
    const int blocks = argc > 1 ? atoi(argv[1]) : 32768;
    const bool one = argc > 2 && strcmp(argv[2], "one") == 0;
    const bool core = argc > 2 && strcmp(argv[2], "core") == 0;
    if (blocks < 1 || (argc > 2 && !one && !core) || argc > 3) {
        fprintf(stderr, "usage: tc_wgmma [BLOCKS [one|core]]  (BLOCKS >= 1, default 32768: p32's)\n");
        return 2;
    }
    const int v_blocks = 512, reps = 20, check_blocks = 3;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "tc_wgmma: no CUDA device\n");
        return 1;
    }
    printf("%s, %d blocks of 8 tiles (p32: 32768)\n", prop.name, blocks);
    const int sms = prop.multiProcessorCount;
    // V: [v block][point][cin][tile]; U logical [point][cout][cin], stored in fragment order.
    std::vector<float> v(static_cast<size_t>(v_blocks) * kPoints * kCin * kTiles);
    std::vector<float> u(static_cast<size_t>(kPoints) * kCout * kCin);
    uint32_t state = 12345u;
    auto uniform = [&]() {
        state = state * 1664525u + 1013904223u;
        return static_cast<float>(state >> 8) / 16777216.f * 2.f - 1.f;
    };
    for (auto &x : v) x = uniform() * 3.f;
    for (auto &x : u) x = uniform() * 0.2f;
    // Fragment order [point][round][step][thread of the warpgroup][4]: warp w, lane l (g = l/4,
    // t = l%4) holds rows 16w + g, 16w + g + 8 (of the round's 64) and k t, t + 4, as
    // mma.m16n8k8's A fragment: {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]}.
    std::vector<float> uf(u.size());
    for (int p = 0; p < kPoints; p++)
        for (int r = 0; r < kRounds; r++)
            for (int s = 0; s < kSteps; s++)
                for (int th = 0; th < 128; th++) {
                    const int w = th / 32, g = (th % 32) / 4, t = th % 4;
                    const int r0 = r * 64 + 16 * w + g, r1 = r0 + 8, k0 = s * 8 + t, k1 = k0 + 4;
                    float *f = &uf[((((static_cast<size_t>(p) * kRounds + r) * kSteps + s) * 128) + th) * 4];
                    const float *up = &u[static_cast<size_t>(p) * kCout * kCin];
                    f[0] = up[r0 * kCin + k0];
                    f[1] = up[r1 * kCin + k0];
                    f[2] = up[r0 * kCin + k1];
                    f[3] = up[r1 * kCin + k1];
                }
    float *dv = nullptr, *du = nullptr, *sink = nullptr, *full = nullptr;
    if (!check(cudaMalloc(&dv, v.size() * 4), "malloc") || !check(cudaMalloc(&du, uf.size() * 4), "malloc") ||
        !check(cudaMalloc(&sink, sms * 256 * 4), "malloc") ||
        !check(cudaMalloc(&full, static_cast<size_t>(check_blocks) * kRounds * kPoints * 512 * 4), "malloc"))
        return 1;
    cudaMemcpy(dv, v.data(), v.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(du, uf.data(), uf.size() * 4, cudaMemcpyHostToDevice);
    const float4 *du4 = reinterpret_cast<const float4 *>(du);

    // Correctness: the first blocks against a float64 product, each error relative to the
    // output's sum of |terms|; the accumulator layout as mma's C fragment (row g / g+8 of the
    // warp's 16, columns 2t, 2t+1).
    bool ok = true;
    auto verify = [&](const char *name, bool launched, const std::vector<float> &got) {
        if (!launched) return false;
        double worst = 0;
        int bad = 0;
        for (int b = 0; b < check_blocks; b++)
            for (int r = 0; r < kRounds; r++)
                for (int p = 0; p < kPoints; p++)
                    for (int th = 0; th < 128; th++)
                        for (int j = 0; j < 4; j++) {
                            const int w = th / 32, g = (th % 32) / 4, t = th % 4;
                            const int cout = r * 64 + 16 * w + g + (j >= 2 ? 8 : 0);
                            const int tile = 2 * t + (j % 2);
                            double sum = 0, mag = 0;
                            for (int c = 0; c < kCin; c++) {
                                const double term =
                                    static_cast<double>(u[(static_cast<size_t>(p) * kCout + cout) * kCin + c]) *
                                    v[((static_cast<size_t>(b % v_blocks) * kPoints + p) * kCin + c) * kTiles + tile];
                                sum += term;
                                mag += std::fabs(term);
                            }
                            const double g_val =
                                got[(((static_cast<size_t>(b) * kRounds + r) * kPoints + p) * 128 + th) * 4 + j];
                            const double e = std::fabs(g_val - sum) / (mag > 0 ? mag : 1);
                            if (e > worst) worst = e;
                            if (e > 1e-5 && bad++ < 4)
                                printf("  %s: block %d round %d point %d thread %d elem %d: %g, expected %g\n",
                                       name, b, r, p, th, j, g_val, sum);
                        }
        printf("%-34s largest error %.2e of sum |terms| (%d above 1e-5)\n", name, worst, bad);
        return bad == 0;
    };
    std::vector<float> got;
    ok = verify("check, 1 warpgroup", run<1, 1, 2, 0, 1>("check", dv, du4, check_blocks, v_blocks, sink, full, 1, sms, &got), got) && ok;
    ok = verify("check, 2 warpgroups", run<2, 2, 2, 1, 1>("check", dv, du4, check_blocks, v_blocks, sink, full, 1, sms, &got), got) && ok;
    if (!ok) return 1;
    if (core) return run<2, 1, 2, 0, 0, 2>("  diag: both", dv, du4, blocks, v_blocks, sink, nullptr, 2, sms, nullptr, 0) ? 0 : 1;
    if (one) return run<2, 1>("2 warpgroups, batches of 1 point", dv, du4, blocks, v_blocks, sink, nullptr, 2, sms, nullptr) ? 0 : 1;
    for (int pass = 0; pass < 2; pass++) {
        ok = run<2, 1>("2 warpgroups, batches of 1 point", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 2>("2 warpgroups, batches of 2 points", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 2, 2, 1>("  the same, products interleaved", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 1, 4>("  batches of 1, 4 in flight", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 1, 2, 0, 1>("  batches of 1, U prefetched", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 2, 2, 1, 1>("  batches of 2, interl., prefetched", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<1, 1, 2, 0, 1>("  1 warpgroup, batches of 1, pref.", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 1, 2, 0, 0, 2>("  diag: U of 2 points (L1)", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr) && ok;
        ok = run<2, 1>("  diag: V staged once", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr, 0) && ok;
        ok = run<2, 1, 2, 0, 0, 2>("  diag: both", dv, du4, blocks, v_blocks, sink, nullptr, reps, sms, nullptr, 0) && ok;
    }
    // The width study, at the same multiply-adds as `blocks` blocks of 36 points x 8 tiles.
    for (int pass = 0; pass < 2; pass++) {
        ok = run_wide<36, 8>(v, u, dv, du4, blocks, sink, full, reps, sms) && ok;
        ok = run_wide<18, 16>(v, u, dv, du4, blocks, sink, full, reps, sms) && ok;
        ok = run_wide<12, 24>(v, u, dv, du4, blocks, sink, full, reps, sms) && ok;
        ok = run_wide<9, 32>(v, u, dv, du4, blocks, sink, full, reps, sms) && ok;
    }
    return ok ? 0 : 1;
}
