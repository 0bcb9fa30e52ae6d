#include "conv3d_wgmma.h"

#include "mma_step.h"
#include "winograd2d_tensor_core.h"

#include <limits>

namespace fusedconv::blocks {

using namespace Halide;

ConvMinDepthWgmma conv3d_min_depth_wgmma(Func input, Func weight, Func bias, Expr cin, Expr cout,
                                         Expr in_w, Expr in_h, Expr in_d, const std::string &name) {
    V v;
    ConvMinDepthWgmma m;
    m.bw = Func(name + "_bw");
    m.acc = Func(name + "_acc");
    m.dmin = Func(name + "_dmin");
    m.mins = Func(name + "_mins");
    m.f = Func(name);
    m.cin = cin;
    Expr out_w = in_w - 2, out_h = in_h - 2, out_d = in_d - 2, pixels = out_w * out_h;

    // B: tap row j = 2 s + kc (ky, kz, ci), column kx' = e; zero at kx' = 3 and past cin and cout.
    {
        Expr row = 2 * m.s + m.kc, ci = row / 9;
        Expr x = select(m.e < 3 && ci < cin && m.co < cout,
                        weight(min(m.e, 2), row % 3, (row / 3) % 3, clamp(ci, 0, cin - 1),
                               clamp(m.co, 0, cout - 1)),
                        0.0f);
        Expr hi = round_to_tf32(x);
        m.bw(m.e, m.co, m.kc, m.part, m.s) = select(m.part == 0, hi, round_to_tf32(x - hi));
    }

    // A: thread (t, g, w) of the warpgroup holds rows 16 w + g and 16 w + g + 8 (pixels of the
    // block, clamped into the plane: rows past it are computed and not stored) and, in step rk,
    // tap rows 2 rk (elements 0, 1) and 2 rk + 1 (2, 3), at column kx' = t.
    Expr p0 = clamp(kWgmmaPixels * m.pb + 16 * m.w + m.g, 0, pixels - 1);
    Expr p1 = clamp(kWgmmaPixels * m.pb + 16 * m.w + m.g + 8, 0, pixels - 1);
    Expr kx = min(m.t, 2);
    m.rk = RDom(0, kWgmmaSteps, name + "_rk");
    auto a_elem = [&](const Expr &p, const Expr &row) {
        Expr ci = row / 9;
        return select(ci < cin, input(p % out_w + kx, p / out_w + row % 3, m.z + (row / 3) % 3,
                                      clamp(ci, 0, cin - 1), v.n),
                      0.0f);
    };
    FuncRef a = m.acc(m.t, m.g, m.w, m.z, m.pb, v.n);
    m.acc(m.t, m.g, m.w, m.z, m.pb, v.n) = Tuple(std::vector<Expr>(kWgmmaElements, 0.0f));
    m.acc(m.t, m.g, m.w, m.z, m.pb, v.n) =
        Tuple(wgmma_step(a, {a_elem(p0, 2 * m.rk), a_elem(p1, 2 * m.rk), a_elem(p0, 2 * m.rk + 1),
                             a_elem(p1, 2 * m.rk + 1)},
                         m.rk * kWgmmaStepBytes, m.bw(0, 0, 0, 0, m.rk)));

    // The minimum over depth, NaN-aware (as min_depth's).
    const Expr none = std::numeric_limits<float>::infinity();
    m.rz = RDom(0, out_d, name + "_rz");
    m.dmin(m.t, m.g, m.w, m.pb, v.n) = Tuple(std::vector<Expr>(kWgmmaElements, none));
    {
        FuncRef d = m.dmin(m.t, m.g, m.w, m.pb, v.n);
        FuncRef c = m.acc(m.t, m.g, m.w, m.rz, m.pb, v.n);
        std::vector<Expr> folded;
        for (int k = 0; k < kWgmmaElements; k++) folded.push_back(nan_min(d[k], c[k]));
        m.dmin(m.t, m.g, m.w, m.pb, v.n) = Tuple(folded);
    }

    // Element 4 j + 2 h + e of thread (t, g, w): pixel row 16 w + 8 h + g, channel 8 j + 2 t + e.
    {
        FuncRef d = m.dmin(m.t, m.g, m.w, m.pb, v.n);
        std::vector<Expr> elems;
        for (int k = 0; k < kWgmmaElements; k++) elems.push_back(d[k]);
        Expr c = 8 * m.j + 2 * m.t + m.e;
        m.mins(m.e, m.h, m.j, m.t, m.g, m.w, m.pb, v.n) =
            mux(4 * m.j + 2 * m.h + m.e, elems) + bias(clamp(c, 0, cout - 1));
    }
    Expr p = v.x + out_w * v.y, r = p % kWgmmaPixels;
    m.f(v.x, v.y, v.c, v.n) =
        m.mins(v.c % 2, (r / 8) % 2, v.c / 8, (v.c % 8) / 2, r % 8, r / 16, p / kWgmmaPixels, v.n);
    return m;
}

}  // namespace fusedconv::blocks
