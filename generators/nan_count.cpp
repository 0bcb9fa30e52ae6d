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
        // The exponent bits, not is_nan: under fast-math a float NaN test may
        // be folded away. All-ones exponent with a non-zero mantissa is NaN.
        Expr bits = reinterpret<uint32_t>(input(r.x, r.y, r.z, v.n));
        Expr nan = (bits & Expr(0x7fffffffu)) > Expr(0x7f800000u);
        count = Func("count");
        count(v.n) = 0;
        count(v.n) += cast<int32_t>(nan);
        output(v.n) = count(v.n);
    }

    void schedule() { schedules::schedule_count_nan(count, r, output, get_target()); }

private:
    Func count;
    RDom r;
};

}  // namespace fusedconv

HALIDE_REGISTER_GENERATOR(fusedconv::CountNaN, count_nan)
