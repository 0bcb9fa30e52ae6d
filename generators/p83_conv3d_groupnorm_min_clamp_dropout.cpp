// p83: Conv3d -> GroupNorm -> min(., min_value) -> clamp(lo, hi) -> dropout.
#include "pipelines.h"
#include "p83_schedule.h"

namespace fusedconv {

class Conv3dGroupNormMinClampDropout
    : public Halide::Generator<Conv3dGroupNormMinClampDropout> {
public:
    Input<Buffer<float, 5>> input{"input"};    // (x, y, z, ci, n)
    Input<Buffer<float, 5>> weight{"weight"};  // (kx, ky, kz, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Input<Buffer<float, 1>> gamma{"gamma"};    // GroupNorm weight (co)
    Input<Buffer<float, 1>> beta{"beta"};      // GroupNorm bias (co)
    Input<int32_t> groups{"groups", 1, 1, 1 << 30};
    Input<float> eps{"eps"};
    Input<float> min_value{"min_value"};       // torch.min(x, min_value)
    Input<float> clamp_lo{"clamp_lo"};         // clamp bounds; PyTorch's model passes
    Input<float> clamp_hi{"clamp_hi"};         // min_value and max_value here
    Input<float> dropout_p{"dropout_p"};
    Input<bool> training{"training"};
    Input<uint32_t> seed{"seed"};
    Output<Buffer<float, 5>> output{"output"}; // (x, y, z, co, n)

    schedules::P83Params tunables;

    void generate() {
        P83Params prm{groups, eps, min_value, clamp_lo, clamp_hi, dropout_p, training, seed};
        const int max_cin = tunables.xy_max_cin(get_target());
        int piece_w, piece_h;
        tunables.stats_pieces(max_cin, piece_w, piece_h);
        p = build_p83(input, weight, bias, gamma, beta, input.dim(0).extent(),
                      input.dim(1).extent(), input.dim(2).extent(), prm, weight.dim(0).extent(),
                      weight.dim(1).extent(), weight.dim(2).extent(), weight.dim(3).extent(),
                      weight.dim(4).extent(), max_cin, piece_w, piece_h);
        blocks::V v;
        output(v.x, v.y, v.z, v.c, v.n) = p.output(v.x, v.y, v.z, v.c, v.n);
        p.output = output;
    }

    void schedule() {
        if (auto_schedule) {  // an autoscheduler (bench/tune): estimates at the default shape only
            input.set_estimates({{0, 64}, {0, 64}, {0, 16}, {0, 3}, {0, 128}});
            weight.set_estimates({{0, 3}, {0, 3}, {0, 3}, {0, 3}, {0, 16}});
            bias.set_estimates({{0, 16}});
            gamma.set_estimates({{0, 16}});
            beta.set_estimates({{0, 16}});
            groups.set_estimate(8);
            eps.set_estimate(1e-5f);
            min_value.set_estimate(0.0f);
            clamp_lo.set_estimate(0.0f);
            clamp_hi.set_estimate(1.0f);
            dropout_p.set_estimate(0.2f);
            training.set_estimate(true);
            seed.set_estimate(0);
            output.set_estimates({{0, 62}, {0, 62}, {0, 14}, {0, 16}, {0, 128}});
            return;
        }
        // The output kernel's vectors assume this alignment; the runtime
        // takes the library only for outputs that have it.
        const int alignment = tunables.output_alignment(get_target());
        if (alignment > 4) output.set_host_alignment(alignment);
        schedules::schedule_p83(p, tunables, get_target());
    }

private:
    P83Pipeline p;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv3dGroupNormMinClampDropout,
                          p83_conv3d_groupnorm_min_clamp_dropout)
