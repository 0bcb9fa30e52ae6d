// p24 (conv3d 3 -> 24 channels, 3x3x3 -> min over depth -> softmax over channels) with its conv
// as an implicit GEMM on Hopper's warpgroup mma, measured on its own: is the structure that
// tc_wgmma's width study points to (n = the 24 output channels) fast enough to be worth building
// into the library? Plain CUDA for sm_90a, built with the cuDNN baselines' toolkit (README.md);
// not part of the library, and without its NaN semantics (a NaN or an infinity in the input is
// not handled here as the library does).
//
// Per block: one sample and 64 output pixels (the 30 x 30 plane flattened, 60 a block, the last
// 4 rows of the m64 tile idle); a warpgroup walks the 22 output depths, and at each depth sums
// the 81 taps into 12 accumulators a thread (m64n24: 2 pixels x 6 channels) by 3xTF32 wgmma
// (A_lo B_hi + A_hi B_lo + A_hi B_hi), B = the weights, split once a block into shared memory;
// the sums fold into a running minimum over depth. Then bias, the softmax over the 24 channels
// (each pixel's channels on 4 lanes) and the store. Two forms of A (64 pixels x 8 taps a step):
//   - `p24_wgmma`: gathered from the input through L1, split, and stored in shared memory as
//     K-major core matrices (taps k = kx + 3 ky + 9 kz + 27 ci, 81 padded to 88: 11 steps);
//     with two A buffers the next depth's A is gathered while this one's wgmma run;
//   - `p24_wgmma_rs`: in registers (wgmma's RS form), each lane loading its 4 elements a step
//     at immediate offsets (taps k = kx' + 4 (ky + 3 kz + 9 ci), kx' = 3 a zero weight: 112 taps,
//     14 steps) and splitting them (the tf32 value as x's bits with the low 13 cleared, the
//     remainder x minus that, exact).
// `tc_p24_wgmma p83` runs p83's conv (3 -> 16 channels) in the RS form instead, storing it.
#include "launch_timing.cuh"

#include <algorithm>
#include <type_traits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

namespace {

constexpr int kN = 128, kCin = 3, kCout = 24, kD = 24, kH = 32, kW = 32;
constexpr int kH_plane = kH;
constexpr int kOD = kD - 2, kOH = kH - 2, kOW = kW - 2, kPlane = kOH * kOW;  // 22, 30, 30, 900
constexpr int kTaps = kCin * 27, kSteps = 11;                               // 81 -> 88
constexpr int kPixels = 60, kBlocksPerSample = kPlane / kPixels;              // 15
constexpr int kAStepBytes = 64 * 8 * 4;                                       // one part, 2 KB
constexpr int kABytes = kSteps * 2 * kAStepBytes;                             // 44 KB
constexpr int kBStepBytes = kCout * 8 * 4;                                    // 768 bytes
constexpr int kBBytes = kSteps * 2 * kBStepBytes;                             // 16.5 KB

__device__ __forceinline__ uint32_t tf32_rna(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// K-major, no swizzle: core matrices of 8 rows x 16 bytes; `lbo` bytes between the two k-cores,
// `sbo` between cores along M or N.
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
           (static_cast<uint64_t>(sbo >> 4) << 32);
}

// D (+)= A B, m64n24k8 tf32, both from shared memory; `accumulate` 0 overwrites D.
__device__ __forceinline__ void wgmma_n24(float (&d)[12], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, %12, %13, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
        : "l"(a), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void fence_operand(float &x) { asm volatile("" : "+f"(x)::"memory"); }

// The tap offset in the input of sample n (x + W (y + H (z + D ci))) of tap k < 81.
__host__ __device__ constexpr int tap_offset(int k) {
    return (k % 3) + kW * ((k / 3) % 3) + kW * kH * ((k / 9) % 3) + kW * kH * kD * (k / 27);
}

// Bias, the softmax over the 24 channels and the store, from a thread's 12 minima: mn[4 j + q]
// is pixel row 16 w + g (+ 8 for q >= 2) of the block, channel 8 j + 2 t + (q % 2); each pixel's
// channels are on the 4 lanes t of a quad.
__device__ __forceinline__ void softmax_store(const float (&mn)[12], const float *__restrict__ bias,
                                              float *__restrict__ output, int n, int pb) {
    const int tid = threadIdx.x, w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int row = 16 * w + g + 8 * half;
        float v[6];
#pragma unroll
        for (int j = 0; j < 3; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) v[2 * j + e] = mn[4 * j + 2 * half + e] + bias[8 * j + 2 * t + e];
        float mx = v[0];
#pragma unroll
        for (int i = 1; i < 6; i++) mx = fmaxf(mx, v[i]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < 6; i++) {
            v[i] = __expf(v[i] - mx);
            sum += v[i];
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (row < kPixels) {
            float *o = output + static_cast<size_t>(n) * kCout * kPlane + pb * kPixels + row;
#pragma unroll
            for (int j = 0; j < 3; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) o[(8 * j + 2 * t + e) * kPlane] = v[2 * j + e] / sum;
        }
    }
}

// kBuffers A buffers (2: the next depth's gathered while this one's wgmma run); kChains
// accumulator sets, the k-steps dealt round-robin (so that consecutive wgmma do not all wait
// on one accumulator), summed at each depth.
template <int kBuffers, int kChains = 1, bool kCheapSplit = false>
__global__ void __launch_bounds__(128)
    p24_wgmma(const float *__restrict__ input, const float *__restrict__ weight,
              const float *__restrict__ bias, float *__restrict__ output) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint32_t *b_s = reinterpret_cast<uint32_t *>(smem);
    uint32_t *a_s = reinterpret_cast<uint32_t *>(smem + kBBytes);
    const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b_s));
    const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(a_s));
    const int tid = threadIdx.x;
    const int n = blockIdx.x / kBlocksPerSample, pb = blockIdx.x % kBlocksPerSample;

    // B: [step][part][k-core 2][cout core 3][cout 8][4 taps], weight (co, ci, kz, ky, kx) with
    // tap k = kx + 3 ky + 9 kz + 27 ci, i.e. weight[co * 81 + k].
    for (int i = tid; i < kSteps * 8 * kCout; i += 128) {
        const int co = i % kCout, k = i / kCout;
        const float x = k < kTaps ? weight[co * kTaps + k] : 0.f;
        const uint32_t hi = tf32_rna(x), lo = tf32_rna(x - __uint_as_float(hi));
        const int s = k / 8, kc = (k % 8) / 4;
        const int w = ((s * 2) * 2 + kc) * (kBStepBytes / 8) + co * 4 + (k % 4);
        b_s[w] = hi;
        b_s[w + kBStepBytes / 4] = lo;
    }

    // This thread gathers pixel m = tid % 64 of the block, taps k = tid / 64 + 2 i.
    const int m = tid % 64, h = tid / 64;
    const int p = pb * kPixels + (m < kPixels ? m : 0);
    const int y = p / kOW, x = p % kOW;
    const float *in_n = input + static_cast<size_t>(n) * kCin * kD * kH * kW + y * kW + x;
    // Each item is one pixel's 4 taps 4 q .. 4 q + 3 (one core-matrix row): 16-byte stores, a
    // warp's 32 pixels 512 contiguous bytes (no bank conflicts). Warps 0-1 take the even q, 2-3
    // the odd (a branch uniform in each warp, so that every tap offset is an immediate).
    // kCheapSplit: the tf32 value as x's bits with the low 13 cleared, the remainder x - that
    // (exact), which the tensor cores truncate to tf32 (instead of cvt.rna for both).
    auto gather_q = [&](auto hq, int z, uint32_t *a) {
        constexpr int kH = decltype(hq)::value;
        const float *src = in_n + z * kW * kH_plane;
        float vals[11][4];
#pragma unroll
        for (int i = 0; i < 11; i++)  // the loads first, all in flight
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int k = 8 * i + 4 * kH + e;
                vals[i][e] = (m < kPixels && k < kTaps) ? __ldg(src + tap_offset(k < kTaps ? k : 0)) : 0.f;
            }
#pragma unroll
        for (int i = 0; i < 11; i++) {
            uint4 hi, lo;
            uint32_t *hp = &hi.x, *lp = &lo.x;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (kCheapSplit) {
                    hp[e] = __float_as_uint(vals[i][e]) & 0xFFFFE000u;
                    lp[e] = __float_as_uint(vals[i][e] - __uint_as_float(hp[e]));
                } else {
                    hp[e] = tf32_rna(vals[i][e]);
                    lp[e] = tf32_rna(vals[i][e] - __uint_as_float(hp[e]));
                }
            }
            // [step i][part][k-core h][pixel core 8][pixel 8][4 taps]
            const int w = ((i * 2) * 2 + kH) * (kAStepBytes / 8) + m * 4;
            *reinterpret_cast<uint4 *>(a + w) = hi;
            *reinterpret_cast<uint4 *>(a + w + kAStepBytes / 4) = lo;
        }
    };
    auto gather = [&](int z, uint32_t *a) {
        if (h) gather_q(std::integral_constant<int, 1>(), z, a);
        else gather_q(std::integral_constant<int, 0>(), z, a);
    };

    float mn[12];
#pragma unroll
    for (int j = 0; j < 12; j++) mn[j] = INFINITY;
    float acc[kChains][12];
#pragma unroll
    for (int c = 0; c < kChains; c++)
#pragma unroll
        for (int j = 0; j < 12; j++) acc[c][j] = 0.f;

    gather(0, a_s);
    for (int z = 0; z < kOD; z++) {
        const int buf = kBuffers == 2 ? (z & 1) : 0;
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
#pragma unroll
        for (int c = 0; c < kChains; c++)
#pragma unroll
            for (int j = 0; j < 12; j++) fence_operand(acc[c][j]);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        const uint32_t a0 = a_addr + buf * kABytes;
#pragma unroll
        for (int s = 0; s < kSteps; s++) {
            const uint32_t as = a0 + s * 2 * kAStepBytes, bs = b_addr + s * 2 * kBStepBytes;
            const uint64_t a_hi = desc(as, 1024, 128), a_lo = desc(as + kAStepBytes, 1024, 128);
            const uint64_t b_hi = desc(bs, 384, 128), b_lo = desc(bs + kBStepBytes, 384, 128);
            float (&d)[12] = acc[s % kChains];
            wgmma_n24(d, a_lo, b_hi, s >= kChains);
            wgmma_n24(d, a_hi, b_lo, 1);
            wgmma_n24(d, a_hi, b_hi, 1);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        if (kBuffers == 2 && z + 1 < kOD) {
            gather(z + 1, a_s + (buf ^ 1) * (kABytes / 4));
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int c = 0; c < kChains; c++)
#pragma unroll
            for (int j = 0; j < 12; j++) fence_operand(acc[c][j]);
#pragma unroll
        for (int j = 0; j < 12; j++) {
            float sum = acc[0][j];
#pragma unroll
            for (int c = 1; c < kChains; c++) sum += acc[c][j];
            mn[j] = fminf(mn[j], sum);
        }
        if (kBuffers == 1 && z + 1 < kOD) {
            __syncthreads();  // every warp's wgmma done reading A
            gather(z + 1, a_s);
        }
    }

    softmax_store(mn, bias, output, n, pb);
}

// The same conv with A in registers (wgmma's RS form), so that A is neither stored to nor read
// from shared memory. The taps are ordered k = kx' + 4 j, j = ky + 3 kz + 9 ci (27 rows of 4,
// kx' = 3 a zero weight; 112 taps, 14 k-steps): a lane's A elements (columns t and t + 4 of a
// step) are then its pixel's input at x + t plus a constant offset, so every load's offset is
// an immediate. Lanes with t = 3 load x + 2 again (their weight is 0; x + 3 may be past the
// input's end). kBatch k-steps a commit group (their A registers held until it completes);
// kWaitEach: each group waited for at once (wait_group 0), as a splice that replaces one step's
// placeholders by self-contained code would have it.
constexpr int kRsSteps = 14, kRsBStepBytes = kCout * 8 * 4, kRsBBytes = kRsSteps * 2 * kRsBStepBytes;

// The input offset of tap row j = ky + 3 kz + 9 ci < 27 in an input of W x H x D planes.
template <int W, int H, int D>
__host__ __device__ constexpr int input_row_offset(int j) {
    return W * (j % 3) + W * H * ((j / 3) % 3) + W * H * D * (j / 9);
}
__host__ __device__ constexpr int row_offset(int j) { return input_row_offset<kW, kH, kD>(j); }

__device__ __forceinline__ void wgmma_n24_rs(float (&d)[12], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %17, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// The weights as the RS kernels' B (taps k = kx' + 4 j, kx' = 3 a zero weight; kRsSteps steps),
// split, into shared memory: [step][part][k-core][channel][4 taps]; then the proxy fence (the
// wgmma read what ordinary stores wrote) and a barrier.
template <int kCouts>
__device__ __forceinline__ void stage_weights_rs(const float *__restrict__ weight, uint32_t *b_s) {
    constexpr int kPartWords = kCouts * 8;  // one part (values or remainders) of a step
    for (int i = threadIdx.x; i < kRsSteps * 8 * kCouts; i += 128) {
        const int co = i % kCouts, k = i / kCouts, kx = k % 4, j = k / 4;
        const float x = (kx < 3 && j < 27) ? weight[co * 81 + kx + 3 * j] : 0.f;
        const uint32_t hi = tf32_rna(x), lo = tf32_rna(x - __uint_as_float(hi));
        const int s = k / 8, kc = (k % 8) / 4;
        const int w = ((s * 2) * 2 + kc) * (kPartWords / 2) + co * 4 + (k % 4);
        b_s[w] = hi;
        b_s[w + kPartWords] = lo;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
}

// Two questions a Halide build would raise: kFenceEach fences the generic proxy before every
// step (a splice's self-contained group would), kRuntimeDims takes the input's row, plane and
// channel strides as arguments (a library's shapes are runtime values), so the tap offsets are
// registers instead of immediates.
template <int kBatch, bool kWaitEach = false, bool kFenceEach = false, bool kRuntimeDims = false>
__global__ void __launch_bounds__(128)
    p24_wgmma_rs(const float *__restrict__ input, const float *__restrict__ weight,
                 const float *__restrict__ bias, float *__restrict__ output, int rt_w, int rt_h, int rt_d) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint32_t *b_s = reinterpret_cast<uint32_t *>(smem);
    const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b_s));
    const int tid = threadIdx.x;
    const int n = blockIdx.x / kBlocksPerSample, pb = blockIdx.x % kBlocksPerSample;
    stage_weights_rs<kCout>(weight, b_s);

    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    const int m0 = 16 * w + g, m1 = m0 + 8;
    auto pixel = [&](int mm) {
        const int p = pb * kPixels + (mm < kPixels ? mm : 0);
        return (p / kOW) * kW + p % kOW;
    };
    const float *in_n = input + static_cast<size_t>(n) * kCin * kD * kH * kW + (t < 3 ? t : 2);
    const float *src0 = in_n + pixel(m0), *src1 = in_n + pixel(m1);

    auto offset = [&](int j) {
        return kRuntimeDims ? rt_w * (j % 3) + rt_w * rt_h * ((j / 3) % 3) + rt_w * rt_h * rt_d * (j / 9)
                            : row_offset(j);
    };
    float mn[12], acc[12];
#pragma unroll
    for (int j = 0; j < 12; j++) mn[j] = INFINITY, acc[j] = 0.f;
    for (int z = 0; z < kOD; z++) {
        const int dz = z * (kRuntimeDims ? rt_w * rt_h : kW * kH);
#pragma unroll
        for (int s0 = 0; s0 < kRsSteps; s0 += kBatch) {
            uint32_t a_hi[kBatch][4], a_lo[kBatch][4];
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                const int s = s0 + b;
                if (s >= kRsSteps) break;
                const int j0 = 2 * s < 27 ? 2 * s : 0, j1 = 2 * s + 1 < 27 ? 2 * s + 1 : 0;
                const float v[4] = {__ldg(src0 + dz + offset(j0)), __ldg(src1 + dz + offset(j0)),
                                    __ldg(src0 + dz + offset(j1)), __ldg(src1 + dz + offset(j1))};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    a_hi[b][e] = __float_as_uint(v[e]) & 0xFFFFE000u;
                    a_lo[b][e] = __float_as_uint(v[e] - __uint_as_float(a_hi[b][e]));
                }
            }
#pragma unroll
            for (int j = 0; j < 12; j++) fence_operand(acc[j]);
            if (kFenceEach) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                const int s = s0 + b;
                if (s >= kRsSteps) break;
                const uint32_t bs = b_addr + s * 2 * kRsBStepBytes;
                const uint64_t b_hi = desc(bs, 384, 128), b_lo = desc(bs + kRsBStepBytes, 384, 128);
                wgmma_n24_rs(acc, a_lo[b], b_hi, s > 0);
                wgmma_n24_rs(acc, a_hi[b], b_lo, 1);
                wgmma_n24_rs(acc, a_hi[b], b_hi, 1);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            if (kWaitEach)
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            else
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int j = 0; j < 12; j++) fence_operand(acc[j]);
#pragma unroll
        for (int j = 0; j < 12; j++) mn[j] = fminf(mn[j], acc[j]);
    }
    softmax_store(mn, bias, output, n, pb);
}

bool check(cudaError_t e, const char *what);

// p83's conv (3 -> 16 channels, 3x3x3, input 128 x 3 x 16 x 64 x 64, conv 128 x 16 x 14 x 62 x 62)
// in the same form: m64n16k8, each k-step waited, every depth's conv stored (p83 keeps it for
// its GroupNorm). The GroupNorm statistics that p83's conv kernel computes beside are left out.
namespace p83 {
constexpr int kN = 128, kCout = 16, kD = 16, kH = 64, kW = 64;
constexpr int kOD = kD - 2, kOH = kH - 2, kOW = kW - 2, kPlane = kOH * kOW;  // 14, 62, 62, 3844
constexpr int kPixels = 64, kBlocksPerSample = (kPlane + kPixels - 1) / kPixels;  // 61 (the last 4 pixels)
constexpr int kBStepBytes = kCout * 8 * 4, kBBytes = kRsSteps * 2 * kBStepBytes;

__host__ __device__ constexpr int row_offset(int j) { return input_row_offset<kW, kH, kD>(j); }

__device__ __forceinline__ void wgmma_n16_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

__global__ void __launch_bounds__(128)
    conv(const float *__restrict__ input, const float *__restrict__ weight, const float *__restrict__ bias,
         float *__restrict__ out) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint32_t *b_s = reinterpret_cast<uint32_t *>(smem);
    const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b_s));
    const int tid = threadIdx.x;
    const int n = blockIdx.x / kBlocksPerSample, pb = blockIdx.x % kBlocksPerSample;
    stage_weights_rs<kCout>(weight, b_s);
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    const int p0 = pb * kPixels + 16 * w + g, p1 = p0 + 8;
    auto pixel = [&](int p) { return p < kPlane ? (p / kOW) * kW + p % kOW : 0; };
    const float *in_n = input + static_cast<size_t>(n) * 3 * kD * kH * kW + (t < 3 ? t : 2);
    const float *src0 = in_n + pixel(p0), *src1 = in_n + pixel(p1);
    float bv[4];
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) bv[2 * j + e] = bias[8 * j + 2 * t + e];
    for (int z = 0; z < kOD; z++) {
        const int dz = z * kW * kH;
        float acc[8];
#pragma unroll
        for (int j = 0; j < 8; j++) acc[j] = 0.f;
#pragma unroll
        for (int s = 0; s < kRsSteps; s++) {
            const int j0 = 2 * s < 27 ? 2 * s : 0, j1 = 2 * s + 1 < 27 ? 2 * s + 1 : 0;
            const float v[4] = {__ldg(src0 + dz + row_offset(j0)), __ldg(src1 + dz + row_offset(j0)),
                                __ldg(src0 + dz + row_offset(j1)), __ldg(src1 + dz + row_offset(j1))};
            uint32_t a_hi[4], a_lo[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                a_hi[e] = __float_as_uint(v[e]) & 0xFFFFE000u;
                a_lo[e] = __float_as_uint(v[e] - __uint_as_float(a_hi[e]));
            }
#pragma unroll
            for (int j = 0; j < 8; j++) fence_operand(acc[j]);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            const uint32_t bs = b_addr + s * 2 * kBStepBytes;
            const uint64_t b_hi = desc(bs, 256, 128), b_lo = desc(bs + kBStepBytes, 256, 128);
            wgmma_n16_rs(acc, a_lo, b_hi, s > 0);
            wgmma_n16_rs(acc, a_hi, b_lo, 1);
            wgmma_n16_rs(acc, a_hi, b_hi, 1);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        }
#pragma unroll
        for (int j = 0; j < 8; j++) fence_operand(acc[j]);
        // acc[4 j + q]: pixel p0 (q < 2) or p1, channel 8 j + 2 t + q % 2; out (n, c, z, y, x).
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int p = q < 2 ? p0 : p1, c = 8 * j + 2 * t + q % 2;
                if (p < kPlane)
                    out[((static_cast<size_t>(n) * kCout + c) * kOD + z) * kPlane + p] = acc[4 * j + q] + bv[2 * j + q % 2];
            }
    }
}

bool run(int reps) {
    std::vector<float> in(static_cast<size_t>(kN) * 3 * kD * kH * kW), wt(kCout * 81), b(kCout);
    uint32_t state = 83u;
    auto uniform = [&]() {
        state = state * 1664525u + 1013904223u;
        return static_cast<float>(state >> 8) / 16777216.f;
    };
    for (auto &v : in) v = uniform();
    for (auto &v : wt) v = (2 * uniform() - 1) / 9.f;
    for (auto &v : b) v = (2 * uniform() - 1) / 9.f;
    const size_t out_n = static_cast<size_t>(kN) * kCout * kOD * kPlane;
    float *din, *dw, *db, *dout;
    if (!check(cudaMalloc(&din, in.size() * 4), "malloc") || !check(cudaMalloc(&dw, wt.size() * 4), "malloc") ||
        !check(cudaMalloc(&db, b.size() * 4), "malloc") || !check(cudaMalloc(&dout, out_n * 4), "malloc"))
        return false;
    cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, wt.data(), wt.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    if (!check(cudaFuncSetAttribute(conv, cudaFuncAttributeMaxDynamicSharedMemorySize, kBBytes), "attribute")) return false;
    const int blocks = kN * kBlocksPerSample;
    conv<<<blocks, 128, kBBytes>>>(din, dw, db, dout);
    if (!check(cudaDeviceSynchronize(), "p83 conv")) return false;
    std::vector<float> ms;
    if (!check(sorted_launch_ms([&] { conv<<<blocks, 128, kBBytes>>>(din, dw, db, dout); }, reps, &ms), "p83 conv"))
        return false;
    // Check samples 0 and 127 at every 7th output against float64.
    std::vector<float> got(out_n);
    cudaMemcpy(got.data(), dout, out_n * 4, cudaMemcpyDeviceToHost);
    double worst = 0;
    for (int nn : {0, kN - 1})
        for (int c = 0; c < kCout; c++)
            for (int z = 0; z < kOD; z++)
                for (int p = 0; p < kPlane; p += 7) {
                    const int y = p / kOW, x = p % kOW;
                    double sum = b[c];
                    for (int ci = 0; ci < 3; ci++)
                        for (int kz = 0; kz < 3; kz++)
                            for (int ky = 0; ky < 3; ky++)
                                for (int kx = 0; kx < 3; kx++)
                                    sum += static_cast<double>(wt[c * 81 + ci * 27 + kz * 9 + ky * 3 + kx]) *
                                           in[((((static_cast<size_t>(nn) * 3 + ci) * kD + z + kz) * kH + y + ky) * kW) + x + kx];
                    worst = std::max(worst, std::fabs(got[((static_cast<size_t>(nn) * kCout + c) * kOD + z) * kPlane + p] - sum));
                }
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, conv);
    printf("p83's conv (m64n16k8, each step waited) %d regs: median %.3f ms (min %.3f); samples 0 and %d "
           "against float64: max abs error %.2e\n", attr.numRegs, ms[reps / 2], ms[0], kN - 1, worst);
    cudaFree(din), cudaFree(dw), cudaFree(db), cudaFree(dout);
    return worst < 1e-4;
}
}  // namespace p83

bool check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fprintf(stderr, "tc_p24_wgmma: %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

// float64 reference of one sample's output (24 x 900).
std::vector<double> reference(const std::vector<float> &in, const std::vector<float> &wt,
                              const std::vector<float> &b, int n) {
    std::vector<double> out(static_cast<size_t>(kCout) * kPlane);
    for (int co = 0; co < kCout; co++)
        for (int p = 0; p < kPlane; p++) {
            const int y = p / kOW, x = p % kOW;
            double mn = INFINITY;
            for (int z = 0; z < kOD; z++) {
                double s = b[co];
                for (int k = 0; k < kTaps; k++)
                    s += static_cast<double>(wt[co * kTaps + k]) *
                         in[static_cast<size_t>(n) * kCin * kD * kH * kW + tap_offset(k) + z * kW * kH + y * kW + x];
                mn = std::min(mn, s);
            }
            out[co * kPlane + p] = mn;
        }
    for (int p = 0; p < kPlane; p++) {
        double mx = -INFINITY, sum = 0;
        for (int co = 0; co < kCout; co++) mx = std::max(mx, out[co * kPlane + p]);
        for (int co = 0; co < kCout; co++) sum += std::exp(out[co * kPlane + p] - mx);
        for (int co = 0; co < kCout; co++) out[co * kPlane + p] = std::exp(out[co * kPlane + p] - mx) / sum;
    }
    return out;
}

// Times `kernel` (p24's whole grid of 128-thread blocks, `bytes` of shared memory) over `reps`
// launches after one, prints its median, and copies its output back.
template <typename... Args>
bool time_p24(const char *name, void (*kernel)(Args...), int bytes, const float *din, const float *dw,
              const float *db, float *dout, int extra_w, int extra_h, int extra_d, int reps,
              std::vector<float> *out_host) {
    if (!check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "attribute"))
        return false;
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 128, bytes);
    const int blocks = kN * kBlocksPerSample;
    auto launch = [&]() {
        if constexpr (sizeof...(Args) == 7) {
            kernel<<<blocks, 128, bytes>>>(din, dw, db, dout, extra_w, extra_h, extra_d);
        } else {
            kernel<<<blocks, 128, bytes>>>(din, dw, db, dout);
        }
    };
    launch();
    if (!check(cudaDeviceSynchronize(), name)) return false;
    std::vector<float> ms;
    if (!check(sorted_launch_ms(launch, reps, &ms), name)) return false;
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, kernel);
    printf("%-26s %3d regs, %d KB shared, %d blocks an SM: median %.3f ms (min %.3f)\n", name,
           attr.numRegs, bytes / 1024, per_sm, ms[reps / 2], ms[0]);
    out_host->resize(static_cast<size_t>(kN) * kCout * kPlane);
    return check(cudaMemcpy(out_host->data(), dout, out_host->size() * 4, cudaMemcpyDeviceToHost), "copy back");
}

template <int kBuffers, int kChains = 1, bool kCheapSplit = false>
bool run(const char *name, const float *din, const float *dw, const float *db, float *dout,
         int reps, std::vector<float> *out_host) {
    return time_p24(name, p24_wgmma<kBuffers, kChains, kCheapSplit>, kBBytes + kBuffers * kABytes, din, dw, db,
                    dout, 0, 0, 0, reps, out_host);
}

template <int kBatch, bool kWaitEach = false, bool kFenceEach = false, bool kRuntimeDims = false>
bool run_rs(const char *name, const float *din, const float *dw, const float *db, float *dout,
            int reps, std::vector<float> *out_host) {
    return time_p24(name, p24_wgmma_rs<kBatch, kWaitEach, kFenceEach, kRuntimeDims>, kRsBBytes, din, dw, db,
                    dout, kW, kH, kD, reps, out_host);
}

}  // namespace

int main(int argc, char **argv) {
    // tc_p24_wgmma [VARIANT]: every variant twice, or the one named (once; for ncu).
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "tc_p24_wgmma: no CUDA device\n");
        return 1;
    }
    printf("%s: p24 at its default shape (128 x 3 x 24 x 32 x 32)\n", prop.name);
    // KernelBench's init: input U[0, 1), weights and bias U(-b, b), b = 1/sqrt(81).
    std::vector<float> in(static_cast<size_t>(kN) * kCin * kD * kH * kW), wt(kCout * kTaps), b(kCout);
    uint32_t state = 2024u;
    auto uniform = [&]() {
        state = state * 1664525u + 1013904223u;
        return static_cast<float>(state >> 8) / 16777216.f;
    };
    for (auto &v : in) v = uniform();
    const float bound = 1.f / 9.f;
    for (auto &v : wt) v = (2 * uniform() - 1) * bound;
    for (auto &v : b) v = (2 * uniform() - 1) * bound;
    float *din, *dw, *db, *dout;
    if (!check(cudaMalloc(&din, in.size() * 4), "malloc") || !check(cudaMalloc(&dw, wt.size() * 4), "malloc") ||
        !check(cudaMalloc(&db, b.size() * 4), "malloc") ||
        !check(cudaMalloc(&dout, static_cast<size_t>(kN) * kCout * kPlane * 4), "malloc"))
        return 1;
    cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, wt.data(), wt.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    const std::vector<double> ref0 = reference(in, wt, b, 0), ref1 = reference(in, wt, b, kN - 1);
    bool ok = true;
    std::vector<float> got;
    const char *only = argc > 1 ? argv[1] : "";
    if (strcmp(only, "p83") == 0) return p83::run(20) ? 0 : 1;
    for (int pass = 0; pass < (*only ? 1 : 2); pass++) {
        for (int variant = 0; variant < 10; variant++) {
            static const char *names[] = {"A in registers, batches of 7", "A in registers, batches of 2",
                                          "A in registers, 1, each waited", "A in registers, 2, each waited",
                                          "each waited, fenced", "each waited, runtime dims",
                                          "each waited, fenced, runtime dims", "one A buffer",
                                          "one A buffer, cheap split", "two A buffers, cheap split"};
            if (*only && strcmp(only, names[variant]) != 0) continue;
            bool ran = false;
            switch (variant) {
                case 0: ran = run_rs<7>(names[0], din, dw, db, dout, 20, &got); break;
                case 1: ran = run_rs<2>(names[1], din, dw, db, dout, 20, &got); break;
                case 2: ran = run_rs<1, true>(names[2], din, dw, db, dout, 20, &got); break;
                case 3: ran = run_rs<2, true>(names[3], din, dw, db, dout, 20, &got); break;
                case 4: ran = run_rs<1, true, true>(names[4], din, dw, db, dout, 20, &got); break;
                case 5: ran = run_rs<1, true, false, true>(names[5], din, dw, db, dout, 20, &got); break;
                case 6: ran = run_rs<1, true, true, true>(names[6], din, dw, db, dout, 20, &got); break;
                case 7: ran = run<1, 1>(names[7], din, dw, db, dout, 20, &got); break;
                case 8: ran = run<1, 1, true>(names[8], din, dw, db, dout, 20, &got); break;
                default: ran = run<2, 1, true>(names[9], din, dw, db, dout, 20, &got); break;
            }
            if (!ran) return 1;
            double worst = 0;
            for (int s = 0; s < 2; s++) {
                const std::vector<double> &ref = s == 0 ? ref0 : ref1;
                const size_t base = static_cast<size_t>(s == 0 ? 0 : kN - 1) * kCout * kPlane;
                for (size_t i = 0; i < ref.size(); i++) worst = std::max(worst, std::fabs(got[base + i] - ref[i]));
            }
            printf("  samples 0 and %d against float64: max abs error %.2e\n", kN - 1, worst);
            ok = ok && worst < 1e-4;
        }
    }
    return ok ? 0 : 1;
}
