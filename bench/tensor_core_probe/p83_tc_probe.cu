// p83's conv (conv3d 3 -> 16 channels, 3x3x3, input (128, 3, 16, 64, 64)) as p25's tensor-core
// form sees it: at each output depth a 2D conv with 9 input channels (3 channels x 3 depth taps)
// and a 3x3 kernel, in Winograd F(4x4, 3x3) with the transform-domain product on mma.sync
// (3xTF32), and the conv stored. Is that worth building into the library, where p83's conv is a
// SIMT F(4x4, 3x3) kernel (576 us on an H100, with the GroupNorm statistics by pieces)? Plain CUDA
// for sm_90, built with the cuDNN baselines' toolkit (README.md); not part of the library, and
// without its NaN semantics or the GroupNorm statistics.
//
// Per block: one tile row (16 tiles of 4 x 4 pixels: the 62-wide output's 64 columns) of one
// (sample, output depth). v = BT d B for the 16 tiles x 9 taps is staged (20.7 KB, the taps past
// 9 read as zero); u = G g GT, split ahead, in fragment order, read through L1 (74 KB for all
// 36 points, 2 steps of 8 taps, the second holding one). Each warp owns a tile group (8 tiles) x
// the 16 output channels and holds all 36 points' sums (144 a thread), so the output transform
// runs in registers; the outputs are staged in shared memory (v's space) and stored along the
// rows (the edge's pixels past 62 dropped). Blocks of 2 warps (one tile row) or 4 (two).
//
// Measured (README.md): 0.60 ms on an H100 for the conv alone, against 0.58 for the library's conv
// kernel with the statistics: every warp reads all 36 points' u fragments through L1 (81% busy).
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

constexpr int kN = 128, kCin = 3, kCout = 16, kD = 16, kH = 64, kW = 64;
constexpr int kOD = kD - 2, kOH = kH - 2, kOW = kW - 2;  // 14, 62, 62
constexpr int kTaps = 9, kTiles = 16, kPoints = 36;     // taps: (ci, kz); tiles along x and y
constexpr int kVFloats = kPoints * kTaps * kTiles;       // 5184 a tile row
constexpr int kOutStride = 4 * 64 + 1;                   // a channel's 4 staged output rows
static_assert(kCout * kOutStride <= kVFloats, "the outputs are staged in v's space");

// v[p][k][tile] of tile row ty at (n, z): the 16 tiles' 6 x 6 input patches of tap k = 3 ci + kz
// (input plane z + kz of channel ci), columns and rows past the input clamped.
__device__ __forceinline__ void stage_v(float *v, const float *__restrict__ in, int n, int z, int ty) {
    for (int idx = threadIdx.x; idx < kTaps * kTiles; idx += blockDim.x) {
        const int k = idx / kTiles, tile = idx % kTiles, ci = k / 3, kz = k % 3;
        const float *src = in + ((size_t(n) * kCin + ci) * kD + z + kz) * kH * kW;
        float t[6][6];
        for (int r = 0; r < 6; r++) {
            const int y = min(4 * ty + r, kH - 1);
            float d[6];
            for (int c = 0; c < 6; c++) d[c] = __ldg(src + y * kW + min(4 * tile + c, kW - 1));
            bt6(d, t[r]);
        }
        for (int j = 0; j < 6; j++) {
            float d[6], r6[6];
            for (int r = 0; r < 6; r++) d[r] = t[r][j];
            bt6(d, r6);
            for (int i = 0; i < 6; i++) v[((6 * i + j) * kTaps + k) * kTiles + tile] = r6[i];
        }
    }
}

// Blocks of WARPS warps: WARPS / 2 tile rows, 2 tile groups each.
template <int WARPS>
__global__ void __launch_bounds__(32 * WARPS)
conv_kernel(const float *__restrict__ in, const float4 *__restrict__ uf, const float *__restrict__ bias,
            float *__restrict__ out) {
    constexpr int kRows = WARPS / 2;
    __shared__ float vs[kRows][kVFloats];
    const int n = blockIdx.z, z = blockIdx.y, ty0 = blockIdx.x * kRows;
    for (int r = 0; r < kRows; r++) stage_v(vs[r], in, n, z, ty0 + r);
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int row = warp >> 1, tg = warp & 1;
    const float *v = vs[row];
    float acc[kPoints][4];
#pragma unroll
    for (int p = 0; p < kPoints; p++) {
#pragma unroll
        for (int e = 0; e < 4; e++) acc[p][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < 2; ks++) {
            const float4 *up = uf + ((p * 2 + ks) * 32 + lane) * 2;
            const float4 h = __ldg(up), l = __ldg(up + 1);
            const int k0 = 8 * ks + t, k1 = k0 + 4, tile = 8 * tg + g;
            step(acc[p], acc[p], fragment(h), fragment(l), k0 < kTaps ? v[(p * kTaps + k0) * kTiles + tile] : 0.f,
                 k1 < kTaps ? v[(p * kTaps + k1) * kTiles + tile] : 0.f);
        }
    }
    // Element e: channel g + 8 (e / 2), tile 8 tg + 2 t + e % 2. The output transform of each,
    // into the tile row's staging (a channel's 4 rows x 64 columns, channels 257 words apart:
    // conflict-free), then stored along the rows.
    __syncthreads();  // v is read no more: its space takes the outputs
    float *os = vs[row];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int co = g + 8 * (e / 2), tile = 8 * tg + 2 * t + e % 2;
        const float b = __ldg(bias + co);
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float s = b;
#pragma unroll
                for (int i = 0; i < 6; i++)
#pragma unroll
                    for (int j = 0; j < 6; j++) {
                        const float coef = at(a, i) * at(c, j);
                        if (coef != 0.f) s = fmaf(coef, acc[6 * i + j][e], s);
                    }
                os[co * kOutStride + a * 64 + 4 * tile + c] = s;
            }
    }
    __syncthreads();
    // A warp a staged row at a time (16 channels x 4 rows a tile row), its lanes along x.
    for (int rr = warp; rr < kRows * kCout * 4; rr += WARPS) {
        const int r = rr / (kCout * 4), co = (rr / 4) % kCout, a = rr % 4, y = 4 * (ty0 + r) + a;
        if (y >= kOH) continue;
        const float *src = vs[r] + co * kOutStride + a * 64;
        float *dst = out + (((size_t(n) * kCout + co) * kOD + z) * kOH + y) * kOW;
        dst[lane] = src[lane];
        if (lane + 32 < kOW) dst[lane + 32] = src[lane + 32];
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "usage: tc_p83 (no arguments)\n");
        return 2;
    }
    if (!name_device("tc_p83", "p83's conv at (128, 3, 16, 64, 64), 16 output channels, stored (441 MB)")) return 1;
    const size_t in_count = size_t(kN) * kCin * kD * kH * kW, out_count = size_t(kN) * kCout * kOD * kOH * kOW;
    std::vector<float> in(in_count), w(size_t(kCout) * kCin * 27), bias(kCout);
    kernelbench_init(in, w, bias, kCin * 27);

    // u[p][co][k] = G g GT of tap k = 3 ci + kz's 3 x 3 kernel, then split, in fragment order
    // [p][step][lane][hi 4, lo 4] (taps past 9 zero).
    std::vector<float> u(size_t(kPoints) * kCout * 16, 0.f);
    for (int co = 0; co < kCout; co++)
        for (int k = 0; k < kTaps; k++) {
            const int ci = k / 3, kz = k % 3;
            float uk[36];
            transform_kernel(&w[((size_t(co) * kCin + ci) * 3 + kz) * 9], uk);
            for (int p = 0; p < kPoints; p++) u[(size_t(p) * kCout + co) * 16 + k] = uk[p];
        }
    std::vector<float> uf(size_t(kPoints) * 2 * 32 * 8);
    for (int p = 0; p < kPoints; p++)
        for (int ks = 0; ks < 2; ks++)
            for (int lane = 0; lane < 32; lane++) {
                split_fragment(lane, [&](int row, int col) { return u[(size_t(p) * kCout + row) * 16 + 8 * ks + col]; },
                               &uf[((size_t(p) * 2 + ks) * 32 + lane) * 8]);
            }

    float *d_in = nullptr, *d_uf = nullptr, *d_bias = nullptr, *d_out = nullptr;
    if (cudaMalloc(&d_in, in_count * 4) != cudaSuccess || cudaMalloc(&d_uf, uf.size() * 4) != cudaSuccess ||
        cudaMalloc(&d_bias, kCout * 4) != cudaSuccess || cudaMalloc(&d_out, out_count * 4) != cudaSuccess) {
        fprintf(stderr, "tc_p83: cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(d_in, in.data(), in_count * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_uf, uf.data(), uf.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_bias, bias.data(), kCout * 4, cudaMemcpyHostToDevice);

    struct Variant {
        const char *name;
        void (*kernel)(const float *, const float4 *, const float *, float *);
        int warps;
    };
    const Variant variants[] = {{"2 warps (one tile row) a block", conv_kernel<2>, 2},
                                {"4 warps (two tile rows) a block", conv_kernel<4>, 4}};
    bool ok = true;
    for (const Variant &var : variants) {
        cudaFuncAttributes attr{};
        cudaFuncGetAttributes(&attr, var.kernel);
        const dim3 grid(kTiles / (var.warps / 2), kOD, kN);
        cudaMemset(d_out, 0xff, out_count * 4);
        auto launch = [&]() {
            var.kernel<<<grid, 32 * var.warps>>>(d_in, reinterpret_cast<const float4 *>(d_uf), d_bias, d_out);
        };
        std::vector<float> out;
        if (!first_launch_output(var.name, launch, d_out, out_count, &out)) return 1;
        double err = 0, rel = 0;
        const int samples = 2000;
        for (int s = 0; s < samples; s++) {
            const int n = s == 0 ? kN - 1 : int(uniform01() * kN) % kN, co = int(uniform01() * kCout) % kCout;
            const int z = s == 0 ? kOD - 1 : int(uniform01() * kOD) % kOD;
            const int y = s == 0 ? kOH - 1 : int(uniform01() * kOH) % kOH, x = s == 0 ? kOW - 1 : int(uniform01() * kOW) % kOW;
            double acc = bias[co], a = std::fabs(bias[co]);
            for (int ci = 0; ci < kCin; ci++)
                for (int kz = 0; kz < 3; kz++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            const double term = double(w[(((size_t(co) * kCin + ci) * 3 + kz) * 3 + ky) * 3 + kx]) *
                                                in[(((size_t(n) * kCin + ci) * kD + z + kz) * kH + y + ky) * kW + x + kx];
                            acc += term;
                            a += std::fabs(term);
                        }
            const double d = std::fabs(out[(((size_t(n) * kCout + co) * kOD + z) * kOH + y) * kOW + x] - acc);
            err = std::max(err, d);
            rel = std::max(rel, d / a);
        }
        std::vector<float> ms;
        if (sorted_launch_ms(launch, 20, &ms) != cudaSuccess) {
            fprintf(stderr, "%s: timing failed\n", var.name);
            return 1;
        }
        printf("%-34s %3d registers %3d B local, median %.3f ms (min %.3f); max |err| vs float64 %.2e "
               "(%.2e of sum |terms|) at %d outputs\n",
               var.name, attr.numRegs, int(attr.localSizeBytes), ms[10], ms[0], err, rel, samples);
        ok = ok && err < 1e-4;
    }
    cudaFree(d_in);
    cudaFree(d_uf);
    cudaFree(d_bias);
    cudaFree(d_out);
    return ok ? 0 : 1;
}
