#include "winograd.h"

namespace fusedconv::blocks {

using namespace Halide;

std::vector<Expr> winograd_taps_transform(const Expr &g0, const Expr &g1, const Expr &g2) {
    // G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
    // 1/24 -1/12 1/6; 0 0 1] (interpolation points 0, -1, 1, -2, 2, infinity).
    Expr even = g0 * (1.0f / 24) + g2 * (1.0f / 6), odd = g1 * (1.0f / 12);
    return {g0 * 0.25f, (g0 + g1 + g2) * (-1.0f / 6), (g0 - g1 + g2) * (-1.0f / 6), even + odd,
            even - odd, g2};
}

std::vector<Expr> winograd_input_transform(const std::vector<Expr> &d) {
    // BT = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
    // 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1].
    Expr a = d[4] - d[2], b = 2.0f * (d[3] - d[1]);
    return {4.0f * d[0] - 5.0f * d[2] + d[4], (d[3] + d[4]) - 4.0f * (d[1] + d[2]),
            (d[4] - d[3]) + 4.0f * (d[1] - d[2]), a + b, a - b, 4.0f * d[1] - 5.0f * d[3] + d[5]};
}

std::vector<Expr> winograd_output_transform(const std::vector<Expr> &m) {
    // AT = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
    Expr s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
    return {m[0] + s12 + s34, d12 + 2.0f * d34, s12 + 4.0f * s34, d12 + 8.0f * d34 + m[5]};
}

Expr winograd_poison_bias(const Expr &bias, const std::vector<Expr> &outputs) {
    Expr sum = outputs[0];
    for (size_t j = 1; j < outputs.size(); j++) sum += outputs[j];
    Expr not_finite = (reinterpret<uint32_t>(sum) & u32(0x7f800000u)) == u32(0x7f800000u);
    return reinterpret<float>(reinterpret<uint32_t>(bias) |
                              select(not_finite, u32(0x7fc00000u), u32(0)));
}

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

    auto g = [&](int j) { return w.weight(j, v.y, v.z, v.c); };
    w.u(k, v.y, v.z, v.c) = mux(k, winograd_taps_transform(g(0), g(1), g(2)));

    std::vector<Expr> d;
    for (int j = 0; j < kWinogradPoints; j++) {
        d.push_back(w.source(kWinogradTile * t + j, v.y, v.c, v.n));
    }
    w.v(k, t, v.y, v.c, v.n) = mux(k, winograd_input_transform(d));

    const RDom &r = w.r;
    w.m(k, t, v.y, v.c, v.n) = 0.0f;
    w.m(k, t, v.y, v.c, v.n) += w.u(k, r.x, r.y, v.c) * w.v(k, t, v.y + r.x, r.y, v.n);

    std::vector<Expr> m;
    for (int j = 0; j < kWinogradPoints; j++) m.push_back(w.m(j, t, v.y, v.c, v.n));
    const std::vector<Expr> outputs = winograd_output_transform(m);
    w.tiles(i, t, v.y, v.c, v.n) =
        winograd_poison_bias(bias(clamp(v.c, 0, cout - 1)), outputs) + mux(i, outputs);
    w.f(v.x, v.y, v.c, v.n) =
        w.tiles(v.x % kWinogradTile, v.x / kWinogradTile, v.y, v.c, v.n);
    return w;
}

}  // namespace fusedconv::blocks
