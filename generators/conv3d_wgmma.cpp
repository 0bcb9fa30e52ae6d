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
    Expr out_w = in_w - 2, out_h = in_h - 2, out_d = in_d - 2;

    // B: tap row j = 2 s + kc (ky, kz, ci), column kx' = e; zero at kx' = 3 and past cin and cout.
    {
        Expr row = 2 * m.s + m.kc, ci = row / 9;
        Expr x = select(m.e < 3 && ci < cin && m.co < cout,
                        weight(min(m.e, 2), row % 3, (row / 3) % 3, clamp(ci, 0, cin - 1),
                               clamp(m.co, 0, cout - 1)),
                        0.0f);
        m.bw(m.e, m.co, m.kc, m.part, m.s) = tf32_split_part(x, m.part == 0);
    }

    // A: a block is 32 columns of a pair of image rows: wgmma row 16 w + 8 h + g is pixel
    // (32 xb + 8 w + g, y0 + h), so a thread's two rows (h = 0, 1) are vertical neighbours and
    // the lower one's tap rows ky = 0, 1 are the upper one's ky = 1, 2: 36 input rows a thread and
    // depth, not 54. In step s the thread holds tap rows 2 s (elements 0, 1) and 2 s + 1
    // (2, 3) at column kx' = t. Columns past the plane are clamped to its last (computed, not
    // stored); with an odd height the last pair of rows is shifted up by one (its upper row
    // computed twice, stored by the pair above), so that no row is clamped: both pixels' shared
    // rows are then one expression. Needs out_h >= kWgmmaMinOutHeight.
    Expr blocks_x = (out_w + kWgmmaColumns - 1) / kWgmmaColumns;
    auto pair_top = [&](const Expr &pair) { return min(2 * pair, out_h - 2); };
    Expr x0 = min(kWgmmaColumns * (m.pb % blocks_x) + 8 * m.w + m.g, out_w - 1), y0 = pair_top(m.pb / blocks_x);
    Expr kx = min(m.t, 2);
    // Tap row j = ky + 3 kz + 9 ci of pixel row h: input row y0 + (h + ky), the sum a C++ constant
    // so that the rows both pixels read are one expression (one load).
    auto a_elem = [&](int h, int j) {
        const int ci = j / 9;
        Expr c = min(ci, cin - 1);
        return select(ci < cin, input(x0 + kx, y0 + (h + j % 3), m.z + (j / 3) % 3, c, v.n), 0.0f);
    };
    FuncRef a = m.acc(m.t, m.g, m.w, m.z, m.pb, v.n);
    m.acc(m.t, m.g, m.w, m.z, m.pb, v.n) = Tuple(std::vector<Expr>(kWgmmaElements, 0.0f));
    // The k-steps as update definitions of their own (not an RDom): their rows are constants.
    for (int s = 0; s < kWgmmaSteps; s++) {
        m.acc(m.t, m.g, m.w, m.z, m.pb, v.n) =
            Tuple(wgmma_step(a, {a_elem(0, 2 * s), a_elem(1, 2 * s), a_elem(0, 2 * s + 1), a_elem(1, 2 * s + 1)},
                             s * kWgmmaStepBytes, m.bw(0, 0, 0, 0, s)));
    }

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

    // Element 4 j + 2 h + e of thread (t, g, w): wgmma row 16 w + 8 h + g, channel 8 j + 2 t + e.
    {
        FuncRef d = m.dmin(m.t, m.g, m.w, m.pb, v.n);
        std::vector<Expr> elems;
        for (int k = 0; k < kWgmmaElements; k++) elems.push_back(d[k]);
        Expr c = 8 * m.j + 2 * m.t + m.e;
        m.mins(m.e, m.h, m.j, m.t, m.g, m.w, m.pb, v.n) =
            mux(4 * m.j + 2 * m.h + m.e, elems) + bias(clamp(c, 0, cout - 1));
    }
    // The row within its pair, 0 or 1 (clamped only so that bounds inference sees it).
    Expr pair = v.y / 2, h = clamp(v.y - pair_top(pair), 0, 1);
    m.f(v.x, v.y, v.c, v.n) = m.mins(v.c % 2, h, v.c / 8, (v.c % 8) / 2, v.x % 8,
                                     (v.x % kWgmmaColumns) / 8, pair * blocks_x + v.x / kWgmmaColumns, v.n);
    return m;
}

}  // namespace fusedconv::blocks
