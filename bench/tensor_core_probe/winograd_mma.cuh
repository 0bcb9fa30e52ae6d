// What the Winograd probes on mma.sync share (tc_p32_points, tc_p83): F(4x4, 3x3)'s transforms,
// one tf32 mma and one 3xTF32 step, the host's split of an operand into tf32 value and remainder, and their
// inputs' random numbers.
#pragma once

#include <cstdint>
#include <cstring>
#include <cuda_runtime.h>

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

}  // namespace winograd_probe
