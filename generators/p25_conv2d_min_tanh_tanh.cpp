// p25: Conv2d -> min over channels (keepdim) -> tanh -> tanh.
#include "conv2d_min_generator.h"
#include "conv2d_min_schedule.h"

namespace fusedconv {

class Conv2dMinTanhTanh : public Halide::Generator<Conv2dMinTanhTanh> {
public:
    Input<Buffer<float, 4>> input{"input"};    // (x, y, ci, n)
    Input<Buffer<float, 4>> weight{"weight"};  // (kx, ky, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    // Winograd F(4, 3) along x, or the direct form (conv2d_min_generator.h).
    Input<bool> winograd{"winograd"};
    Output<Buffer<float, 4>> output{"output"}; // (x, y, 1, n)

    schedules::Conv2dMinParams tunables;

    void generate() {
        p = build_p25(input, weight, bias, input.dim(0).extent(), input.dim(1).extent(),
                      weight.dim(0).extent(), weight.dim(1).extent(), weight.dim(2).extent(),
                      weight.dim(3).extent(),
                      tunables.winograd_switch(winograd),
                      tunables.winograd_choice(get_target(), schedules::kP25Winograd2D));
        bind_conv2d_min_output(p, output);
    }

    void schedule() {
        if (auto_schedule) {  // an autoscheduler (bench/tune): estimates at the default shape only
            set_conv2d_min_estimates(*this, 128, 16, 64);
            return;
        }
        schedules::schedule_p25(p, tunables, get_target());
    }

private:
    Conv2dMinPipeline p;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dMinTanhTanh, p25_conv2d_min_tanh_tanh)
