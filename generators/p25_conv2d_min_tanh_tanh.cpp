// p25: Conv2d -> min over channels (keepdim) -> tanh -> tanh.
#include "pipelines.h"
#include "conv2d_min_schedule.h"

namespace fusedconv {

class Conv2dMinTanhTanh : public Halide::Generator<Conv2dMinTanhTanh> {
public:
    Input<Buffer<float, 4>> input{"input"};    // (x, y, ci, n)
    Input<Buffer<float, 4>> weight{"weight"};  // (kx, ky, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    // Winograd F(4, 3) along x when true and the kernel is 3x3, the direct
    // form otherwise. Its result is NaN wherever the input or its sums are not
    // all finite (generators/winograd.h); the runtime then calls again with
    // false.
    Input<bool> winograd{"winograd"};
    Output<Buffer<float, 4>> output{"output"}; // (x, y, 1, n)

    schedules::Conv2dMinParams tunables;

    void generate() {
        p = build_p25(input, weight, bias, input.dim(0).extent(), input.dim(1).extent(),
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
            input.set_estimates({{0, 256}, {0, 256}, {0, 16}, {0, 128}});
            weight.set_estimates({{0, 3}, {0, 3}, {0, 16}, {0, 64}});
            winograd.set_estimate(true);
            bias.set_estimates({{0, 64}});
            output.set_estimates({{0, 254}, {0, 254}, {0, 1}, {0, 128}});
            return;
        }
        schedules::schedule_conv2d_min(p, tunables, get_target());
    }

private:
    Conv2dMinPipeline p;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dMinTanhTanh, p25_conv2d_min_tanh_tanh)
