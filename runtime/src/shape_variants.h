// Per-shape variants of the tensor-core modules' kernels (tensor_core_hooks.h installs them on
// the driver's entry points). Inside a ShapeVariantScope, a launch of such a kernel has its
// 32-bit integer arguments (every one of them an extent, a stride, a minimum or a count derived
// from those: the tensor-core pipelines take no integer runtime value) written into its PTX as
// constants (ptx_specialize.h), and runs that module compiled again: once per distinct set of
// values, at most kMaxShapeVariants a kernel; a variant that fails to compile is not retried, and
// the kernel launches as it is. The outputs are bit-identical (H100: p24, p25, p32, p83 at the
// default and odd shapes). The runtime opts in where a variant measured faster: p24's wgmma
// kernel (its tap rows' offsets fold into the loads; schedules/NOTES.md); p25's and p32's
// kernels and p83's conv were not faster. FUSEDCONV_SHAPE_VARIANTS=0, read once, turns them off.
#pragma once

#include <string>

namespace fusedconv::cuda {

constexpr int kMaxShapeVariants = 8;

// The driver's own entry points (cuda.h's types as plain ones).
struct DriverEntryPoints {
    int (*load)(void **module, const void *image, unsigned n, int *options, void **values) = nullptr;
    int (*get_function)(void **f, void *module, const char *name) = nullptr;
    int (*unload)(void *module) = nullptr;
};

// Set once, before any module loads.
void set_variant_driver(const DriverEntryPoints &driver);

// A loaded module whose kernels may get variants, with the PTX and the JIT options it was
// compiled with (only MAX_REGISTERS and OPTIMIZATION_LEVEL are kept for the variants).
void note_variant_module(void *module, const std::string &ptx, unsigned n, const int *options,
                         void *const *values);

// f is `entry` of `module` (any module: functions of other modules are ignored at launch). Noted
// only inside a ShapeVariantScope on this thread: Halide's runtime gets the function before each
// launch (halide_cuda_run), in the scope of the launch.
void note_variant_function(void *f, void *module, const char *entry);

// The module is being unloaded: its functions and variants are forgotten, and the variants'
// modules unloaded too. A module just loaded may have the handle of one that went with its
// context (its variants gone with it): `unload_variants` false then only forgets them.
void forget_variant_module(void *module, bool unload_variants = true);

// The function to launch for f with these arguments: inside a ShapeVariantScope on this thread,
// its variant for them; else f.
void *variant_for_launch(void *f, void **params);

// While one lives, this thread's launches take their shape variants. `max_registers` > 0 caps
// the registers a thread of the variants compiled in the scope (CU_JIT_MAX_REGISTERS, where the
// module's own cap is higher): a kernel's variant is compiled once, by the first scope that
// launches it with those arguments.
class ShapeVariantScope {
public:
    explicit ShapeVariantScope(int max_registers = 0);
    ~ShapeVariantScope();
    ShapeVariantScope(const ShapeVariantScope &) = delete;
    ShapeVariantScope &operator=(const ShapeVariantScope &) = delete;

private:
    int outer_max_registers_;
};

}  // namespace fusedconv::cuda
