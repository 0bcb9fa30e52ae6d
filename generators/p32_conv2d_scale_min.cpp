// p32: Conv2d -> * scale_factor -> min over channels (keepdim).
#include "conv2d_min_generator.h"
#include "conv2d_min_schedule.h"
#include "winograd2d_tensor_core_schedule.h"

namespace fusedconv {

class Conv2dScaleMin : public Halide::Generator<Conv2dScaleMin> {
public:
    Input<Buffer<float, 4>> input{"input"};    // (x, y, ci, n)
    Input<Buffer<float, 4>> weight{"weight"};  // (kx, ky, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Input<float> scale{"scale"};               // runtime scale_factor, may be negative
    // Winograd F(4, 3) along x, or the direct form (conv2d_min_generator.h).
    Input<bool> winograd{"winograd"};
    Output<Buffer<float, 4>> output{"output"}; // (x, y, 1, n)

    schedules::Conv2dMinParams tunables;

    void generate() {
        p = build_p32(input, weight, bias, input.dim(0).extent(), input.dim(1).extent(), scale,
                      weight.dim(0).extent(), weight.dim(1).extent(), weight.dim(2).extent(),
                      weight.dim(3).extent(),
                      tunables.winograd_switch(winograd),
                      tunables.winograd_choice(get_target(), schedules::kP32Winograd2D));
        bind_conv2d_min_output(p, output);
    }

    void schedule() {
        if (auto_schedule) {  // an autoscheduler (bench/tune): estimates at the default shape only
            set_conv2d_min_estimates(*this, 64, 64, 128);
            scale.set_estimate(2.0f);
            return;
        }
        schedules::schedule_p32(p, tunables, get_target());
    }

private:
    Conv2dMinPipeline p;
};

// p32 in the F(4x4, 3x3) form on tensor cores (winograd2d_tensor_core.h), for CUDA targets,
// with all 64 input channels' v staged (209 KB a block with rounds of 16 output channels, so one
// block of 4 warps per SM): the runtime calls it for 3x3 kernels with at most
// kTensorCoreMaxCinWide input channels on GPUs with tf32 tensor cores, and recomputes the
// samples it marks NaN with p32_xy_cuda's direct form.
class Conv2dScaleMinTensorCore : public Halide::Generator<Conv2dScaleMinTensorCore> {
public:
    Input<Buffer<float, 4>> input{"input"};    // (x, y, ci, n)
    Input<Buffer<float, 4>> weight{"weight"};  // (kx, ky, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Input<float> scale{"scale"};               // runtime scale_factor, may be negative
    Output<Buffer<float, 4>> output{"output"}; // (x, y, 1, n)

    schedules::TensorCoreParams tunables;

    void generate() {
        form = tensor_core_form(*this, tunables.shape(blocks::kTensorCoreWideShape), scale);
        blocks::V v;
        bind_tensor_core_output(output, form.f(v.x, v.y, v.n));
    }

    void schedule() {
        schedules::gpu_conv2d_min_winograd_tensor_core(form, output, get_target(),
                                                       tunables.step_unroll(form.shape));
    }

private:
    blocks::ConvMinWinogradTensorCore form;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dScaleMin, p32_conv2d_scale_min)
HALIDE_REGISTER_GENERATOR(fusedconv::Conv2dScaleMinTensorCore, p32_tensor_core)
