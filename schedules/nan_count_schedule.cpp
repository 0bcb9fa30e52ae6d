#include "nan_count_schedule.h"

namespace fusedconv::schedules {

using namespace Halide;

// GPU: the sum over (x, y, c) is split into per-thread partial sums over
// 16 rows of one column (rfactor), which one kernel computes in registers,
// a thread per (column, 16 rows, sample), neighbouring threads on
// neighbouring x (coalesced rows), each adding its partial sum into the
// sample's count with one atomic add; a first kernel zeroes the counts
// (about 20 us per p25 call on an H200; schedules/NOTES.md). CPU: per
// sample, the columns vectorized over x.
void schedule_count_nan(Func count, const RDom &r, const Target &target) {
    Var x("x"), n = count.args()[0], xo("xo"), xi("xi"), yo("yo");
    if (target.has_gpu_feature()) {
        RVar ryo("ryo"), ryi("ryi"), rxo("rxo"), rxi("rxi");
        count.update().split(r.y, ryo, ryi, 16, TailStrategy::GuardWithIf);
        Func part = count.update().rfactor({{r.x, x}, {ryo, yo}});
        count.gpu_tile(n, xo, xi, 32, TailStrategy::GuardWithIf);
        count.update()
            .atomic()
            .split(r.x, rxo, rxi, 64, TailStrategy::GuardWithIf)
            .reorder(rxi, rxo, ryo, n)
            .gpu_blocks(rxo, ryo, n)
            .gpu_threads(rxi);
        part.compute_at(count, rxi);
    } else {
        Func cols = count.update().rfactor(r.x, x);
        count.update().parallel(n);
        cols.compute_at(count, n).reorder(x, n).vectorize(x, 8, TailStrategy::GuardWithIf);
        cols.update().reorder(x, r.y, r.z).vectorize(x, 8, TailStrategy::GuardWithIf);
    }
}

// GPU: one kernel, a thread per sample (blocks of 64), its sum in registers
// with the elements' loads 8 at a time (unrolled, so that they are in flight
// together: the elements lie a channel apart, each a DRAM access). Its one
// store per sample may go to host memory. CPU: a loop.
void schedule_count_nan_small(Func count, Func sum, const RDom &r, const Target &target) {
    Var n = count.args()[0], no("no"), ni("ni");
    if (target.has_gpu_feature()) {
        RVar ro("ro"), ri("ri");
        count.gpu_tile(n, no, ni, 64, TailStrategy::GuardWithIf);
        sum.compute_at(count, ni).store_in(MemoryType::Register);
        sum.update().split(r.x, ro, ri, 8, TailStrategy::GuardWithIf).unroll(ri);
    } else {
        sum.compute_at(count, n);
    }
}

}  // namespace fusedconv::schedules
