// Tensor-core steps for Halide 14's CUDA kernels, which emit no tensor-core instructions: a
// generator writes each warp-level step as four placeholder extern calls (one per element of the
// lane's accumulator fragment; generators/mma_step.h), Halide's PTX declares them `.extern
// .func`, and splice_mma rewrites each group of four into inline 3xTF32 mma.sync instructions
// before the driver compiles the module (cuda_context.cpp installs it on cuModuleLoadDataEx;
// bench/tensor_core_probe's programs on their own).
//
// The placeholders, all returning float32 element k (0-3) of D = A B + C for one
// mma.sync.m16n8k8 (A 16x8 row-major, B 8x8 column-major, float32 C and D):
//   fc_mma8s_d<k>(c0, c1, c2, c3, a_hi0..3, a_lo0..3, b0, b1, anchor)
//       A given as tf32 values and their tf32 remainders (split ahead, e.g. on the host);
//   fc_mma8_d<k>(c0, c1, c2, c3, a0..3, b0, b1, anchor)
//       A split in the kernel.
// B is split in the kernel in both. Fragment layout (PTX ISA, mma.m16n8k8 .tf32): lane l, g = l/4,
// t = l%4 holds a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]; b0 = B[t][g],
// b1 = B[t+4][g]; c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]. The last
// argument is ignored (generators/mma_step.h says why the calls carry it).
//
// 3xTF32: with x = hi(x) + lo(x), both tf32, D = A_lo B_hi + A_hi B_lo + A_hi B_hi + C, the
// small terms first; A_lo B_lo (about 2^-22 relative) is dropped.
//
// A third family is one step of Hopper's warpgroup mma (generators/mma_step.h's wgmma_step):
//   fc_wg24_d<k>(c0..c11, a0..a3, b_address, anchor), k 0-11
// returns element k of D = A B + C for wgmma.m64n24k8 (tf32, 3xTF32 as above): C and D the
// thread's 12 accumulator elements (for each 8 columns j: rows g and g + 8 of its warp's 16,
// columns 8 j + 2 t and + 1), A its 4 elements (the RS form's: mma.m16n8k8's A layout in each
// warp's 16 rows), split in the kernel, and B in shared memory at byte address b_address (tf32
// values; their remainders 768 bytes on) as K-major core matrices. A group is twelve calls, and
// its replacement is wgmma.fence, three wgmma, commit, wait. Every thread of the warpgroup must
// execute it together. B must have been written before a barrier (as Halide orders a shared
// Func's producer and consumers): in a module with such a group every barrier is preceded by a
// proxy fence (fence.proxy.async.shared::cta), which makes the threads' stores visible to the
// steps; the module is retargeted to PTX 8.0 and sm_90a, so it loads on sm_90 GPUs only.
#pragma once

#include <string>

namespace fusedconv::cuda {

// Returns `ptx` with every group of placeholder calls replaced. A group is four consecutive
// calls d0..d3 (any order) of one family with the same operands, where the instructions between
// them neither change an operand nor touch a later call's result. Throws std::runtime_error,
// naming the call, when a placeholder call is not part of such a group (the module would
// otherwise fail to link, or compute something else). `groups`, when given, receives the count.
// A module without placeholders comes back unchanged (and is not parsed).
std::string splice_mma(const std::string &ptx, int *groups = nullptr);

}  // namespace fusedconv::cuda
