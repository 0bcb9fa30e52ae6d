// What the Winograd probes on mma.sync share (tc_p32_points, tc_p83): F(4x4, 3x3)'s transforms,
// one tf32 mma and one 3xTF32 step, the host's split of an operand into tf32 value and remainder,
// A's fragments, their inputs' random numbers and the device they name.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

namespace winograd_probe {

// AT of F(4, 3) (points 0, 1, -1, 2, -2, infinity).
__host__ __device__ constexpr float at(int a, int i) {
    constexpr float m[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
    return m[a][i];
}

// G of F(4, 3): u = G g GT.
constexpr double kG[6][3] = {{0.25, 0, 0},           {-1 / 6., -1 / 6., -1 / 6.}, {-1 / 6., 1 / 6., -1 / 6.},
                             {1 / 24., 1 / 12., 1 / 6.}, {1 / 24., -1 / 12., 1 / 6.}, {0, 0, 1}};

// BT applied to 6 values.
__device__ __forceinline__ void bt6(const float d[6], float r[6]) {
    r[0] = 4.f * d[0] - 5.f * d[2] + d[4];
    r[1] = -4.f * d[1] - 4.f * d[2] + d[3] + d[4];
    r[2] = 4.f * d[1] - 4.f * d[2] - d[3] + d[4];
    r[3] = -2.f * d[1] - d[2] + 2.f * d[3] + d[4];
    r[4] = 2.f * d[1] - d[2] - 2.f * d[3] + d[4];
    r[5] = 4.f * d[1] - 5.f * d[3] + d[5];
}

// c += a b, mma.sync.m16n8k8 in tf32.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A's fragment (4 floats of tf32 values or remainders) as mma's operand bits.
struct Fragment {
    uint32_t r[4];
};
__device__ __forceinline__ Fragment fragment(float4 f) {
    return {{__float_as_uint(f.x), __float_as_uint(f.y), __float_as_uint(f.z), __float_as_uint(f.w)}};
}

// One 3xTF32 step: A split ahead (ah values, al remainders), B (b0, b1) split here as its bits
// with the low 13 cleared and the exact remainder; the two small products into `small` (which
// may be `acc`), then the large one.
__device__ __forceinline__ void step(float (&acc)[4], float (&small)[4], const Fragment &ah, const Fragment &al,
                                     float b0, float b1) {
    const uint32_t bh0 = __float_as_uint(b0) & 0xffffe000u, bh1 = __float_as_uint(b1) & 0xffffe000u;
    const uint32_t bl0 = __float_as_uint(b0 - __uint_as_float(bh0));
    const uint32_t bl1 = __float_as_uint(b1 - __uint_as_float(bh1));
    mma(small, al.r, bh0, bh1);
    mma(small, ah.r, bl0, bl1);
    mma(acc, ah.r, bh0, bh1);
}

// x rounded to tf32 (to nearest, ties away, as cvt.rna), as a float; x minus it is exact.
inline float tf32_hi(float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    b = (b + 0x1000u) & 0xffffe000u;
    float r;
    std::memcpy(&r, &b, 4);
    return r;
}

// Uniform in [0, 1), a fixed sequence.
inline float uniform01() {
    static uint32_t state = 12345u;
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.f;
}

// u = G g GT of one 3 x 3 kernel g (row-major): its 36 points, point 6 i + j at u[i * 6 + j].
inline void transform_kernel(const float *g, float u[36]) {
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            double s = 0;
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) s += kG[i][ky] * g[3 * ky + kx] * kG[j][kx];
            u[6 * i + j] = static_cast<float>(s);
        }
}

// The lane's A fragment of mma.m16n8k8 (rows g, g + 8, columns t, t + 4 of the 16 x 8 tile that
// a(row, col) reads), split: its 4 tf32 values, then their remainders.
template <class A>
void split_fragment(int lane, const A &a, float dst[8]) {
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {t, t, t + 4, t + 4};
    for (int e = 0; e < 4; e++) {
        const float x = a(rows[e], cols[e]);
        dst[e] = tf32_hi(x);
        dst[4 + e] = x - dst[e];
    }
}

// KernelBench's init: the input uniform in [0, 1), weights and bias in (-b, b), b = 1 / sqrt(fan_in).
inline void kernelbench_init(std::vector<float> &in, std::vector<float> &w, std::vector<float> &bias,
                             int fan_in) {
    for (auto &x : in) x = uniform01();
    const float bound = 1.f / std::sqrt(float(fan_in));
    for (auto &x : w) x = (2.f * uniform01() - 1.f) * bound;
    for (auto &x : bias) x = (2.f * uniform01() - 1.f) * bound;
}

// Prints "<device>: <what>"; false (and says so as `program`) without a CUDA device.
inline bool name_device(const char *program, const char *what) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "%s: no CUDA device\n", program);
        return false;
    }
    printf("%s: %s\n", prop.name, what);
    return true;
}

}  // namespace winograd_probe
