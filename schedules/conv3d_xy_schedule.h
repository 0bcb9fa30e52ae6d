// The GPU schedule of a conv3d's Winograd F(4x4, 3x3) form over x and y
// (blocks::ConvWinograd3D) inside a consumer's kernel (p83's, which keeps the
// conv in global memory; p24's depth-min fold was measured with it too,
// schedules/NOTES.md). A block owns tiles_x x tiles_y 4x4 tiles of one sample; its
// threads are lanes output channels x tiles_x / per_thread tile groups along
// x x tiles_y (every thread nest of the kernel takes this shape); a serial
// loop over chunks of `depth` output depths stages the transformed input of
// the chunk's depth + 2 planes and max_cin channels in shared memory.
#pragma once

#include "pipelines.h"

#include <string>

namespace fusedconv::schedules {

struct Conv3dXYShape {
    int tiles_x, tiles_y, per_thread, depth, lanes, max_cin, cin_unroll;
    int threads_x() const { return lanes; }
    int threads_y() const { return tiles_x / per_thread; }
    int threads_z() const { return tiles_y; }
    int threads() const { return threads_x() * threads_y() * threads_z(); }
    int block_x() const { return 4 * tiles_x; }  // output pixels of a block
    int block_y() const { return 4 * tiles_y; }
    // The staged transformed input, in bytes.
    int staged_bytes() const { return 4 * 36 * tiles_x * tiles_y * (depth + 2) * max_cin; }
};

// Throws CompileError (naming `who` and the offending values) unless the
// shape is valid and the staging plus `other_shared` bytes of the caller's
// own shared memory fit the 48 KB a block may have.
void check_conv3d_xy(const Conv3dXYShape &s, int other_shared, const std::string &who);

// Items `item` of a stage spread over the threads (pa, pb, pc) of the shape,
// `threads` at a time (pixo: the serial rest, guarded).
template <typename StageT>
void conv3d_xy_over_threads(StageT &&stage, const Halide::VarOrRVar &item, const Conv3dXYShape &s,
                            const Halide::Var &pixo, const Halide::Var &pa, const Halide::Var &pb,
                            const Halide::Var &pc) {
    Halide::Var pabc("pabc"), pbc("pbc");
    stage.split(item, pixo, pabc, s.threads(), Halide::TailStrategy::GuardWithIf)
        .split(pabc, pbc, pa, s.threads_x())
        .split(pbc, pc, pb, s.threads_y());
}

// Schedules the form's stages and the direct form's conv (the other
// specialization of the consumer) given where the consumer puts them:
// `sums` is a loop inside the threads at one output depth and channel (the
// sums of the thread's per_thread tiles in registers; the direct conv of
// its 4 per_thread x 4 pixels likewise), `chunk` the block-level serial loop
// over chunks of `depth` output depths (the staging of v). ug, the
// transformed taps, is computed once per call by its own small kernel.
void schedule_conv3d_xy(blocks::ConvWinograd3D &w, const blocks::Conv &conv,
                        const Halide::Expr &kw, const Halide::Expr &kh, const Conv3dXYShape &s,
                        const Halide::LoopLevel &sums, const Halide::LoopLevel &chunk);

}  // namespace fusedconv::schedules
