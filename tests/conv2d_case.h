// A random conv2d case with 3x3 kernels for the Winograd forms' accuracy tests
// (test_winograd_accuracy, test_tensor_core_form): inputs uniform in [x_lo, x_hi), weights and
// bias as PyTorch's default init (uniform within 1 / sqrt(9 Cin)), all from one seeded engine.
#pragma once

#include "HalideBuffer.h"

#include <cmath>
#include <cstdint>
#include <random>

namespace fusedconv::testutil {

struct Conv2dProblem {
    int n, cin, cout, h, w;
    float x_lo, x_hi;  // the inputs' range; weights and bias: PyTorch's default init
};

struct Conv2dBuffers {
    Halide::Runtime::Buffer<float> x, wt, b;  // (x, y, ci, n), (kx, ky, ci, co), (co)
};

inline Conv2dBuffers make_conv2d_buffers(const Conv2dProblem &p, uint32_t seed) {
    std::mt19937 rng(seed);
    const float bound = 1.0f / std::sqrt(9.0f * p.cin);
    std::uniform_real_distribution<float> ux(p.x_lo, p.x_hi), uw(-bound, bound);
    Conv2dBuffers c{Halide::Runtime::Buffer<float>(p.w, p.h, p.cin, p.n),
                    Halide::Runtime::Buffer<float>(3, 3, p.cin, p.cout), Halide::Runtime::Buffer<float>(p.cout)};
    c.x.for_each_value([&](float &v) { v = ux(rng); });
    c.wt.for_each_value([&](float &v) { v = uw(rng); });
    c.b.for_each_value([&](float &v) { v = uw(rng); });
    return c;
}

}  // namespace fusedconv::testutil
