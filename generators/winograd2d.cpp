#include "winograd2d.h"

namespace fusedconv::blocks {

using namespace Halide;

namespace {

// Args: the Vars a, then the Vars of `rest`.
std::vector<Expr> args(std::initializer_list<Expr> a, const std::vector<Var> &rest) {
    std::vector<Expr> out(a);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

// Names the form's Funcs after `name` (both forms have the same stages).
template <typename Form>
void name_stages(Form &w, const std::string &name) {
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
}

}  // namespace

void define_winograd2d_taps(Func &ux, Func &u, Func weight, const Var &k, const Var &l,
                           const std::vector<Var> &rest) {
    V v;
    ux(args({k, v.y}, rest)) = mux(k, winograd_taps_transform(weight(args({0, v.y}, rest)),
                                                             weight(args({1, v.y}, rest)),
                                                             weight(args({2, v.y}, rest))));
    u(args({k, l}, rest)) = mux(l, winograd_taps_transform(ux(args({k, 0}, rest)),
                                                         ux(args({k, 1}, rest)),
                                                         ux(args({k, 2}, rest))));
}

void define_winograd2d_input(Func &vx, Func &v, Func source, const ConvWinograd2DVars &w,
                            const std::vector<Var> &rest) {
    const int T = kWinogradTile, K = kWinogradPoints;
    V vv;
    std::vector<Expr> row, col;
    for (int q = 0; q < K; q++) row.push_back(source(args({T * w.tx + q, vv.y}, rest)));
    vx(args({w.k, w.tx, vv.y}, rest)) = mux(w.k, winograd_input_transform(row));
    for (int q = 0; q < K; q++) col.push_back(vx(args({w.k, w.tx, T * w.ty + q}, rest)));
    v(args({w.k, w.l, w.tx, w.ty}, rest)) = mux(w.l, winograd_input_transform(col));
}

void define_winograd2d_output(Func &ox, Func &poison, Func &tiles, Func m, Func bias,
                             const Expr &co, const Expr &cout, const ConvWinograd2DVars &w,
                             const std::vector<Var> &rest) {
    const int K = kWinogradPoints, T = kWinogradTile;
    std::vector<Expr> mrow, ocol, outputs;
    for (int q = 0; q < K; q++) mrow.push_back(m(args({q + K * w.l, w.tx, w.ty}, rest)));
    ox(args({w.i, w.l, w.tx, w.ty}, rest)) = mux(w.i, winograd_output_transform(mrow));
    for (int q = 0; q < K; q++) ocol.push_back(ox(args({w.i, q, w.tx, w.ty}, rest)));
    // The tile's 16 outputs before the bias (inlined wherever read).
    Func transformed;
    transformed(args({w.i, w.j, w.tx, w.ty}, rest)) = mux(w.j, winograd_output_transform(ocol));
    // The bias, or NaN where those outputs are not all finite
    // (winograd_poison_bias).
    for (int i = 0; i < T; i++) {
        for (int j = 0; j < T; j++) outputs.push_back(transformed(args({i, j, w.tx, w.ty}, rest)));
    }
    poison(args({w.tx, w.ty}, rest)) = winograd_poison_bias(bias(clamp(co, 0, cout - 1)), outputs);
    tiles(args({w.i, w.j, w.tx, w.ty}, rest)) =
        poison(args({w.tx, w.ty}, rest)) + transformed(args({w.i, w.j, w.tx, w.ty}, rest));
}

ConvWinograd2D conv2d_winograd_2d(Func input, Func weight, Func bias, Expr kw, Expr kh,
                                  Expr cin, Expr cout, Expr in_w, Expr in_h,
                                  const std::string &name) {
    V v;
    ConvWinograd2D w;
    const int T = kWinogradTile, K = kWinogradPoints, G = kWinograd2DPointGroup,
              CG = kWinograd2DChannelGroup;
    name_stages(w, name);
    w.r = RDom(0, cin, name + "_r");

    w.source = clamped_input2d(input, in_w, in_h, cin, name + "_src");
    w.weight = clamped_weight2d(weight, kw, kh, cin, cout, name + "_w");
    define_winograd2d_taps(w.ux, w.u, w.weight, w.k, w.l, {v.z, v.c});
    define_winograd2d_input(w.vx, w.v, w.source, w, {v.c, v.n});

    Var q("wq"), cl("wcl"), g("wg");
    Expr point = G * g + q;
    w.ug(q, cl, g, v.z, v.c) = w.u(point % K, point / K, v.z, CG * v.c + cl);

    // The sums over input channels, point by point (point = k + 6 l).
    const RDom &r = w.r;
    const Var &pt = w.p, &tx = w.tx, &ty = w.ty;
    w.m(pt, tx, ty, v.c, v.n) = 0.0f;
    w.m(pt, tx, ty, v.c, v.n) +=
        w.ug(pt % G, v.c % CG, pt / G, r, v.c / CG) * w.v(pt % K, pt / K, tx, ty, r, v.n);

    define_winograd2d_output(w.ox, w.poison, w.tiles, w.m, bias, v.c, cout, w, {v.c, v.n});
    w.f(v.x, v.y, v.c, v.n) = w.tiles(v.x % T, v.y % T, v.x / T, v.y / T, v.c, v.n);
    return w;
}

ConvWinograd3D conv3d_winograd_xy(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr kd,
                                  Expr cin, Expr cout, Expr in_w, Expr in_h, Expr in_d,
                                  const std::string &name) {
    V v;
    ConvWinograd3D w;
    const int T = kWinogradTile, K = kWinogradPoints, G = kWinograd2DPointGroup,
              CG = kWinograd2DChannelGroup;
    name_stages(w, name);
    w.r = RDom(0, kWinogradTaps, 0, cin, name + "_r");

    // As blocks::conv3d's, and every tap index clamped too (3 x 3 x 3 taps
    // are read whatever kw, kh, kd).
    w.source = Func(name + "_src");
    w.source(v.x, v.y, v.z, v.c, v.n) =
        input(clamp(v.x, 0, in_w - 1), clamp(v.y, 0, in_h - 1), clamp(v.z, 0, in_d - 1),
              clamp(v.c, 0, cin - 1), v.n);
    w.weight = Func(name + "_w");
    w.weight(v.x, v.y, v.z, v.c, v.n) =
        weight(clamp(v.x, 0, kw - 1), clamp(v.y, 0, kh - 1), clamp(v.z, 0, kd - 1),
               clamp(v.c, 0, cin - 1), clamp(v.n, 0, cout - 1));
    // Taps (kx, ky, kz, ci, co): each depth tap's 3 x 3 plane transformed.
    define_winograd2d_taps(w.ux, w.u, w.weight, w.k, w.l, {v.z, v.c, v.n});
    define_winograd2d_input(w.vx, w.v, w.source, w, {v.z, v.c, v.n});

    Var q("wq"), cl("wcl"), g("wg"), kz("wkz");
    Expr point = G * g + q;
    w.ug(q, cl, g, kz, v.z, v.c) = w.u(point % K, point / K, kz, v.z, CG * v.c + cl);

    // The sums over (depth tap, input channel), point by point.
    const RDom &r = w.r;
    const Var &pt = w.p, &tx = w.tx, &ty = w.ty;
    w.m(pt, tx, ty, v.z, v.c, v.n) = 0.0f;
    w.m(pt, tx, ty, v.z, v.c, v.n) += w.ug(pt % G, v.c % CG, pt / G, r.x, r.y, v.c / CG) *
                                      w.v(pt % K, pt / K, tx, ty, v.z + r.x, r.y, v.n);

    define_winograd2d_output(w.ox, w.poison, w.tiles, w.m, bias, v.c, cout, w, {v.z, v.c, v.n});
    w.f(v.x, v.y, v.z, v.c, v.n) = w.tiles(v.x % T, v.y % T, v.x / T, v.y / T, v.z, v.c, v.n);
    return w;
}

}  // namespace fusedconv::blocks
