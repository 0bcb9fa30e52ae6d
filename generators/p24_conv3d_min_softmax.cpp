// p24: Conv3d -> min over depth -> softmax over channels.
#include "pipelines.h"
#include "p24_schedule.h"
#include "conv3d_wgmma_schedule.h"
#include "dense_layout.h"
#include "llvm_options.h"

namespace fusedconv {

class Conv3dMinSoftmax : public Halide::Generator<Conv3dMinSoftmax> {
public:
    Input<Buffer<float, 5>> input{"input"};    // (x, y, z, ci, n)
    Input<Buffer<float, 5>> weight{"weight"};  // (kx, ky, kz, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Output<Buffer<float, 4>> output{"output"}; // (x, y, co, n)

    schedules::P24Params tunables;

    void generate() {
        // Dense buffers (the runtime's tensors are PyTorch-contiguous): with
        // the kernel size fixed by a specialization, every filter tap is then
        // a constant offset, not a runtime stride product kept in a register.
        require_dense(weight);
        Expr in_w = input.dim(0).extent(), in_h = input.dim(1).extent();
        Expr kw = weight.dim(0).extent(), kh = weight.dim(1).extent();
        p = build_p24(input, weight, bias, in_w, in_h, input.dim(2).extent(), kw, kh,
                      weight.dim(2).extent(), weight.dim(3).extent(), weight.dim(4).extent(),
                      tunables.xy_inside(get_target(), in_w, in_h, kw, kh));
        blocks::V v;
        output(v.x, v.y, v.c, v.n) = p.output(v.x, v.y, v.c, v.n);
        p.output = output;
    }

    void schedule() {
        if (auto_schedule) {  // an autoscheduler (bench/tune): estimates at the default shape only
            input.set_estimates({{0, 32}, {0, 32}, {0, 24}, {0, 3}, {0, 128}});
            weight.set_estimates({{0, 3}, {0, 3}, {0, 3}, {0, 3}, {0, 24}});
            bias.set_estimates({{0, 24}});
            output.set_estimates({{0, 30}, {0, 30}, {0, 24}, {0, 128}});
            return;
        }
        schedules::schedule_p24(p, tunables, get_target());
    }

private:
    P24Pipeline p;
};

// p24 with its conv on wgmma (conv3d_wgmma.h), for CUDA targets: the runtime calls it on sm_90
// GPUs for 3x3x3 kernels with at most kWgmmaMaxCin input and kWgmmaMaxCout output channels, and
// recomputes the samples it leaves NaN with p24_cuda.
class Conv3dMinSoftmaxWgmma : public Halide::Generator<Conv3dMinSoftmaxWgmma> {
public:
    Input<Buffer<float, 5>> input{"input"};    // (x, y, z, ci, n)
    Input<Buffer<float, 5>> weight{"weight"};  // (kx, ky, kz, ci, co)
    Input<Buffer<float, 1>> bias{"bias"};      // (co)
    Output<Buffer<float, 4>> output{"output"}; // (x, y, co, n)
    // LLVM's loop strength reduction turns each of a thread's tap addresses (at runtime strides)
    // into an induction variable held across the depth loop: with it the driver's JIT gave the
    // wgmma kernel 122 registers, without it 96 (5 blocks an SM, not 4), and the call took 0.345
    // ms against 0.316 on an H100 (schedules/NOTES.md).
    GeneratorParam<bool> loop_strength_reduction{"loop_strength_reduction", false};

    void generate() {
        if (!loop_strength_reduction) disable_llvm_loop_strength_reduction();
        require_dense(weight);
        require_dense(input);
        form = blocks::conv3d_min_depth_wgmma(input, weight, bias, weight.dim(3).extent(), weight.dim(4).extent(),
                                              input.dim(0).extent(), input.dim(1).extent(), input.dim(2).extent());
        softmax = blocks::softmax_over_channels(form.f, weight.dim(4).extent(), "wg_softmax");
        blocks::V v;
        output(v.x, v.y, v.c, v.n) = softmax.out(v.x, v.y, v.c, v.n);
    }

    void schedule() { schedules::gpu_conv3d_min_depth_wgmma(form, softmax, output, get_target()); }

private:
    blocks::ConvMinDepthWgmma form;
    blocks::Softmax softmax;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv3dMinSoftmax, p24_conv3d_min_softmax)
HALIDE_REGISTER_GENERATOR(fusedconv::Conv3dMinSoftmaxWgmma, p24_wgmma)
