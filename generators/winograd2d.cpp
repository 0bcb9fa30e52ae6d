#include "winograd2d.h"

namespace fusedconv::blocks {

using namespace Halide;

ConvWinograd2D conv2d_winograd_2d(Func input, Func weight, Func bias, Expr kw, Expr kh,
                                  Expr cin, Expr cout, Expr in_w, Expr in_h,
                                  const std::string &name) {
    V v;
    ConvWinograd2D w;
    const Var &k = w.k, &l = w.l, &tx = w.tx, &ty = w.ty, &i = w.i, &j = w.j;
    const int T = kWinogradTile, K = kWinogradPoints;
    w.ux = Func(name + "_ux");
    w.u = Func(name + "_u");
    w.ug = Func(name + "_ug");
    w.vx = Func(name + "_vx");
    w.v = Func(name + "_v");
    w.m = Func(name + "_m");
    w.ox = Func(name + "_ox");
    w.poison = Func(name + "_poison");
    w.tiles = Func(name + "_tiles");
    w.f = Func(name);
    w.r = RDom(0, cin, name + "_r");

    w.source = clamped_input2d(input, in_w, in_h, cin, name + "_src");
    w.weight = clamped_weight2d(weight, kw, kh, cin, cout, name + "_w");

    // u = G g GT: rows of taps along x, then the columns of those along y.
    w.ux(k, v.y, v.z, v.c) = mux(k, winograd_taps_transform(w.weight(0, v.y, v.z, v.c),
                                                            w.weight(1, v.y, v.z, v.c),
                                                            w.weight(2, v.y, v.z, v.c)));
    w.u(k, l, v.z, v.c) = mux(l, winograd_taps_transform(w.ux(k, 0, v.z, v.c),
                                                         w.ux(k, 1, v.z, v.c),
                                                         w.ux(k, 2, v.z, v.c)));

    // v = BT d B: each of the patch's rows along x, then its columns along y.
    std::vector<Expr> row, col;
    for (int q = 0; q < K; q++) row.push_back(w.source(T * tx + q, v.y, v.c, v.n));
    w.vx(k, tx, v.y, v.c, v.n) = mux(k, winograd_input_transform(row));
    for (int q = 0; q < K; q++) col.push_back(w.vx(k, tx, T * ty + q, v.c, v.n));
    w.v(k, l, tx, ty, v.c, v.n) = mux(l, winograd_input_transform(col));

    const int G = kWinograd2DPointGroup;
    Var q("wq"), g("wg");
    Expr point = G * g + q;
    w.ug(q, v.c, g, v.z) = w.u(point % K, point / K, v.z, v.c);

    // The sums over input channels, point by point (point = k + 6 l).
    const RDom &r = w.r;
    const Var &pt = w.p;
    w.m(pt, tx, ty, v.c, v.n) = 0.0f;
    w.m(pt, tx, ty, v.c, v.n) += w.ug(pt % G, v.c, pt / G, r) * w.v(pt % K, pt / K, tx, ty, r, v.n);

    // out = AT m A: each row of m along x, then the columns along y.
    std::vector<Expr> mrow, mall, ocol;
    for (int q = 0; q < K; q++) {
        mrow.push_back(w.m(q + K * l, tx, ty, v.c, v.n));
        for (int p = 0; p < K; p++) mall.push_back(w.m(p + K * q, tx, ty, v.c, v.n));
    }
    w.ox(i, l, tx, ty, v.c, v.n) = mux(i, winograd_output_transform(mrow));
    for (int q = 0; q < K; q++) ocol.push_back(w.ox(i, q, tx, ty, v.c, v.n));
    // AT's largest coefficient is 8, so 8 * 8 * sum |m| bounds every output;
    // 128 keeps the form along x's factor 2 to spare.
    w.poison(tx, ty, v.c, v.n) = winograd_poison(mall, 128.0f);
    w.tiles(i, j, tx, ty, v.c, v.n) = (bias(clamp(v.c, 0, cout - 1)) + w.poison(tx, ty, v.c, v.n)) +
                                      mux(j, winograd_output_transform(ocol));
    w.f(v.x, v.y, v.c, v.n) = w.tiles(v.x % T, v.y % T, v.x / T, v.y / T, v.c, v.n);
    return w;
}

}  // namespace fusedconv::blocks
