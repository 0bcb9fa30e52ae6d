// Runs the tensor-core probe's loop kernels on the GPU, their placeholder calls spliced into
// mma.sync when the driver loads the module (driver_hooks.h): checked against float64, and
// timed. README.md gives the figures measured with it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "driver_hooks.h"
#include "host_fragments.h"
#include "tc_probe_presplit.h"
#include "tc_probe_split.h"
#include "tc_probe_wide.h"
#include "tc_probe_wider.h"

using Halide::Runtime::Buffer;
using tc_probe::halide_message;

int main(int argc, char **argv) {
    CLI::App app{"tc_probe: the Winograd product's inner loop on tensor cores (3xTF32 mma.sync), "
                 "spliced into Halide 14's PTX; see bench/tensor_core_probe/README.md"};
    std::string mode = "check", kernel = "presplit";
    int tiles = 16384, cin = 8, cout_ = 128, reps = 64, runs = 10;
    app.add_option("mode", mode, "check (float64 comparison on small random operands) or bench")
        ->check(CLI::IsMember({"check", "bench"}));
    app.add_option("--kernel", kernel,
                   "presplit: 36 points a warp, one block of 16 channels x 8 tiles, U as tf32 and remainder; "
                   "split: the same with U split in the kernel; wide: 9 points, 2 x 2 blocks; wider: 4 points, "
                   "2 x 4 blocks (both U presplit)")
        ->check(CLI::IsMember({"presplit", "split", "wide", "wider"}));
    app.add_option("--tiles", tiles, "tiles (a multiple of 8; bench)")->check(CLI::Range(8, 1 << 22));
    app.add_option("--cin", cin, "input channels (a multiple of 8; bench)")->check(CLI::Range(8, 4096));
    app.add_option("--cout", cout_, "output channels (a multiple of 16; bench)")->check(CLI::Range(16, 4096));
    app.add_option("--reps", reps, "passes over the input channels (bench)")->check(CLI::Range(1, 100000));
    app.add_option("--runs", runs, "timed runs (bench; the median is printed)")->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);
    if (mode == "check") tiles = 32, cin = 16, cout_ = 64, reps = 3;
    // The libraries' shapes (CMakeLists.txt): points, blocks of 16 channels and of 8 tiles a warp.
    struct Kernel {
        int (*fn)(halide_buffer_t *, halide_buffer_t *, int, halide_buffer_t *);
        int points, m_blocks, n_blocks;
        bool presplit;
    };
    const Kernel k = kernel == "presplit" ? Kernel{tc_probe_presplit, 36, 1, 1, true}
                     : kernel == "split"  ? Kernel{tc_probe_split, 36, 1, 1, false}
                     : kernel == "wide"   ? Kernel{tc_probe_wide, 9, 2, 2, true}
                                          : Kernel{tc_probe_wider, 4, 2, 4, true};
    if (tiles % (8 * k.n_blocks) || cin % 8 || cout_ % (16 * k.m_blocks)) {
        fprintf(stderr, "tc_probe: tiles %d, cin %d, cout %d: %s needs multiples of %d, 8 and %d\n", tiles, cin,
                cout_, kernel.c_str(), 8 * k.n_blocks, 16 * k.m_blocks);
        return 2;
    }
    tc_probe::install_driver_hooks();

    const int P = k.points, KS = cin / 8, CG = cout_ / 16, TG = tiles / 8, NU = k.presplit ? 8 : 4;
    Buffer<float> u(cin, cout_, P), v(tiles, cin, P);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    u.for_each_value([&](float &x) { x = dist(rng); });
    v.for_each_value([&](float &x) { x = 100.f * dist(rng); });
    // The fragments (mma_splice.h's layout): lane l, g = l / 4, t = l % 4.
    Buffer<float> uf(NU, 32, CG, KS, P), vf(4, 32, TG, KS, P), out(4, 32, P, TG, CG);
    tc_probe::fill_u_fragments(uf, [&](int c, int co, int p) { return u(c, co, p); });
    vf.for_each_element([&](int q, int l, int tg, int ks, int p) {
        vf(q, l, tg, ks, p) = q < 2 ? v(tg * 8 + l / 4, ks * 8 + l % 4 + 4 * q, p) : 0.f;
    });
    vf.set_host_dirty();
    auto run = [&]() { return k.fn(uf, vf, reps, out); };
    if (int rc = run()) {
        fprintf(stderr, "tc_probe: the pipeline failed (%d): %s\n", rc, halide_message().c_str());
        return 1;
    }
    out.copy_to_host();
    printf("spliced groups: %d\n", tc_probe::spliced_groups());
    if (mode == "check") {
        // Each output against float64, relative to the sum of its terms' magnitudes.
        double worst = 0;
        out.for_each_element([&](int e, int l, int p, int tg, int cg) {
            const int co = cg * 16 + l / 4 + (e >= 2 ? 8 : 0), ti = tg * 8 + 2 * (l % 4) + (e & 1);
            double ref = 0, mag = 0;
            for (int c = 0; c < cin; c++) {
                ref += static_cast<double>(u(c, co, p)) * v(ti, c, p);
                mag += std::fabs(static_cast<double>(u(c, co, p)) * v(ti, c, p));
            }
            worst = std::max(worst, std::fabs(out(e, l, p, tg, cg) - reps * ref) / (reps * mag));
        });
        printf("check (%s): largest error / sum of |terms| %.3g (float32 epsilon 5.96e-08)\n", kernel.c_str(), worst);
        return worst < 4e-6 ? 0 : 3;
    }
    const double med = tc_probe::median_ms(run, out.raw_buffer(), runs);
    if (med < 0) {
        fprintf(stderr, "tc_probe: a timed run failed: %s\n", halide_message().c_str());
        return 1;
    }
    const double macs = static_cast<double>(tiles) * cout_ * P * cin * reps;
    printf("bench (%s): %d tiles x %d output channels x %d points x %d input channels: %.3f ms (median of %d), "
           "%.1f TFLOP/s float32-equivalent, %.1f on the tensor cores\n",
           kernel.c_str(), tiles, cout_, P, cin * reps, med, runs, 2 * macs / med / 1e9, 6 * macs / med / 1e9);
    return 0;
}
