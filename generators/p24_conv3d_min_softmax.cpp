// p24: Conv3d -> min over depth -> softmax over channels.
#include "pipelines.h"
#include "p24_schedule.h"
#include "dense_layout.h"

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

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::Conv3dMinSoftmax, p24_conv3d_min_softmax)
