#include "nan_count_schedule.h"

namespace fusedconv::schedules {

using namespace Halide;

// rfactor splits the sum over (x, y, c) into per-column partial sums over
// (y, c). GPU, two kernels: one thread per column and sample (neighbouring
// threads on neighbouring x, so every row is read coalesced; a wrapper keeps
// each thread's partial sum in registers), then one thread per sample adds
// its columns. CPU: per sample, the columns vectorized over x.
void schedule_count_nan(Func count, const RDom &r, Func output, const Target &target) {
    Var x("x"), n = output.args()[0], xo("xo"), xi("xi");
    Func cols = count.update().rfactor(r.x, x);
    if (target.has_gpu_feature()) {
        Func wrapper = cols.in();
        wrapper.compute_root()
            .split(x, xo, xi, 64, TailStrategy::GuardWithIf)
            .reorder(xi, xo, n)  // rfactor puts the new x after n
            .gpu_blocks(xo, n)
            .gpu_threads(xi);
        cols.compute_at(wrapper, xi);
        cols.update().unroll(r.y, 4, TailStrategy::GuardWithIf);
        output.compute_root().gpu_tile(n, xo, xi, 32, TailStrategy::GuardWithIf);
        count.compute_at(output, xi);
    } else {
        output.compute_root().parallel(n);
        count.compute_at(output, n);
        cols.compute_at(output, n).reorder(x, n).vectorize(x, 8, TailStrategy::GuardWithIf);
        cols.update().reorder(x, r.y, r.z).vectorize(x, 8, TailStrategy::GuardWithIf);
    }
}

}  // namespace fusedconv::schedules
