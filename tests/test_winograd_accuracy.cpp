// The Winograd forms' float32 error against float64, bounded by each
// output's conditioning. For an output y = b + sum over the window of w * x
// (n = 9 * Cin + 1 terms), float32 summation in any order is within
// n * eps * cond of the exact value, cond = |b| + sum |w| |x| (the direct
// form's worst-case bound). The Winograd forms add the rounding of their
// transforms, whose coefficients reach 8 (along x) and 8 x 8 (in both
// dimensions). The same holds for p83's conv3d (n = 27 Cin + 1), whose
// F(4x4, 3x3) form sums over (depth tap, channel) in the transform domain.
// Each form's largest error is measured as a multiple of that
// bound; a form the schedules may select must stay within 32 times the
// direct form's bound and 32 times the direct form's measured error (its
// amplification), and the measured factors are printed for the README.
#include "block_conv2d.h"
#include "block_conv3d.h"
#include "block_winograd3d_xy.h"
#include "block_winograd_x.h"
#include "block_winograd_xy.h"

#include "HalideBuffer.h"
#include "conv2d_case.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

namespace {

using Halide::Runtime::Buffer;
using fusedconv::reference::HostTensor;

enum class Form { Direct, X, XY };
const char *name(Form f) { return f == Form::Direct ? "direct" : f == Form::X ? "x" : "xy"; }

using Problem = fusedconv::testutil::Conv2dProblem;

struct Case : fusedconv::testutil::Conv2dBuffers {
    HostTensor xr, wr, br;
};

Case make_case(const Problem &p, uint32_t seed) {
    Case c{fusedconv::testutil::make_conv2d_buffers(p, seed), {}, {}, {}};
    c.xr = fusedconv::reference::from_float({p.n, p.cin, p.h, p.w}, c.x.data());
    c.wr = fusedconv::reference::from_float({p.cout, p.cin, 3, 3}, c.wt.data());
    c.br = fusedconv::reference::from_float({p.cout}, c.b.data());
    return c;
}

Buffer<float> run(Form f, Case &c) {
    Buffer<float> out(c.x.dim(0).extent() - 2, c.x.dim(1).extent() - 2, c.wt.dim(3).extent(),
                      c.x.dim(3).extent());
    int rc = f == Form::Direct ? fusedconv_block_conv2d(c.x, c.wt, c.b, out)
             : f == Form::X    ? fusedconv_block_winograd_x(c.x, c.wt, c.b, out)
                               : fusedconv_block_winograd_xy(c.x, c.wt, c.b, out);
    EXPECT_EQ(rc, 0);
    return out;
}

// The largest error of `f` as a multiple of n * eps * cond, over every output.
double amplification(Form f, Case &c) {
    const Buffer<float> out = run(f, c);
    const HostTensor ref = fusedconv::reference::conv(c.xr, c.wr, c.br);
    const int64_t N = c.x.dim(3).extent(), Cin = c.x.dim(2).extent(), Co = c.wt.dim(3).extent();
    const int64_t H = out.dim(1).extent(), W = out.dim(0).extent();
    const double terms = 9.0 * Cin + 1;
    double worst = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t co = 0; co < Co; co++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++) {
                    double cond = std::fabs(c.br.values[co]);
                    for (int64_t ci = 0; ci < Cin; ci++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++)
                                cond += std::fabs(c.wr.at({co, ci, ky, kx})) *
                                        std::fabs(c.xr.at({n, ci, y + ky, x + kx}));
                    const double got = out(x, y, co, n), want = ref.at({n, co, y, x});
                    const double err = std::fabs(got - want);
                    EXPECT_TRUE(std::isfinite(got)) << name(f) << " at " << n << "," << co
                                                    << "," << y << "," << x;
                    worst = std::max(worst, err / (terms * (FLT_EPSILON / 2) * cond));
                }
    return worst;
}

class WinogradAccuracy : public ::testing::TestWithParam<Problem> {};

// Each form within its bound on every output; the measured factors printed.
TEST_P(WinogradAccuracy, ErrorWithinConditioningBound) {
    const Problem p = GetParam();
    for (uint32_t seed : {1u, 2u}) {
        Case c = make_case(p, seed);
        const double direct = amplification(Form::Direct, c);
        const double x = amplification(Form::X, c), xy = amplification(Form::XY, c);
        std::printf("[ accuracy ] n=%d cin=%d cout=%d %dx%d x in [%g, %g) seed %u: largest "
                    "error / (n eps cond): direct %.4f, x %.4f, xy %.4f\n",
                    p.n, p.cin, p.cout, p.h, p.w, p.x_lo, p.x_hi, seed, direct, x, xy);
        // Summation in float32 never exceeds its worst case.
        EXPECT_LE(direct, 1.0);
        // The selection rule: at most 32 times the direct form's bound, and
        // at most 32 times the direct form's measured error.
        EXPECT_LE(x, 32.0) << "the form along x";
        EXPECT_LE(xy, 32.0) << "F(4x4, 3x3)";
        EXPECT_LE(x, 32.0 * direct) << "the form along x";
        EXPECT_LE(xy, 32.0 * direct) << "F(4x4, 3x3)";
    }
}

// Sizes not multiples of the 4x4 tiles, batch 1, Cin of p25 and p32; inputs
// as the models' default (U[0, 1)) and of large magnitude (U[-500, 500)).
INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradAccuracy,
    ::testing::Values(Problem{1, 16, 8, 21, 19, 0.f, 1.f}, Problem{2, 16, 8, 21, 19, -500.f, 500.f},
                      Problem{1, 64, 4, 14, 15, 0.f, 1.f}, Problem{1, 64, 4, 14, 15, -500.f, 500.f},
                      Problem{1, 3, 5, 7, 6, -1.f, 1.f}));

// ---------------------------------------------------------------- conv3d

struct Problem3 {
    int n, cin, cout, d, h, w;
    float x_lo, x_hi;
};

struct Case3 {
    Buffer<float> x, wt, b;
    HostTensor xr, wr, br;
};

Case3 make_case3(const Problem3 &p, uint32_t seed) {
    std::mt19937 rng(seed);
    const float bound = 1.0f / std::sqrt(27.0f * p.cin);
    std::uniform_real_distribution<float> ux(p.x_lo, p.x_hi), uw(-bound, bound);
    Case3 c{Buffer<float>(p.w, p.h, p.d, p.cin, p.n), Buffer<float>(3, 3, 3, p.cin, p.cout),
            Buffer<float>(p.cout), {}, {}, {}};
    c.x.for_each_value([&](float &v) { v = ux(rng); });
    c.wt.for_each_value([&](float &v) { v = uw(rng); });
    c.b.for_each_value([&](float &v) { v = uw(rng); });
    c.xr = fusedconv::reference::from_float({p.n, p.cin, p.d, p.h, p.w}, c.x.data());
    c.wr = fusedconv::reference::from_float({p.cout, p.cin, 3, 3, 3}, c.wt.data());
    c.br = fusedconv::reference::from_float({p.cout}, c.b.data());
    return c;
}

Buffer<float> run3(Form f, Case3 &c) {
    Buffer<float> out(c.x.dim(0).extent() - 2, c.x.dim(1).extent() - 2, c.x.dim(2).extent() - 2,
                      c.wt.dim(4).extent(), c.x.dim(4).extent());
    int rc = f == Form::Direct ? fusedconv_block_conv3d(c.x, c.wt, c.b, out)
                               : fusedconv_block_winograd3d_xy(c.x, c.wt, c.b, out);
    EXPECT_EQ(rc, 0);
    return out;
}

double amplification3(Form f, Case3 &c) {
    const Buffer<float> out = run3(f, c);
    const HostTensor ref = fusedconv::reference::conv(c.xr, c.wr, c.br);
    const int64_t N = c.x.dim(4).extent(), Cin = c.x.dim(3).extent(), Co = c.wt.dim(4).extent();
    const int64_t D = out.dim(2).extent(), H = out.dim(1).extent(), W = out.dim(0).extent();
    const double terms = 27.0 * Cin + 1;
    double worst = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t co = 0; co < Co; co++)
            for (int64_t z = 0; z < D; z++)
                for (int64_t y = 0; y < H; y++)
                    for (int64_t x = 0; x < W; x++) {
                        double cond = std::fabs(c.br.values[co]);
                        for (int64_t ci = 0; ci < Cin; ci++)
                            for (int kz = 0; kz < 3; kz++)
                                for (int ky = 0; ky < 3; ky++)
                                    for (int kx = 0; kx < 3; kx++)
                                        cond += std::fabs(c.wr.at({co, ci, kz, ky, kx})) *
                                                std::fabs(c.xr.at({n, ci, z + kz, y + ky, x + kx}));
                        const double got = out(x, y, z, co, n), want = ref.at({n, co, z, y, x});
                        EXPECT_TRUE(std::isfinite(got)) << name(f) << " at " << n << "," << co
                                                        << "," << z << "," << y << "," << x;
                        worst = std::max(worst, std::fabs(got - want) /
                                                    (terms * (FLT_EPSILON / 2) * cond));
                    }
    return worst;
}

class Winograd3DAccuracy : public ::testing::TestWithParam<Problem3> {};

TEST_P(Winograd3DAccuracy, ErrorWithinConditioningBound) {
    const Problem3 p = GetParam();
    for (uint32_t seed : {1u, 2u}) {
        Case3 c = make_case3(p, seed);
        const double direct = amplification3(Form::Direct, c), xy = amplification3(Form::XY, c);
        std::printf("[ accuracy ] conv3d n=%d cin=%d cout=%d %dx%dx%d x in [%g, %g) seed %u: "
                    "largest error / (n eps cond): direct %.4f, xy %.4f\n",
                    p.n, p.cin, p.cout, p.d, p.h, p.w, p.x_lo, p.x_hi, seed, direct, xy);
        EXPECT_LE(direct, 1.0);
        EXPECT_LE(xy, 32.0) << "F(4x4, 3x3) over x and y";
        EXPECT_LE(xy, 32.0 * direct) << "F(4x4, 3x3) over x and y";
    }
}

// p83's Cin (3) and 1, sizes not multiples of the 4x4 tiles, batch 1 and 2;
// inputs as the model's default (U[0, 1)) and of large magnitude.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Winograd3DAccuracy,
    ::testing::Values(Problem3{1, 3, 16, 6, 13, 11, 0.f, 1.f},
                      Problem3{2, 3, 5, 5, 10, 9, -500.f, 500.f},
                      Problem3{1, 1, 3, 4, 7, 6, -1.f, 1.f}));

// A NaN in the input makes NaN every output of the 4x4 tiles whose 6x6
// patch holds it (the runtime recomputes those in the direct form), and
// nothing outside those tiles.
TEST(Winograd2D, NaNPoisonsExactlyTheTilesWhosePatchHoldsIt) {
    Case c = make_case({1, 2, 3, 14, 13, 0.f, 1.f}, 7);
    const int nx = 6, ny = 9;
    c.x(nx, ny, 1, 0) = NAN;
    const Buffer<float> out = run(Form::XY, c);
    for (int co = 0; co < 3; co++)
        for (int y = 0; y < out.dim(1).extent(); y++)
            for (int x = 0; x < out.dim(0).extent(); x++) {
                const int tx = x / 4, ty = y / 4;
                const bool in_patch = nx >= 4 * tx && nx < 4 * tx + 6 && ny >= 4 * ty &&
                                      ny < 4 * ty + 6;
                EXPECT_EQ(std::isnan(out(x, y, co, 0)), in_patch) << x << "," << y << "," << co;
            }
}

// Sums whose output transform could overflow are NaN, not a wrong finite value.
TEST(Winograd2D, OverflowingTileIsNaN) {
    Case c = make_case({1, 1, 1, 6, 6, 0.f, 1.f}, 3);
    c.x(2, 2, 0, 0) = 3e37f;
    c.wt.fill(1.0f);
    const Buffer<float> out = run(Form::XY, c);
    int nan = 0;
    out.for_each_value([&](float v) { nan += std::isnan(v); });
    EXPECT_EQ(nan, 16);
}

}  // namespace
