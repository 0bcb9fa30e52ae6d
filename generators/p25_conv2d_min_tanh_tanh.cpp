// p25: Conv2d -> min over channels (keepdim) -> tanh -> tanh.
#include "conv2d_min_generator.h"
#include "conv2d_min_schedule.h"
#include "winograd2d_tensor_core_schedule.h"

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

// p25 in the F(4x4, 3x3) form on tensor cores (winograd2d_tensor_core.h), for CUDA targets:
// the runtime calls it for 3x3 kernels with at most 16 input channels on GPUs with tf32
// tensor cores, and recomputes the samples it marks NaN with p25_xy_cuda's direct form.
// With epilogue=false its output is the minimum over channels itself (the library
// block_conv2d_min_tc, for tests/test_tensor_core_form.cpp).
class Conv2dMinTanhTanhTensorCore : public Halide::Generator<Conv2dMinTanhTanhTensorCore> {
public:
    GeneratorParam<bool> epilogue{"epilogue", true};
    Input<Buffer<float, 4>> input{"input"};    // (x, y, ci, n)
    Input<Buffer<float, 4>> weight{"weight"};  // (kx, ky, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Output<Buffer<float, 4>> output{"output"}; // (x, y, 1, n)

    schedules::TensorCoreParams tunables;

    void generate() {
        form = tensor_core_form(*this, tunables.shape(blocks::kTensorCoreShape));
        blocks::V v;
        Expr mn = form.f(v.x, v.y, v.n);
        bind_tensor_core_output(output, epilogue ? p25_epilogue(mn) : mn);
    }

    void schedule() {
        schedules::gpu_conv2d_min_winograd_tensor_core(form, output, get_target(),
                                                       tunables.step_unroll(form.shape));
    }

private:
    blocks::ConvMinWinogradTensorCore form;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dMinTanhTanh, p25_conv2d_min_tanh_tanh)
HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dMinTanhTanhTensorCore, p25_tensor_core)
