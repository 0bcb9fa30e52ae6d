// The programs' side of mma_splice.h's fragment layout: A's fragments (the transformed taps u)
// filled on the host, as the generators read them.
#pragma once

#include "HalideBuffer.h"

#include <cstdint>
#include <cstring>
#include <functional>

namespace tc_probe {

// x rounded to tf32 as cvt.rna.tf32.f32 does: to nearest, ties away from zero.
inline float round_to_tf32(float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    b = (b + 0x1000u) & ~0x1FFFu;
    std::memcpy(&x, &b, 4);
    return x;
}

// uf(q, lane, cg, ks, p) from u(c, co, p) (input channel, output channel, point): with lane l,
// g = l / 4, t = l % 4, element q % 4 is a0..a3 = u at (co, c) = (16 cg + g, 8 ks + t),
// (+8, +0), (+0, +4), (+8, +4). With presplit (uf's extent 8 in q) q < 4 are those rounded to
// tf32 and q >= 4 their remainders rounded to tf32; otherwise (extent 4) the float32 values.
inline void fill_u_fragments(Halide::Runtime::Buffer<float> &uf, const std::function<float(int, int, int)> &u) {
    const bool presplit = uf.dim(0).extent() == 8;
    uf.for_each_element([&](int q, int l, int cg, int ks, int p) {
        const int j = q % 4, co = cg * 16 + l / 4 + ((j & 1) ? 8 : 0), c = ks * 8 + l % 4 + ((j & 2) ? 4 : 0);
        const float x = u(c, co, p), hi = round_to_tf32(x);
        uf(q, l, cg, ks, p) = !presplit ? x : q < 4 ? hi : round_to_tf32(x - hi);
    });
    uf.set_host_dirty();
}

}  // namespace tc_probe
