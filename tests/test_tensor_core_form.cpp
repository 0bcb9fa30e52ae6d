// p25's F(4x4, 3x3) form on tensor cores (generators/winograd2d_tensor_core.h), called directly
// on the GPU (its module spliced by the runtime's hooks), against float64:
// - the conv-min without the epilogue (block_conv2d_min_tc): the error of every output within
//   the conditioning bound of test_winograd_accuracy.cpp, 32 times n eps cond, where the
//   minimum over channels carries the conv's error over (|min a - min b| <= max |a - b|), so
//   cond is the largest over the output channels of |b| + sum |w| |x|; and, as that test's
//   selection rule, within 32 times the direct form's measured error (block_conv2d on the CPU,
//   its minimum taken exactly);
// - p25 itself (p25_tc_cuda) within 1e-5 of float64 at the model's default init;
// - shapes that are no multiple of the kernel's blocks (64 x 4 pixels), rounds (16 output
//   channels) or steps (8 input channels), batch 1 and 3;
// - NaN and infinities: the samples that hold one come out with NaN (the runtime recomputes
//   them in the direct form, test_numerics.cpp checks the result), the others untouched.
// Skipped without a GPU with tf32 tensor cores.
#include "cuda_context.h"
#include "fusedconv/device.h"
#include "block_conv2d.h"
#include "block_conv2d_min_tc.h"
#include "conv2d_case.h"
#include "p25_tc_cuda.h"
#include "p32_tc_cuda.h"

#include "HalideBuffer.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>

namespace {

using Halide::Runtime::Buffer;

using Problem = fusedconv::testutil::Conv2dProblem;
using Case = fusedconv::testutil::Conv2dBuffers;
constexpr auto make_case = fusedconv::testutil::make_conv2d_buffers;

bool tensor_cores() { return fusedconv::gpu_available() && fusedconv::cuda::has_tf32_tensor_cores(0); }

#define REQUIRE_TENSOR_CORES()                                                                        \
    do {                                                                                              \
        if (!tensor_cores()) GTEST_SKIP() << "no CUDA device with tf32 tensor cores";                 \
    } while (0)

// The output (x, y, 1, n) on the host of p25 (p25_tc_cuda) or of the conv-min alone.
Buffer<float> run_tc(Case &c, bool p25 = true) {
    Buffer<float> out(c.x.dim(0).extent() - 2, c.x.dim(1).extent() - 2, 1, c.x.dim(3).extent());
    c.x.set_host_dirty();
    c.wt.set_host_dirty();
    c.b.set_host_dirty();
    EXPECT_EQ(p25 ? fusedconv_p25_tc_cuda(c.x, c.wt, c.b, out) : fusedconv_block_conv2d_min_tc(c.x, c.wt, c.b, out), 0);
    out.copy_to_host();
    return out;
}

// The float64 conv-min at (x, y, n), and its cond (above) in *cond.
double conv_min(const Case &c, int x, int y, int n, double *cond) {
    const int Cin = c.x.dim(2).extent(), Co = c.wt.dim(3).extent();
    double mn = INFINITY;
    *cond = 0;
    for (int co = 0; co < Co; co++) {
        double s = c.b(co), a = std::fabs(c.b(co));
        for (int ci = 0; ci < Cin; ci++)
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    const double w = c.wt(kx, ky, ci, co), v = c.x(x + kx, y + ky, ci, n);
                    s += w * v;
                    a += std::fabs(w * v);
                }
        mn = std::min(mn, s);
        *cond = std::max(*cond, a);
    }
    return mn;
}

// The float32 direct form's conv-min (block_conv2d, then the minimum, which is exact).
Buffer<float> direct_min(Case &c) {
    Buffer<float> conv(c.x.dim(0).extent() - 2, c.x.dim(1).extent() - 2, c.wt.dim(3).extent(), c.x.dim(3).extent());
    EXPECT_EQ(fusedconv_block_conv2d(c.x, c.wt, c.b, conv), 0);
    Buffer<float> out(conv.dim(0).extent(), conv.dim(1).extent(), 1, conv.dim(3).extent());
    out.for_each_element([&](int x, int y, int, int n) {
        float mn = INFINITY;
        for (int co = 0; co < conv.dim(2).extent(); co++) mn = std::min(mn, conv(x, y, co, n));
        out(x, y, 0, n) = mn;
    });
    return out;
}

// The largest error of a conv-min as a multiple of n eps cond, over every output.
double amplification(Case &c, const Buffer<float> &out) {
    const double terms = 9.0 * c.x.dim(2).extent() + 1;
    double worst = 0;
    out.for_each_element([&](int x, int y, int, int n) {
        double cond;
        const double want = conv_min(c, x, y, n, &cond), got = out(x, y, 0, n);
        EXPECT_TRUE(std::isfinite(got)) << "at x " << x << ", y " << y << ", n " << n;
        worst = std::max(worst, std::fabs(got - want) / (terms * (FLT_EPSILON / 2) * cond));
    });
    return worst;
}

// p32's output (x, y, 1, n) on the host (p32_tc_cuda: up to 64 input channels staged).
Buffer<float> run_p32_tc(Case &c, float scale) {
    Buffer<float> out(c.x.dim(0).extent() - 2, c.x.dim(1).extent() - 2, 1, c.x.dim(3).extent());
    c.x.set_host_dirty();
    c.wt.set_host_dirty();
    c.b.set_host_dirty();
    EXPECT_EQ(fusedconv_p32_tc_cuda(c.x, c.wt, c.b, scale, out), 0);
    out.copy_to_host();
    return out;
}

// The tensor-core conv-min: p25's library without its epilogue up to 16 input channels, beyond
// p32's with a scale of 1.
Buffer<float> conv_min_tc(Case &c) { return c.x.dim(2).extent() <= 16 ? run_tc(c, false) : run_p32_tc(c, 1.0f); }

// The float64 conv of output channel co at (x, y, n), bias included.
double conv_at(const Case &c, int x, int y, int co, int n) {
    double s = c.b(co);
    for (int ci = 0; ci < c.x.dim(2).extent(); ci++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) s += double(c.wt(kx, ky, ci, co)) * c.x(x + kx, y + ky, ci, n);
    return s;
}

class TensorCoreAccuracy : public ::testing::TestWithParam<Problem> {};

TEST_P(TensorCoreAccuracy, ErrorWithinConditioningBound) {
    REQUIRE_TENSOR_CORES();
    const Problem p = GetParam();
    for (uint32_t seed : {1u, 2u}) {
        Case c = make_case(p, seed);
        const double a = amplification(c, conv_min_tc(c)), direct = amplification(c, direct_min(c));
        std::printf("[ accuracy ] n=%d cin=%d cout=%d %dx%d x in [%g, %g) seed %u: largest error of the "
                    "conv-min / (n eps cond): direct %.4f, tensor cores %.4f\n",
                    p.n, p.cin, p.cout, p.h, p.w, p.x_lo, p.x_hi, seed, direct, a);
        EXPECT_LE(a, 32.0);
        EXPECT_LE(a, 32.0 * direct);
    }
}

// p25's channels on odd sizes (two blocks along x, a partial row of blocks); 17 and 33 output
// channels (a round with one channel); fewer input channels than a step; batch 1, 2 and 3; the
// smallest input; inputs as the model's default and of large magnitude; p32's 64 input
// channels and 33 (p32's library, its steps past the first 16).
INSTANTIATE_TEST_SUITE_P(
    Shapes, TensorCoreAccuracy,
    ::testing::Values(Problem{1, 16, 64, 21, 70, 0.f, 1.f}, Problem{2, 16, 17, 13, 19, -500.f, 500.f},
                      Problem{1, 3, 5, 7, 6, -1.f, 1.f}, Problem{3, 9, 33, 10, 67, 0.f, 1.f},
                      Problem{1, 1, 1, 3, 3, -1.f, 1.f}, Problem{1, 16, 16, 6, 131, -500.f, 500.f},
                      Problem{1, 64, 128, 10, 37, -500.f, 500.f}, Problem{2, 33, 40, 9, 70, 0.f, 1.f}));

TEST(TensorCoreForm, P25MatchesFloat64) {
    REQUIRE_TENSOR_CORES();
    Case c = make_case({2, 16, 64, 13, 74, -1.f, 1.f}, 3);
    const Buffer<float> out = run_tc(c);
    double worst = 0;
    out.for_each_element([&](int x, int y, int, int n) {
        double cond;
        worst = std::max(worst, std::fabs(out(x, y, 0, n) - std::tanh(std::tanh(conv_min(c, x, y, n, &cond)))));
    });
    std::printf("[ accuracy ] tensor cores p25, 2 x 16 x 13 x 74 -> 64 channels: max abs error %.3g\n", worst);
    EXPECT_LE(worst, 1e-5);
}

// p32 (p32_tc_cuda: up to 64 input channels staged, the minimum of the conv times scale)
// against float64, for a scale of either sign, with 40 input channels (5 steps) and 20 output
// channels (two rounds of 16, the second's last 12 past cout), odd sizes. Within 2e-5, a fifth
// of the project's 1e-4: with the operands' remainders truncated by the mma (mma_splice.cpp) and
// u split at the steps the largest error here is 1.36e-5 at scale 2 (H200), against 8.0e-6 with
// them rounded and u split ahead; the bound relative to the conditioning is TensorCoreAccuracy's.
TEST(TensorCoreForm, P32MatchesFloat64) {
    REQUIRE_TENSOR_CORES();
    for (float scale : {2.0f, -1.5f}) {
        SCOPED_TRACE(scale);
        Case c = make_case({2, 40, 20, 11, 70, -1.f, 1.f}, 7);
        const Buffer<float> out = run_p32_tc(c, scale);
        double worst = 0;
        out.for_each_element([&](int x, int y, int, int n) {
            double want = INFINITY;
            for (int co = 0; co < 20; co++) want = std::min(want, conv_at(c, x, y, co, n) * scale);
            worst = std::max(worst, std::fabs(out(x, y, 0, n) - want));
        });
        std::printf("[ accuracy ] tensor cores p32, 2 x 40 x 11 x 70 -> 20 channels, scale %g: max abs error %.3g\n",
                    scale, worst);
        EXPECT_LE(worst, 2e-5);
    }
}

// A NaN or an infinity marks its own sample only: every output there whose tiles reach it is
// NaN (the runtime then recomputes the sample), and the other samples are unchanged.
TEST(TensorCoreForm, NonFiniteInputsMarkTheirSamples) {
    REQUIRE_TENSOR_CORES();
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
        SCOPED_TRACE(bad);
        Case clean = make_case({3, 16, 20, 12, 70, -1.f, 1.f}, 5);
        const Buffer<float> want = run_tc(clean);
        Case c = make_case({3, 16, 20, 12, 70, -1.f, 1.f}, 5);
        c.x(33, 5, 7, 1) = bad;
        const Buffer<float> got = run_tc(c);
        int nan = 0;
        got.for_each_element([&](int x, int y, int, int n) {
            if (n != 1) {
                EXPECT_EQ(got(x, y, 0, n), want(x, y, 0, n)) << "at x " << x << ", y " << y << ", n " << n;
            } else if (std::isnan(got(x, y, 0, n))) {
                nan++;
            }
        });
        // The input's pixel lies in the windows of outputs x 31..33, y 3..5, of tiles x 28..35,
        // y 0..7: at least those 9 outputs are NaN.
        EXPECT_GE(nan, 9);
        for (int y = 3; y <= 5; y++)
            for (int x = 31; x <= 33; x++) EXPECT_TRUE(std::isnan(got(x, y, 0, 1))) << x << ", " << y;
    }
}

// Infinities in a few channels (3 in, 5 out: most of a round's channels past cout), apart and
// with overlapping windows: every output where some channel's float64 conv is not finite is
// NaN, so that the runtime recomputes its sample (a tile marked NaN once fell out of the
// minimum there: schedules/NOTES.md).
TEST(TensorCoreForm, InfinitiesAmongFewChannelsMarkTheirOutputs) {
    REQUIRE_TENSOR_CORES();
    for (int variant = 0; variant < 4; variant++) {
        SCOPED_TRACE("variant " + std::to_string(variant));
        Case c = make_case({2, 3, 5, 9, 10, 0.f, 1.f}, 42);
        if (variant == 0 || variant == 3) c.x(2, 2, 0, 0) = INFINITY;
        if (variant == 1 || variant == 3) c.x(3, 3, 2, 0) = -INFINITY;
        if (variant == 2 || variant == 3) {
            c.x(0, 8, 1, 0) = INFINITY;
            c.x(9, 0, 0, 0) = -INFINITY;
        }
        const Buffer<float> got = run_tc(c, false);
        int marked = 0;
        got.for_each_element([&](int x, int y, int, int n) {
            bool finite = true;
            for (int co = 0; co < c.wt.dim(3).extent(); co++) finite = finite && std::isfinite(conv_at(c, x, y, co, n));
            if (!finite) {
                marked++;
                EXPECT_TRUE(std::isnan(got(x, y, 0, n))) << "at x " << x << ", y " << y << ", n " << n << ": " << got(x, y, 0, n);
            } else if (n == 1) {
                EXPECT_TRUE(std::isfinite(got(x, y, 0, n))) << "at x " << x << ", y " << y;
            }
        });
        EXPECT_GT(marked, 0);
    }
}

}  // namespace
