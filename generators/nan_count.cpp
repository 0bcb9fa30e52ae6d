// count_nan: the number of NaN elements per sample of a 4D float tensor
// (x, y, c, n). The runtime calls it on a result computed by the Winograd
// form, which marks with NaN every tile where that form did not apply
// (see winograd.h).
#include "blocks.h"
#include "nan_count_schedule.h"

namespace fusedconv {

using namespace Halide;

class CountNaN : public Generator<CountNaN> {
public:
    Input<Buffer<float, 4>> input{"input"};       // (x, y, c, n)
    Output<Buffer<int32_t, 1>> output{"output"};  // (n)

    void generate() {
        blocks::V v;
        r = RDom(0, input.dim(0).extent(), 0, input.dim(1).extent(), 0, input.dim(2).extent(), "r");
        // strict_float, as in blocks.cpp: under Halide's fast-math the NaN
        // test could be folded to false.
        Expr nan = strict_float(select(is_nan(input(r.x, r.y, r.z, v.n)), 1, 0));
        // The output is the sum itself: a copy of a separate sum was one more kernel a call.
        output(v.n) = 0;
        output(v.n) += nan;
    }

    void schedule() { schedules::schedule_count_nan(output, r, get_target()); }

private:
    RDom r;
};

// count_nan_small: the number of NaN elements per sample of a 2D view (i, n)
// of a few elements a sample (the runtime's probe of the first element of
// each channel, i a channel). One kernel, a thread per sample and no atomics,
// so that its counts can be written straight into page-locked host memory
// (cuda_context.h, write_to_host_and_wait).
class CountNaNSmall : public Generator<CountNaNSmall> {
public:
    Input<Buffer<float, 2>> input{"input"};       // (i, n)
    Output<Buffer<int32_t, 1>> output{"output"};  // (n)

    void generate() {
        blocks::V v;
        // Elements a channel apart: no unit stride assumed along i.
        input.dim(0).set_stride(Expr());
        r = RDom(input.dim(0).min(), input.dim(0).extent(), "r");
        sum(v.n) = 0;
        sum(v.n) += strict_float(select(is_nan(input(r.x, v.n)), 1, 0));
        output(v.n) = sum(v.n);
    }

    void schedule() { schedules::schedule_count_nan_small(output, sum, r, get_target()); }

private:
    RDom r;
    Func sum{"sum"};
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::CountNaN, count_nan)
HALIDE_REGISTER_GENERATOR(fusedconv::CountNaNSmall, count_nan_small)
