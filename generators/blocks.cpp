#include "blocks.h"

#include <functional>
#include <limits>

namespace fusedconv::blocks {

using namespace Halide;

// strict_float: without it Halide compiles floats with LLVM's no-NaN
// fast-math flags, which may fold the NaN tests away.
// One comparison and one select: a when it is NaN or below b, else b (which
// is then NaN, or not above a). The same values, signed zeros included, as
// testing a and b for NaN first and then taking min(a, b) (Halide's float
// min is a < b ? a : b), with a shorter dependency chain through a: a
// running min over channels is such a chain (GPU: 1-2% faster than three
// selects; generators/NOTES.md).
Expr nan_min(Expr a, Expr b) { return strict_float(select(is_nan(a) || a < b, a, b)); }

Expr nan_max(Expr a, Expr b) { return strict_float(select(is_nan(a) || a > b, a, b)); }

// For v, m, lo, hi not NaN, min(max(min(v, m), lo), hi) = min(max(v, lo), upper)
// with upper = min(hi, max(m, lo)): where lo <= m it is a clamp to
// [lo, min(m, hi)] (all hi when hi < lo), and where m < lo every value
// becomes min(lo, hi) = upper. The comparisons are false for NaN v, which
// then passes through; NaN in m, lo or hi makes every value NaN, as the
// chain of NaN-aware min/max does.
Expr min_then_clamp(Expr v, Expr m, Expr lo, Expr hi) {
    Expr bound_is_nan = is_nan(m) || is_nan(lo) || is_nan(hi);
    Expr upper = min(hi, max(m, lo));
    Expr r = select(v < lo, lo, v);
    r = select(r > upper, upper, r);
    return strict_float(select(bound_is_nan, std::numeric_limits<float>::quiet_NaN(), r));
}

Func clamped_input2d(Func input, Expr in_w, Expr in_h, Expr cin, const std::string &name) {
    V v;
    Func src(name);
    src(v.x, v.y, v.c, v.n) = input(clamp(v.x, 0, in_w - 1), clamp(v.y, 0, in_h - 1),
                                    clamp(v.c, 0, cin - 1), v.n);
    return src;
}

Func clamped_weight2d(Func weight, Expr kw, Expr kh, Expr cin, Expr cout,
                      const std::string &name) {
    V v;
    Func w(name);
    w(v.x, v.y, v.z, v.c) = weight(clamp(v.x, 0, kw - 1), clamp(v.y, 0, kh - 1),
                                   clamp(v.z, 0, cin - 1), clamp(v.c, 0, cout - 1));
    return w;
}

Conv conv2d(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr cin, Expr cout,
            Expr in_w, Expr in_h, const std::string &name) {
    V v;
    RDom r(0, kw, 0, kh, 0, cin, name + "_r");
    Func src = clamped_input2d(input, in_w, in_h, cin, name + "_src");
    Func w = clamped_weight2d(weight, kw, kh, cin, cout, name + "_w");
    Func f(name);
    f(v.x, v.y, v.c, v.n) = bias(clamp(v.c, 0, cout - 1));
    f(v.x, v.y, v.c, v.n) += w(r.x, r.y, r.z, v.c) * src(v.x + r.x, v.y + r.y, r.z, v.n);
    return {f, r, src, w};
}

Conv conv3d(Func input, Func weight, Func bias, Expr kw, Expr kh, Expr kd,
            Expr cin, Expr cout, Expr in_w, Expr in_h, Expr in_d, const std::string &name,
            Expr xy_inside) {
    V v;
    RDom r(0, kw, 0, kh, 0, kd, 0, cin, name + "_r");
    Func src(name + "_src"), w(name + "_w");
    Expr x = clamp(v.x, 0, in_w - 1), y = clamp(v.y, 0, in_h - 1);
    if (xy_inside.defined()) {
        x = select(xy_inside, v.x, x);
        y = select(xy_inside, v.y, y);
    }
    src(v.x, v.y, v.z, v.c, v.n) =
        input(x, y, clamp(v.z, 0, in_d - 1), clamp(v.c, 0, cin - 1), v.n);
    w(v.x, v.y, v.z, v.c, v.n) =
        weight(v.x, v.y, v.z, clamp(v.c, 0, cin - 1), clamp(v.n, 0, cout - 1));
    Func f(name);
    f(v.x, v.y, v.z, v.c, v.n) = bias(clamp(v.c, 0, cout - 1));
    f(v.x, v.y, v.z, v.c, v.n) +=
        w(r.x, r.y, r.z, r.w, v.c) * src(v.x + r.x, v.y + r.y, v.z + r.z, r.w, v.n);
    return {f, r, src, w};
}

MinReduce min_over_depth(Func f5, Expr depth, const std::string &name) {
    V v;
    RDom r(0, depth, name + "_r");
    Func f(name);
    f(v.x, v.y, v.c, v.n) = std::numeric_limits<float>::infinity();
    f(v.x, v.y, v.c, v.n) = nan_min(f(v.x, v.y, v.c, v.n), f5(v.x, v.y, r, v.c, v.n));
    return {f, r};
}

MinReduce min_over_channels(Func f4, Expr channels, const std::string &name) {
    V v;
    RDom r(0, channels, name + "_r");
    Func f(name);
    f(v.x, v.y, v.n) = std::numeric_limits<float>::infinity();
    f(v.x, v.y, v.n) = nan_min(f(v.x, v.y, v.n), f4(v.x, v.y, r, v.n));
    return {f, r};
}

Softmax softmax_over_channels(Func f4, Expr channels, const std::string &name) {
    V v;
    Softmax s;
    s.r_max = RDom(0, channels, name + "_rmax");
    s.r_sum = RDom(0, channels, name + "_rsum");
    s.max_c = Func(name + "_max");
    s.exp_c = Func(name + "_exp");
    s.sum_c = Func(name + "_sum");
    s.out = Func(name);
    s.max_c(v.x, v.y, v.n) = -std::numeric_limits<float>::infinity();
    s.max_c(v.x, v.y, v.n) = nan_max(s.max_c(v.x, v.y, v.n), f4(v.x, v.y, s.r_max, v.n));
    s.exp_c(v.x, v.y, v.c, v.n) = exp(f4(v.x, v.y, v.c, v.n) - s.max_c(v.x, v.y, v.n));
    s.sum_c(v.x, v.y, v.n) = 0.0f;
    s.sum_c(v.x, v.y, v.n) += s.exp_c(v.x, v.y, s.r_sum, v.n);
    // One reciprocal a pixel and a product an element (within 1.5 ulp of the quotient; the sum
    // is in [1, channels] wherever it is finite). strict_float keeps LLVM's reassociation from
    // folding the product back into a division an element.
    s.out(v.x, v.y, v.c, v.n) =
        strict_float(s.exp_c(v.x, v.y, v.c, v.n) * (1.0f / s.sum_c(v.x, v.y, v.n)));
    return s;
}

// Chan's combination of a group's partial statistics {mean, m2} into its
// mean and M2, and `groups`. partial(r, c) is the partial at RDom point r
// (whose last dimension is the channel within the group) of channel c, and
// weight(r) its number of values; `first` is the group's first partial. The
// means are summed relative to first's, so the float32 sum holds small
// deviations instead of growing to partials * mean: weighted by weight(r)
// over `total` values, or, with `equal_partials`, unweighted over
// `partials` (every partial of one size).
static void chan_combine(GroupNormStats &s, const Tuple &first,
                         const std::function<Tuple(const RDom &, Expr)> &partial,
                         const std::function<Expr(const RDom &)> &weight, bool equal_partials,
                         Expr partials, Expr total, Expr channels_per_group, Expr eps) {
    V v;
    auto channel = [&](const RDom &r) { return v.g * channels_per_group + r[r.dimensions() - 1]; };
    const RDom &rm = s.r_mean;
    Expr shift = first[0];
    Expr dm = partial(rm, channel(rm))[0] - shift;
    s.mean(v.g, v.n) = 0.0f;
    s.mean(v.g, v.n) += equal_partials ? dm : weight(rm) * dm;
    s.mean(v.g, v.n) = shift + s.mean(v.g, v.n) / (equal_partials ? partials : total);

    const RDom &r2 = s.r_m2;
    Tuple p2 = partial(r2, channel(r2));
    Expr dev = p2[0] - s.mean(v.g, v.n);
    s.m2(v.g, v.n) = 0.0f;
    s.m2(v.g, v.n) += p2[1] + weight(r2) * dev * dev;
    s.groups(v.g, v.n) = {s.mean(v.g, v.n), 1.0f / sqrt(s.m2(v.g, v.n) / total + eps)};
}

GroupNormStats groupnorm_stats(Func f5, Expr width, Expr height, Expr depth,
                               Expr channels_per_group, Expr eps, const std::string &name) {
    V v;
    GroupNormStats s;
    s.r_col = RDom(0, height, name + "_rcol");
    s.r_mean = RDom(0, width, 0, depth, 0, channels_per_group, name + "_rmean");
    s.r_m2 = RDom(0, width, 0, depth, 0, channels_per_group, name + "_rm2");
    s.cols = Func(name + "_cols");
    s.mean = Func(name + "_mean");
    s.m2 = Func(name + "_m2");
    s.groups = Func(name + "_groups");

    // Welford: after k values, mean_k = mean + (v - mean) / k and
    // m2_k = m2 + (v - mean) * (v - mean_k). The step multiplies by 1 / k,
    // which depends on the row only: a schedule that walks several columns
    // together shares one reciprocal among them instead of one IEEE division
    // each (the division made the GPU statistics kernel instruction-bound).
    s.cols(v.x, v.z, v.c, v.n) = {0.0f, 0.0f};
    Expr val = f5(v.x, s.r_col, v.z, v.c, v.n);
    Expr old_mean = s.cols(v.x, v.z, v.c, v.n)[0];
    Expr new_mean = old_mean + (val - old_mean) * (1.0f / cast<float>(s.r_col + 1));
    s.cols(v.x, v.z, v.c, v.n) = {new_mean,
                                  s.cols(v.x, v.z, v.c, v.n)[1] + (val - old_mean) * (val - new_mean)};

    Expr cols_per_group = cast<float>(width * depth * channels_per_group);
    chan_combine(
        s, Tuple(s.cols(0, 0, v.g * channels_per_group, v.n)),
        [&](const RDom &r, Expr c) { return Tuple(s.cols(r.x, r.y, c, v.n)); },
        [&](const RDom &) { return cast<float>(height); }, true, cols_per_group,
        cast<float>(height) * cols_per_group, channels_per_group, eps);
    return s;
}

GroupNormStats groupnorm_stats_by_pieces(Func f5, Expr width, Expr height, Expr depth,
                                         Expr channels_per_group, Expr eps, int piece_w,
                                         int piece_h, const std::string &name) {
    V v;
    GroupNormStats s;
    const Var &px = v.x, &py = v.y;  // the piece's index
    Expr pieces_x = (width + piece_w - 1) / piece_w, pieces_y = (height + piece_h - 1) / piece_h;
    s.r_col = RDom(0, piece_w, 0, piece_h, name + "_rpiece");
    s.r_mean = RDom(0, pieces_x, 0, pieces_y, 0, depth, 0, channels_per_group, name + "_rmean");
    s.r_m2 = RDom(0, pieces_x, 0, pieces_y, 0, depth, 0, channels_per_group, name + "_rm2");
    s.piece_sums = Func(name + "_piece_sums");
    s.cols = Func(name + "_pieces");
    s.mean = Func(name + "_mean");
    s.m2 = Func(name + "_m2");
    s.groups = Func(name + "_groups");

    // The sums over the piece's pixels, a reduction that a schedule unrolls
    // (each pixel's deviation then read once by both sums).
    Expr x0 = px * piece_w, y0 = py * piece_h;
    Expr first = f5(x0, y0, v.z, v.c, v.n);
    const RDom &r = s.r_col;
    Expr d = select(x0 + r.x < width && y0 + r.y < height,
                    f5(x0 + r.x, y0 + r.y, v.z, v.c, v.n) - first, 0.0f);
    s.piece_sums(px, py, v.z, v.c, v.n) = {0.0f, 0.0f};
    s.piece_sums(px, py, v.z, v.c, v.n) = {s.piece_sums(px, py, v.z, v.c, v.n)[0] + d,
                                           s.piece_sums(px, py, v.z, v.c, v.n)[1] + d * d};
    auto count = [&](Expr ix, Expr iy) {
        return cast<float>(min(width - ix * piece_w, piece_w) * min(height - iy * piece_h, piece_h));
    };
    Expr k = count(px, py);
    Expr s1 = s.piece_sums(px, py, v.z, v.c, v.n)[0], s2 = s.piece_sums(px, py, v.z, v.c, v.n)[1];
    s.cols(px, py, v.z, v.c, v.n) = {first + s1 / k, s2 - s1 * (s1 / k)};

    chan_combine(
        s, Tuple(s.cols(0, 0, 0, v.g * channels_per_group, v.n)),
        [&](const RDom &r, Expr c) { return Tuple(s.cols(r.x, r.y, r.z, c, v.n)); },
        [&](const RDom &r) { return count(r.x, r.y); }, false, Expr(),
        cast<float>(width * height * depth * channels_per_group), channels_per_group, eps);
    return s;
}

Expr groupnorm_apply(Func f5, const GroupNormStats &s, Func gamma, Func beta,
                     Expr channels_per_group, Expr x, Expr y, Expr z, Expr c, Expr n) {
    Expr g = c / channels_per_group;
    return (f5(x, y, z, c, n) - s.groups(g, n)[0]) * s.groups(g, n)[1] * gamma(c) + beta(c);
}

Expr u32(uint32_t value) { return Internal::make_const(UInt(32), value); }

Expr hash32(Expr v) {
    v = cast<uint32_t>(v);
    v = v ^ (v >> 16);
    v = v * u32(0x7feb352du);
    v = v ^ (v >> 15);
    v = v * u32(0x846ca68bu);
    v = v ^ (v >> 16);
    return v;
}

Expr draw24(Expr seed, Expr index) {
    return hash32(cast<uint32_t>(index) + hash32(cast<uint32_t>(seed) ^ u32(0x9e3779b9u))) >> 8;
}

Expr dropout(Expr v, Expr index, Expr seed, Expr p, Expr training) {
    // draw * 2^-24 >= p, compared as integers: for 0 < p <= 1, p * 2^24 is
    // exact and the draw an integer, so the test is draw >= ceil(p * 2^24);
    // p <= 0 keeps every element, p > 1 and NaN none (2^24 is above every
    // draw). The threshold is a scalar, computed once. (A float comparison
    // would keep every element for a NaN p under Halide's fast-math.)
    Expr never = u32(1u << 24);
    Expr threshold = strict_float(
        select(is_nan(p) || p > 1.0f, never, p <= 0.0f, u32(0),
               cast<uint32_t>(ceil(clamp(p, 0.0f, 1.0f) * 16777216.0f))));
    Expr keep = draw24(seed, index) >= threshold;
    // Survivors are exactly v / (1 - p) (float32 division, correctly
    // rounded); dropped ones are v * 0 (NaN stays NaN). The quotient is
    // computed as float(double(v) * r) with r = 1 / double(1 - p) rounded to
    // double: that product is within 2^-52 (relative) of v / (1 - p), and a
    // quotient of two floats is either a float32 rounding midpoint exactly
    // (impossible: a midpoint has a 25-bit odd significand) or at least
    // 2^-50 away from one, so rounding it to float32 gives the correctly
    // rounded quotient. On the GPU the IEEE float32 division is a
    // refinement sequence with a slow-path branch; this is three
    // instructions (p83's output kernel: 0.34 ms against 0.45, H200).
    Expr d = 1.0f - p;
    Expr r = Internal::make_const(Float(64), 1.0) / cast<double>(d);
    Expr quotient = strict_float(cast<float>(cast<double>(v) * r));
    return select(training, select(keep, quotient, strict_float(v * 0.0f)), v);
}

}  // namespace fusedconv::blocks
