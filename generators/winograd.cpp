#include "winograd.h"

namespace fusedconv::blocks {

using namespace Halide;

ConvWinogradX conv2d_winograd_x(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr cin,
                                Expr cout, Expr in_w, Expr in_h, const std::string &name) {
    V v;
    ConvWinogradX w;
    const Var &k = w.k, &t = w.t, &i = w.i;
    w.u = Func(name + "_u");
    w.v = Func(name + "_v");
    w.m = Func(name + "_m");
    w.tiles = Func(name + "_tiles");
    w.f = Func(name);
    w.r = RDom(0, kWinogradTaps, 0, cin, name + "_r");

    w.source = clamped_input2d(input, in_w, in_h, cin, name + "_src");
    w.weight = clamped_weight2d(weight, kw, kh, cin, cout, name + "_w");

    // u = G g, G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
    // 1/24 -1/12 1/6; 0 0 1] (interpolation points 0, -1, 1, -2, 2, infinity).
    auto g = [&](int j) { return w.weight(j, v.y, v.z, v.c); };
    Expr g0 = g(0), g1 = g(1), g2 = g(2);
    Expr even = g0 * (1.0f / 24) + g2 * (1.0f / 6), odd = g1 * (1.0f / 12);
    w.u(k, v.y, v.z, v.c) = mux(k, {g0 * 0.25f, (g0 + g1 + g2) * (-1.0f / 6),
                                    (g0 - g1 + g2) * (-1.0f / 6), even + odd, even - odd, g2});

    // v = BT d, BT = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
    // 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1].
    auto d = [&](int j) { return w.source(kWinogradTile * t + j, v.y, v.c, v.n); };
    Expr d0 = d(0), d1 = d(1), d2 = d(2), d3 = d(3), d4 = d(4), d5 = d(5);
    Expr a = d4 - d2, b = 2.0f * (d3 - d1);
    w.v(k, t, v.y, v.c, v.n) =
        mux(k, {4.0f * d0 - 5.0f * d2 + d4, (d3 + d4) - 4.0f * (d1 + d2),
                (d4 - d3) + 4.0f * (d1 - d2), a + b, a - b, 4.0f * d1 - 5.0f * d3 + d5});

    const RDom &r = w.r;
    w.m(k, t, v.y, v.c, v.n) = 0.0f;
    w.m(k, t, v.y, v.c, v.n) += w.u(k, r.x, r.y, v.c) * w.v(k, t, v.y + r.x, r.y, v.n);

    // out = AT m, AT = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
    auto m = [&](int j) { return w.m(j, t, v.y, v.c, v.n); };
    Expr s12 = m(1) + m(2), d12 = m(1) - m(2), s34 = m(3) + m(4), d34 = m(3) - m(4);
    // The poison (see winograd.h): 16 * sum |m| bounds every |AT m|, so it
    // is finite exactly when no m is NaN or infinite and no output can
    // overflow; 0 times it is then 0, and NaN otherwise. strict_float keeps
    // Halide's fast-math from folding 0 * x to 0.
    Expr magnitude = abs(m(0)) + abs(m(1)) + abs(m(2)) + abs(m(3)) + abs(m(4)) + abs(m(5));
    Expr poison = strict_float(0.0f * (magnitude * 16.0f));
    w.tiles(i, t, v.y, v.c, v.n) =
        (bias(clamp(v.c, 0, cout - 1)) + poison) +
        mux(i, {m(0) + s12 + s34, d12 + 2.0f * d34, s12 + 4.0f * s34, d12 + 8.0f * d34 + m(5)});
    w.f(v.x, v.y, v.c, v.n) =
        w.tiles(v.x % kWinogradTile, v.x / kWinogradTile, v.y, v.c, v.n);
    return w;
}

}  // namespace fusedconv::blocks
