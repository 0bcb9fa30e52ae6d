// p32 (conv2d 64 -> 128 channels, 3x3 -> times scale -> minimum over channels) in Winograd
// F(4x4, 3x3) on mma.sync, with every point of a (channel, tile) in one warp: is that structure
// worth building into the library? Plain CUDA for sm_90, built with the cuDNN baselines' toolkit
// (README.md); not part of the library, and without its NaN semantics beyond the tile poison.
//
// The library's p32 kernel (generators/winograd2d_tensor_core.h) splits the 36 points of a tile
// between 4 warps, so the output transform needs the sums handed over through shared memory, in
// rounds of 16 output channels; one block of 4 warps fits an SM (v 147 KB + the hand-off). Here
// a warp owns 16 output channels (an m-tile) of the block's 16 tiles and walks all 36 points:
// each point's sums over the 64 input channels (8 k-steps of 3xTF32 m16n8k8) are folded at once
// into the warp's 16 running outputs per (channel, tile), since the output transform is a sum
// over the points: Y = sum_p AT(:, i) AT(:, j)^T M(p), p = 6 i + j. So there are no rounds and
// no hand-off, and the block has 8 warps (each both tile groups: 128 running outputs a thread) or
// 16 (one tile group each: 64), against the library's 4.
//
// Per block: 16 tiles along x of one tile row of one sample; v = BT d B for the 16 tiles x 64
// input channels staged once (147 KB, tiles swizzled so that a step's B loads are conflict-free);
// u = G g GT split ahead into tf32 values and remainders, in fragment order, read through L1.
// After the points: bias, scale, the tile poison (a tile whose 16 outputs are not all finite is
// NaN), the minimum over the thread's two channels, over the 8 lanes of a column (shuffles), and
// over the 8 m-tiles through shared memory. Six variants: 8 or 16 warps a block, 1 or 2 points
// summed at once, 3xTF32's two small products into a second accumulator or not, u read through
// L1 or staged in shared memory.
//
// Measured (README.md): 6.2-7.9 ms on an H100 against about 5.1 ms for the library's kernel. The
// 255 registers leave u's loads too little room to be issued early; staged, the mma chains wait.
#include "launch_timing.cuh"
#include "winograd_mma.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

namespace {

using namespace winograd_probe;

constexpr int kN = 64, kCin = 64, kCout = 128, kH = 256, kW = 256;
constexpr int kOH = kH - 2, kOW = kW - 2;                    // 254
constexpr int kTilesX = (kOW + 3) / 4, kTilesY = (kOH + 3) / 4;  // 64
constexpr int kBlockTiles = 16, kPoints = 36, kSteps = kCin / 8, kMTiles = kCout / 16;
constexpr size_t kVBytes = size_t(kPoints) * kCin * kBlockTiles * 4;  // 147456

__device__ __forceinline__ int swz(int tile, int ci) { return tile ^ (((ci >> 1) & 1) << 3); }

__device__ __forceinline__ float nan_min(float a, float b) { return (a != a || a < b) ? a : b; }

// v = BT d B of the block's 16 tiles x 64 input channels into shared memory, tiles swizzled.
__device__ __forceinline__ void stage_v(float (*v)[kCin][kBlockTiles], const float *__restrict__ in) {
    const int bx = blockIdx.x, ty = blockIdx.y, n = blockIdx.z;
    for (int idx = threadIdx.x; idx < kCin * kBlockTiles; idx += blockDim.x) {
        const int ci = idx / kBlockTiles, tile = idx % kBlockTiles;
        const int x0 = 4 * (kBlockTiles * bx + tile), y0 = 4 * ty;
        const float *src = in + ((size_t(n) * kCin + ci) * kH) * kW;
        float t[6][6];
        for (int r = 0; r < 6; r++) {
            const int y = min(y0 + r, kH - 1);
            float d[6];
            for (int c = 0; c < 6; c++) d[c] = __ldg(src + size_t(y) * kW + min(x0 + c, kW - 1));
            bt6(d, t[r]);  // along x
        }
        for (int j = 0; j < 6; j++) {
            float d[6], r6[6];
            for (int r = 0; r < 6; r++) d[r] = t[r][j];
            bt6(d, r6);  // along y
            for (int i = 0; i < 6; i++) v[6 * i + j][ci][swz(tile, ci)] = r6[i];
        }
    }
}

// Point (i, j)'s sums `m` folded into the running outputs: y[a][b] += AT[a][i] AT[b][j] m, the zero
// coefficients dropped at compile time (the points' loops are unrolled).
template <int GW>
__device__ __forceinline__ void fold_point(float (&y)[GW][4][16], const float (&m)[GW][4], int i, int j) {
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const float coef = at(a, i) * at(b, j);
            if (coef != 0.f) {
#pragma unroll
                for (int gi = 0; gi < GW; gi++)
#pragma unroll
                    for (int e = 0; e < 4; e++) y[gi][e][4 * a + b] = fmaf(coef, m[gi][e], y[gi][e][4 * a + b]);
            }
        }
}

// After the points: bias, scale, the tile poison, the minimum over the thread's channels, its
// column's lanes and the block's m-tiles; the output's pixels. `y`: the thread's running outputs,
// tg0 its first tile group.
template <int GW>
__device__ __forceinline__ void finish(float (&y)[GW][4][16], int tg0, const float *__restrict__ bias, float scale,
                                       float *__restrict__ out, float *smem) {
    const int bx = blockIdx.x, ty = blockIdx.y, n = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, mt = warp & 7;
    // Accumulator element e: channel 16 mt + g + 8 (e / 2), tile 8 tg + 2 t + e % 2.
    float m[GW][2][16];
#pragma unroll
    for (int gi = 0; gi < GW; gi++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float s = 0.f;
#pragma unroll
            for (int o = 0; o < 16; o++) s += y[gi][e][o];
            const bool bad = !isfinite(s);
            const float b = __ldg(bias + 16 * mt + g + 8 * (e / 2));
#pragma unroll
            for (int o = 0; o < 16; o++) {
                const float val = bad ? __int_as_float(0x7fc00000) : (y[gi][e][o] + b) * scale;
                m[gi][e % 2][o] = e < 2 ? val : nan_min(m[gi][e % 2][o], val);
            }
        }
#pragma unroll
    for (int gi = 0; gi < GW; gi++)
#pragma unroll
        for (int el = 0; el < 2; el++)
#pragma unroll
            for (int o = 0; o < 16; o++)
#pragma unroll
                for (int sh = 4; sh < 32; sh *= 2)
                    m[gi][el][o] = nan_min(m[gi][el][o], __shfl_xor_sync(0xffffffffu, m[gi][el][o], sh));
    __syncthreads();  // v is read no more: its space takes the m-tiles' minima
    float(*part)[kBlockTiles][16] = reinterpret_cast<float(*)[kBlockTiles][16]>(smem);
    if (g == 0) {
#pragma unroll
        for (int gi = 0; gi < GW; gi++)
#pragma unroll
            for (int el = 0; el < 2; el++)
#pragma unroll
                for (int o = 0; o < 16; o++) part[mt][8 * (tg0 + gi) + 2 * t + el][o] = m[gi][el][o];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < kBlockTiles * 16; idx += blockDim.x) {
        const int tile = idx / 16, o = idx % 16;
        float r = part[0][tile][o];
        for (int k = 1; k < kMTiles; k++) r = nan_min(r, part[k][tile][o]);
        const int x = 4 * (kBlockTiles * bx + tile) + o % 4, yy = 4 * ty + o / 4;
        if (x < kOW && yy < kOH) out[(size_t(n) * kOH + yy) * kOW + x] = r;
    }
}

// GW tile groups a warp: 8 warps (2) or 16 (1) a block. PP points summed at once and, with SA,
// the two small products of 3xTF32 into a second accumulator: PP x GW (x 2) independent mma
// chains a warp.
template <int GW, int PP, bool SA>
__global__ void __launch_bounds__(256 * (3 - GW), 1)
points_kernel(const float *__restrict__ in, const float4 *__restrict__ uf, const float *__restrict__ bias,
              float scale, float *__restrict__ out) {
    extern __shared__ float smem[];
    float(*v)[kCin][kBlockTiles] = reinterpret_cast<float(*)[kCin][kBlockTiles]>(smem);

    stage_v(v, in);
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mt = warp & 7, tg0 = GW == 2 ? 0 : warp >> 3;
    float y[GW][4][16] = {};

#pragma unroll
    for (int p0 = 0; p0 < kPoints; p0 += PP) {
        float acc[PP][GW][4], acc2[PP][GW][4];
#pragma unroll
        for (int pp = 0; pp < PP; pp++)
#pragma unroll
            for (int gi = 0; gi < GW; gi++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[pp][gi][e] = acc2[pp][gi][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kSteps; ks++) {
            const int c0 = 8 * ks + t, c1 = c0 + 4;
#pragma unroll
            for (int pp = 0; pp < PP; pp++) {
                const int p = p0 + pp;
                const float4 *up = uf + ((size_t(p * kMTiles + mt) * kSteps + ks) * 32 + lane) * 2;
                const float4 h = __ldg(up), l = __ldg(up + 1);
                const Fragment ah = fragment(h), al = fragment(l);
#pragma unroll
                for (int gi = 0; gi < GW; gi++) {
                    const int tile = 8 * (tg0 + gi) + g;
                    step(acc[pp][gi], SA ? acc2[pp][gi] : acc[pp][gi], ah, al, v[p][c0][swz(tile, c0)],
                         v[p][c1][swz(tile, c1)]);
                }
            }
        }
#pragma unroll
        for (int pp = 0; pp < PP; pp++) {
            const int i = (p0 + pp) / 6, j = (p0 + pp) % 6;
            float m[GW][4];
#pragma unroll
            for (int gi = 0; gi < GW; gi++)
#pragma unroll
                for (int e = 0; e < 4; e++) m[gi][e] = SA ? acc[pp][gi][e] + acc2[pp][gi][e] : acc[pp][gi][e];
            fold_point<GW>(y, m, i, j);
        }
    }

    finish<GW>(y, tg0, bias, scale, out, smem);
}

// u staged in shared memory by cp.async, double-buffered beside v: a stage is 2 points x 2
// steps of all 8 m-tiles (32 KB), stored in the order the warps read it ([point][m-tile][step]
// [tf32 values, remainders][lane][4]: conflict-free 16-byte reads), so that staging is a straight
// copy of 32 KB from ufs (the same values in stage order). 72 stages a block, each issued one
// stage ahead; in each, a warp sums 2 points x 2 tile groups: 4 independent mma chains.
constexpr int kStagePoints = 2, kStageSteps = 2;
constexpr int kStages = (kPoints / kStagePoints) * (kSteps / kStageSteps);                     // 72
constexpr size_t kUStageFloats = size_t(kStagePoints) * kMTiles * kStageSteps * 2 * 32 * 4;  // 8192
constexpr size_t kStagedBytes = kVBytes + 2 * kUStageFloats * 4;                               // 211 KB

__device__ __forceinline__ void stage_u(float *dst, const float *__restrict__ src) {
    for (int i = threadIdx.x; i < int(kUStageFloats / 4); i += blockDim.x) {
        const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst + 4 * i));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + 4 * i) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__global__ void __launch_bounds__(256, 1)
points_staged_kernel(const float *__restrict__ in, const float4 *__restrict__ ufs4, const float *__restrict__ bias,
                     float scale, float *__restrict__ out) {
    constexpr int GW = 2;
    extern __shared__ float smem[];
    float(*v)[kCin][kBlockTiles] = reinterpret_cast<float(*)[kCin][kBlockTiles]>(smem);
    float *ubuf = smem + kVBytes / 4;
    const float *ufs = reinterpret_cast<const float *>(ufs4);
    stage_u(ubuf, ufs);  // in flight during v's staging

    stage_v(v, in);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mt = warp;
    float y[GW][4][16] = {};

#pragma unroll
    for (int p0 = 0; p0 < kPoints; p0 += kStagePoints) {
        float acc[kStagePoints][GW][4];
#pragma unroll
        for (int pp = 0; pp < kStagePoints; pp++)
#pragma unroll
            for (int gi = 0; gi < GW; gi++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[pp][gi][e] = 0.f;
#pragma unroll
        for (int k0 = 0; k0 < kSteps; k0 += kStageSteps) {
            const int stage = (p0 / kStagePoints) * (kSteps / kStageSteps) + k0 / kStageSteps;
            if (stage + 1 < kStages) {
                stage_u(ubuf + ((stage + 1) & 1) * kUStageFloats, ufs + size_t(stage + 1) * kUStageFloats);
                asm volatile("cp.async.wait_group 1;" ::: "memory");
            } else {
                asm volatile("cp.async.wait_group 0;" ::: "memory");
            }
            __syncthreads();
            const float4 *ub = reinterpret_cast<const float4 *>(ubuf + (stage & 1) * kUStageFloats);
#pragma unroll
            for (int kk = 0; kk < kStageSteps; kk++)
#pragma unroll
                for (int pp = 0; pp < kStagePoints; pp++) {
                    const int p = p0 + pp, ks = k0 + kk;
                    const float4 *uq = ub + ((pp * kMTiles + mt) * kStageSteps + kk) * 2 * 32;
                    const float4 hv = uq[lane], lv = uq[32 + lane];
                    const Fragment ah = fragment(hv), al = fragment(lv);
                    const int c0 = 8 * ks + t, c1 = c0 + 4;
#pragma unroll
                    for (int gi = 0; gi < GW; gi++) {
                        const int tile = 8 * gi + g;
                        step(acc[pp][gi], acc[pp][gi], ah, al, v[p][c0][swz(tile, c0)], v[p][c1][swz(tile, c1)]);
                    }
                }
            __syncthreads();  // this buffer is refilled by the stage after next
        }
#pragma unroll
        for (int pp = 0; pp < kStagePoints; pp++) {
            const int i = (p0 + pp) / 6, j = (p0 + pp) % 6;
            fold_point<GW>(y, acc[pp], i, j);
        }
    }
    finish<GW>(y, 0, bias, scale, out, smem);
}

}  // namespace

int main(int argc, char **argv) {
    // tc_p32_points [VARIANT]: only that variant (1-6; every one by default).
    const int only = argc > 1 ? atoi(argv[1]) : 0;
    if (argc > 2 || only < 0 || only > 6) {
        fprintf(stderr, "usage: tc_p32_points [VARIANT 1-6]\n");
        return 2;
    }
    if (!name_device("tc_p32_points", "p32 at (64, 64, 256, 256), 128 output channels")) return 1;
    const size_t in_count = size_t(kN) * kCin * kH * kW, out_count = size_t(kN) * kOH * kOW;
    std::vector<float> in(in_count), w(size_t(kCout) * kCin * 9), bias(kCout);
    kernelbench_init(in, w, bias, kCin * 9);
    const float scale = 2.f;

    // u = G g GT, split, in fragment order [p][mt][ks][lane][hi 4, lo 4].
    std::vector<float> u(size_t(kPoints) * kCout * kCin);  // [p][co][ci]
    for (int co = 0; co < kCout; co++)
        for (int ci = 0; ci < kCin; ci++) {
            float uk[36];
            transform_kernel(&w[(size_t(co) * kCin + ci) * 9], uk);
            for (int p = 0; p < kPoints; p++) u[(size_t(p) * kCout + co) * kCin + ci] = uk[p];
        }
    std::vector<float> uf(size_t(kPoints) * kMTiles * kSteps * 32 * 8);
    for (int p = 0; p < kPoints; p++)
        for (int mt = 0; mt < kMTiles; mt++)
            for (int ks = 0; ks < kSteps; ks++)
                for (int lane = 0; lane < 32; lane++) {
                    split_fragment(lane, [&](int row, int col) {
                        return u[(size_t(p) * kCout + 16 * mt + row) * kCin + 8 * ks + col];
                    }, &uf[(((size_t(p) * kMTiles + mt) * kSteps + ks) * 32 + lane) * 8]);
                }

    // The same fragments in the staged kernel's order: [stage][point][m-tile][step][value, remainder]
    // [lane][4].
    std::vector<float> ufs(uf.size());
    for (int p = 0; p < kPoints; p++)
        for (int mt = 0; mt < kMTiles; mt++)
            for (int ks = 0; ks < kSteps; ks++)
                for (int lane = 0; lane < 32; lane++)
                    for (int part = 0; part < 2; part++)
                        for (int e = 0; e < 4; e++) {
                            const int stage = (p / kStagePoints) * (kSteps / kStageSteps) + ks / kStageSteps;
                            const size_t at_stage =
                                ((((size_t(p % kStagePoints) * kMTiles + mt) * kStageSteps + ks % kStageSteps) * 2 + part) * 32 +
                                 lane) * 4 + e;
                            ufs[size_t(stage) * kUStageFloats + at_stage] =
                                uf[(((size_t(p) * kMTiles + mt) * kSteps + ks) * 32 + lane) * 8 + 4 * part + e];
                        }
    float *d_in = nullptr, *d_uf = nullptr, *d_ufs = nullptr, *d_bias = nullptr, *d_out = nullptr;
    if (cudaMalloc(&d_in, in_count * 4) != cudaSuccess || cudaMalloc(&d_uf, uf.size() * 4) != cudaSuccess || cudaMalloc(&d_ufs, ufs.size() * 4) != cudaSuccess ||
        cudaMalloc(&d_bias, kCout * 4) != cudaSuccess || cudaMalloc(&d_out, out_count * 4) != cudaSuccess) {
        fprintf(stderr, "tc_p32_points: cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(d_in, in.data(), in_count * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_uf, uf.data(), uf.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_ufs, ufs.data(), ufs.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_bias, bias.data(), kCout * 4, cudaMemcpyHostToDevice);

    // float64 reference at sampled pixels.
    const int samples = 256;
    std::vector<int> sn(samples), sy(samples), sx(samples);
    std::vector<double> ref(samples), cond(samples);
    for (int s = 0; s < samples; s++) {
        sn[s] = s == 0 ? 0 : int(uniform01() * kN) % kN;
        sy[s] = s == 1 ? kOH - 1 : int(uniform01() * kOH) % kOH;
        sx[s] = s == 1 ? kOW - 1 : int(uniform01() * kOW) % kOW;
        double best = INFINITY, c = 0;
        for (int co = 0; co < kCout; co++) {
            double acc = bias[co], a = std::fabs(bias[co]);
            for (int ci = 0; ci < kCin; ci++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        const double term = double(w[(size_t(co) * kCin + ci) * 9 + 3 * ky + kx]) *
                                            in[((size_t(sn[s]) * kCin + ci) * kH + sy[s] + ky) * kW + sx[s] + kx];
                        acc += term;
                        a += std::fabs(term);
                    }
            best = std::min(best, acc * scale);
            c = std::max(c, a * std::fabs(scale));
        }
        ref[s] = best;
        cond[s] = c;
    }

    const dim3 grid(kTilesX / kBlockTiles, kTilesY, kN);
    struct Variant {
        const char *name;
        void (*kernel)(const float *, const float4 *, const float *, float, float *);
        int warps;
        size_t smem;
    };
    const Variant variants[] = {
        {"8 warps, 1 point at once", points_kernel<2, 1, false>, 8, kVBytes},
        {"8 warps, 2 points at once", points_kernel<2, 2, false>, 8, kVBytes},
        {"8 warps, 2 points, small products apart", points_kernel<2, 2, true>, 8, kVBytes},
        {"16 warps, 1 point at once", points_kernel<1, 1, false>, 16, kVBytes},
        {"16 warps, 2 points at once", points_kernel<1, 2, false>, 16, kVBytes},
        {"8 warps, u staged by cp.async, 2 points a stage", points_staged_kernel, 8, kStagedBytes},
    };
    bool ok = true;
    int index = 0;
    for (const Variant &var : variants) {
        index++;
        if (only && index != only) continue;
        auto kernel = var.kernel;
        const int warps = var.warps;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(var.smem)) != cudaSuccess) {
            fprintf(stderr, "%s: cudaFuncSetAttribute failed\n", var.name);
            ok = false;
            continue;
        }
        cudaFuncAttributes attr{};
        cudaFuncGetAttributes(&attr, kernel);
        cudaMemset(d_out, 0xff, out_count * 4);
        auto launch = [&]() {
            kernel<<<grid, 32 * warps, var.smem>>>(d_in, reinterpret_cast<const float4 *>(var.smem == kVBytes ? d_uf : d_ufs),
                                                   d_bias, scale, d_out);
        };
        std::vector<float> out;
        if (!first_launch_output(var.name, launch, d_out, out_count, &out)) return 1;
        double err = 0, rel = 0;
        for (int s = 0; s < samples; s++) {
            const double d = std::fabs(out[(size_t(sn[s]) * kOH + sy[s]) * kOW + sx[s]] - ref[s]);
            err = std::max(err, d);
            rel = std::max(rel, d / cond[s]);
        }
        std::vector<float> ms;
        if (sorted_launch_ms(launch, 10, &ms) != cudaSuccess) {
            fprintf(stderr, "%s: timing failed\n", var.name);
            return 1;
        }
        const double tflops = 2.0 * kN * kOH * kOW * double(kCout) * kCin * 9 / (ms[5] * 1e-3) / 1e12;
        printf("%d %-42s %3d registers %3d B local, median %.3f ms (min %.3f), %.1f TFLOP/s direct-equivalent; "
               "max |err| vs float64 %.2e (%.2e of sum |terms|)\n",
               index, var.name, attr.numRegs, int(attr.localSizeBytes), ms[5], ms[0], tflops, err, rel);
        ok = ok && err < 1e-4;
    }
    cudaFree(d_in);
    cudaFree(d_uf);
    cudaFree(d_ufs);
    cudaFree(d_bias);
    cudaFree(d_out);
    return ok ? 0 : 1;
}
