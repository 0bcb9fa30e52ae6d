// Runs p32 (Conv2d -> * scale -> min over channels) on the CPU on a small
// random input and checks it against a float64 computation written out here.
#include <fusedconv/models.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
    using namespace fusedconv;
    const int cin = 3, cout = 4, k = 3;
    const float scale = 2.0f;
    Conv2dScaleMin model(cin, cout, k, scale, DeviceChoice::CPU, /*seed=*/1);

    const int N = 2, H = 5, W = 7;
    std::vector<float> x(N * cin * H * W);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float &v : x) v = dist(rng);
    Tensor input = Tensor::from_vector({N, cin, H, W}, x);

    Tensor output = model.forward(input);  // (N, 1, H - k + 1, W - k + 1)
    const int OH = H - k + 1, OW = W - k + 1;
    if (output.shape() != Shape{N, 1, OH, OW}) {
        std::printf("fusedconv example: output shape %s: FAIL\n", shape_string(output.shape()).c_str());
        return 1;
    }
    std::vector<float> y = output.to_vector();

    // float64: out[n, 0, i, j] = min over c of scale * (b[c] + sum w[c, ci, dy, dx] * x[...]).
    const std::vector<float> w = model.conv_weight().to_vector(), b = model.conv_bias().to_vector();
    double max_err = 0;
    for (int n = 0; n < N; ++n)
        for (int i = 0; i < OH; ++i)
            for (int j = 0; j < OW; ++j) {
                double best = INFINITY;
                for (int c = 0; c < cout; ++c) {
                    double acc = b[c];
                    for (int ci = 0; ci < cin; ++ci)
                        for (int dy = 0; dy < k; ++dy)
                            for (int dx = 0; dx < k; ++dx)
                                acc += double(w[((c * cin + ci) * k + dy) * k + dx]) *
                                       x[((n * cin + ci) * H + i + dy) * W + j + dx];
                    best = std::min(best, scale * acc);
                }
                const double got = y[(n * OH + i) * OW + j];
                max_err = std::max(max_err, std::abs(got - best) / std::max(1.0, std::abs(best)));
            }

    const bool ok = max_err <= 1e-5;
    std::printf("fusedconv example: Conv2dScaleMin(%d, %d, %d, scale %g) on %s -> %s, "
                "max error vs float64 %.2e: %s\n",
                cin, cout, k, scale, shape_string(input.shape()).c_str(),
                shape_string(output.shape()).c_str(), max_err, ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}
