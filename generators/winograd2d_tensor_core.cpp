#include "winograd2d_tensor_core.h"

#include "mma_step.h"

#include <initializer_list>
#include <limits>
#include <utility>

namespace fusedconv::blocks {

using namespace Halide;

Expr round_to_tf32(const Expr &x) {
    // Adding half of the dropped 13 bits' weight to the magnitude and truncating rounds to
    // nearest, ties away from zero; inf and NaN stay as they are (a NaN's payload could carry).
    Expr b = reinterpret<uint32_t>(x);
    Expr special = (b & u32(0x7f800000u)) == u32(0x7f800000u);
    return reinterpret<float>(select(special, b, (b + u32(0x1000u)) & u32(0xffffe000u)));
}

Expr tf32_split_part(const Expr &x, const Expr &value) {
    Expr hi = round_to_tf32(x);
    return select(value, hi, round_to_tf32(x - hi));
}

ConvMinWinogradTensorCore conv2d_min_winograd_tensor_core(Func input, Func weight, Func bias,
                                                          Expr kw, Expr kh, Expr cin, Expr cout,
                                                          Expr in_w, Expr in_h, TensorCoreShape shape,
                                                          Expr scale, const std::string &name) {
    V v;
    ConvMinWinogradTensorCore w;
    const int K = kWinogradPoints, T = kWinogradTile, MT = kTensorCoreMTile, TG = kTensorCoreTileGroup,
              BT = kTensorCoreBlockTiles, WP = shape.warp_points, step = kTensorCoreStep;
    const int max_cin = shape.max_cin, mtiles = shape.round_mtiles, RC = MT * mtiles;
    if (max_cin <= 0 || max_cin % step != 0) {
        throw CompileError("the tensor-core form's max_cin must be a positive multiple of " +
                           std::to_string(step) + ", got " + std::to_string(max_cin));
    }
    if (mtiles != 1 && mtiles != 2) {
        throw CompileError("the tensor-core form's round_mtiles must be 1 or 2, got " + std::to_string(mtiles));
    }
    if (WP <= 0 || K * K % WP != 0 || shape.warps() > 32) {
        throw CompileError("the tensor-core form's warp_points must divide the 36 points into at most "
                           "32 warps a block (with round_mtiles " + std::to_string(mtiles) +
                           "), got " + std::to_string(WP));
    }
    w.shape = shape;
    for (auto [f, stage] : std::initializer_list<std::pair<Func *, const char *>>{
             {&w.ux, "ux"}, {&w.u, "u"}, {&w.uf, "uf"}, {&w.uw, "uw"}, {&w.vx, "vx"}, {&w.v, "v"},
             {&w.vf, "vf"}, {&w.acc, "acc"}, {&w.mfrag, "mfrag"}, {&w.m, "m"}, {&w.ox, "ox"},
             {&w.poison, "poison"}, {&w.tiles, "tiles"}, {&w.part, "part"}, {&w.groups, "groups"}}) {
        *f = Func(name + "_" + stage);
    }
    w.f = Func(name);
    w.rounds = (cout + (RC - 1)) / RC;

    // The input, zero past the last input channel (the steps read max_cin), and the taps.
    Func clamped = clamped_input2d(input, in_w, in_h, cin, name + "_src_clamped");
    w.source = Func(name + "_src");
    w.source(v.x, v.y, v.c, v.n) = select(v.c < cin, clamped(v.x, v.y, v.c, v.n), 0.0f);
    w.weight = clamped_weight2d(weight, kw, kh, cin, cout, name + "_w");
    define_winograd2d_taps(w.ux, w.u, w.weight, w.k, w.l, {v.z, v.c});

    // A fragments: lane l holds element q (0-3) = u at output channel 16 rd + l / 4 (+8 for
    // odd q), rd the m-tile here, and input channel 8 ks + l % 4 (+4 for q >= 2), as its tf32
    // value (h = 0) and its remainder's (h = 1), or as it is when the steps split it. Zero past
    // cin and cout, so that those channels add nothing.
    {
        Expr co = MT * w.rd + w.lane / 4 + 8 * (w.q % 2), ci = step * w.ks + w.lane % 4 + 4 * (w.q / 2);
        Expr x = select(ci < cin && co < cout, w.u(w.p % K, w.p / K, ci, co), 0.0f);
        if (shape.split_u_at_steps) {
            w.uf(w.q, w.lane, w.h, w.ks, w.p, w.rd) = x;
        } else {
            w.uf(w.q, w.lane, w.h, w.ks, w.p, w.rd) = tf32_split_part(x, w.h == 0);
        }
    }
    w.uw(w.q, w.lane, w.h, w.ks, w.p, w.rd) = w.uf(w.q, w.lane, w.h, w.ks, w.p, w.rd);

    // B fragments: lane 4 g8 + t4 of tile group tg, step ks holds b_jb = v at tile
    // 16 bx + 8 tg + g8 and input channel 8 ks + t4 + 4 jb.
    define_winograd2d_input(w.vx, w.v, w.source, w, {v.c, v.n});
    w.vf(w.jb, w.t4, w.g8, w.tg, w.ks, w.p, w.bx, w.ty, v.n) =
        w.v(w.p % K, w.p / K, BT * w.bx + TG * w.tg + w.g8, w.ty, step * w.ks + w.t4 + 4 * w.jb, v.n);

    // The sums: warp wp's point WP wp + pi, m-tile mt and tile group ni of round rd, over the
    // steps.
    w.rk = RDom(0, max_cin / step, name + "_rk");
    FuncRef a = w.acc(w.t4, w.g8, w.pi, w.mt, w.ni, w.wp, w.rd, w.bx, w.ty, v.n);
    w.acc(w.t4, w.g8, w.pi, w.mt, w.ni, w.wp, w.rd, w.bx, w.ty, v.n) = Tuple(0.0f, 0.0f, 0.0f, 0.0f);
    {
        Expr point = WP * w.wp + w.pi;
        std::vector<Expr> ua, vb;
        // 8 A elements (values, remainders) for the placeholders of presplit operands, 4 for
        // those that split A too (mma_step.h).
        for (int k = 0; k < 4 * shape.u_parts(); k++) {
            ua.push_back(w.uw(k % 4, w.t4 + 4 * w.g8, k / 4, w.rk, point, mtiles * w.rd + w.mt));
        }
        for (int k = 0; k < 2; k++) vb.push_back(w.vf(k, w.t4, w.g8, w.ni, w.rk, point, w.bx, w.ty, v.n));
        w.acc(w.t4, w.g8, w.pi, w.mt, w.ni, w.wp, w.rd, w.bx, w.ty, v.n) = Tuple(mma_step(a, ua, vb));
    }
    // Element 2 eh + el of lane 4 g8 + t4 is the sum of channel g8 + 8 eh of its m-tile and tile
    // 2 t4 + el of its group: so channel c8 + 8 k4 of tile tx is element (el, eh) =
    // (tx % 2, k4 % 2) of lane 4 c8 + (tx % 8) / 2, m-tile k4 / 2, group tx / 8.
    FuncRef sums = w.acc(w.t4, w.g4 + 4 * w.g2, w.pi, w.mt, w.ni, w.wp, w.rd, w.bx, w.ty, v.n);
    w.mfrag(w.el, w.eh, w.t4, w.g4, w.g2, w.pi, w.mt, w.ni, w.wp, w.rd, w.bx, w.ty, v.n) =
        mux(2 * w.eh + w.el, {sums[0], sums[1], sums[2], sums[3]});
    w.m(w.p, w.tx, w.ty, w.k4, w.c8, w.rd, w.bx, v.n) =
        w.mfrag(w.tx % 2, w.k4 % 2, (w.tx % TG) / 2, w.c8 % 4, w.c8 / 4, w.p % WP, w.k4 / 2, w.tx / TG, w.p / WP,
                w.rd, w.bx, w.ty, v.n);

    // The output transform, bias and NaN marking; each thread's running minimum over its
    // channels c8 + 8 k4 of every round (channels past cout left out), a round's two folded first.
    define_winograd2d_output(w.ox, w.poison, w.tiles, w.m, bias, RC * w.rd + 8 * w.k4 + w.c8, cout, w,
                             {w.k4, w.c8, w.rd, w.bx, v.n});
    const Expr none = std::numeric_limits<float>::infinity();  // min_over_channels' identity
    w.rc = RDom(0, w.rounds, name + "_rc");
    w.part(w.c8, w.tx, w.i, w.j, w.bx, w.ty, v.n) = none;
    // part's loaded value first in every nan_min: Halide's fast-math flags let LLVM assume that a
    // computed tile is never NaN and fold is_nan on it (a poisoned tile then fell out of the
    // minimum: tests/test_numerics.cpp, InfinitiesInP25BehaveLikePyTorch), while a value loaded
    // from shared memory stays opaque.
    Expr running = w.part(w.c8, w.tx, w.i, w.j, w.bx, w.ty, v.n);
    for (int k4 = 0; k4 < RC / 8; k4++) {
        Expr tile = w.tiles(w.i, w.j, w.tx, w.ty, k4, w.c8, w.rc, w.bx, v.n);
        running = nan_min(running, select(RC * w.rc + 8 * k4 + w.c8 < cout,
                                          scale.defined() ? tile * scale : tile, none));
    }
    w.part(w.c8, w.tx, w.i, w.j, w.bx, w.ty, v.n) = running;

    // The minimum over the 8 channel groups of pixel (x, y).
    Expr tx = (v.x / T) % BT, bx = v.x / (T * BT), ty = v.y / T;
    w.groups(w.k, v.x, v.y, v.n) = w.part(w.k, tx, v.x % T, v.y % T, bx, ty, v.n);
    Expr mn = w.groups(0, v.x, v.y, v.n);
    for (int k = 1; k < 8; k++) mn = nan_min(mn, w.groups(k, v.x, v.y, v.n));
    w.f(v.x, v.y, v.n) = mn;
    return w;
}

}  // namespace fusedconv::blocks
