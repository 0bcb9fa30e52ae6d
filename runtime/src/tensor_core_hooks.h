// What the library's tensor-core kernels (generators/winograd2d_tensor_core.h) need from the
// CUDA driver beyond what Halide 14's runtime does. The runtime takes the driver's entry points
// through halide_get_library_symbol; install_tensor_core_hooks wraps four of them:
// - cuModuleLoadDataEx: the module's placeholder calls spliced into mma.sync (mma_splice.h)
//   before the JIT compiles it (modules without them pass unchanged);
// - cuLaunchKernel: a tensor-core module's kernel launched as its variant for the launch's
//   shape (shape_variants.h), and a kernel's dynamic shared memory attribute raised first when a
//   launch asks for more than the 48 KB every kernel may take, which Halide 14 never does itself
//   (the tensor-core kernels take 100 KB a block for p25 and 209 KB for p32, 224 KB with
//   gpu_tc_round_mtiles=2);
// - cuModuleGetFunction and cuModuleUnload: which kernel a function is, and when its module
//   and its variants go.
// Where either fails, the driver's error goes back to Halide, which reports it to the caller
// (as an Error naming the call); the splice's reason and the JIT's log are written to stderr.
#pragma once

namespace fusedconv::cuda {

// Installs the wrappers; cuda_context.cpp calls it before any pipeline loads the driver (and
// bench/tensor_core_probe's programs, which use Halide's runtime without the library).
void install_tensor_core_hooks();

// The placeholder groups spliced into the last module loaded (-1 before any), for diagnostics.
int spliced_groups();

}  // namespace fusedconv::cuda
