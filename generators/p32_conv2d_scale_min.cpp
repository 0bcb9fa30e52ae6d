// p32: Conv2d -> * scale_factor -> min over channels (keepdim).
#include "pipelines.h"
#include "conv2d_min_schedule.h"

namespace fusedconv {

class Conv2dScaleMin : public Halide::Generator<Conv2dScaleMin> {
public:
    Input<Buffer<float, 4>> input{"input"};    // (x, y, ci, n)
    Input<Buffer<float, 4>> weight{"weight"};  // (kx, ky, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Input<float> scale{"scale"};               // runtime scale_factor, may be negative
    // Winograd F(4, 3) along x when true and the kernel is 3x3, the direct
    // form otherwise. Its result is NaN wherever the input or its sums are not
    // all finite (generators/winograd.h); the runtime then calls again with
    // false.
    Input<bool> winograd{"winograd"};
    Output<Buffer<float, 4>> output{"output"}; // (x, y, 1, n)

    schedules::Conv2dMinParams tunables;

    void generate() {
        p = build_p32(input, weight, bias, input.dim(0).extent(), input.dim(1).extent(), scale,
                      weight.dim(0).extent(), weight.dim(1).extent(), weight.dim(2).extent(),
                      weight.dim(3).extent(),
                      tunables.winograd_switch(winograd));
        blocks::V v;
        output(v.x, v.y, v.c, v.n) = p.output(v.x, v.y, v.c, v.n);
        // Winograd tiles start at multiples of 4 from output column 0: the
        // runtime's buffers always start at 0, and saying so lets the
        // schedules fold the tile arithmetic.
        output.dim(0).set_min(0);
        p.output = output;
    }

    void schedule() {
        if (auto_schedule) {  // an autoscheduler (bench/tune): estimates at the default shape only
            input.set_estimates({{0, 256}, {0, 256}, {0, 64}, {0, 64}});
            weight.set_estimates({{0, 3}, {0, 3}, {0, 64}, {0, 128}});
            winograd.set_estimate(true);
            bias.set_estimates({{0, 128}});
            scale.set_estimate(2.0f);
            output.set_estimates({{0, 254}, {0, 254}, {0, 1}, {0, 64}});
            return;
        }
        schedules::schedule_conv2d_min(p, tunables, get_target());
    }

private:
    Conv2dMinPipeline p;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dScaleMin, p32_conv2d_scale_min)
