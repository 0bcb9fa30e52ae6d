// A kernel's 32-bit integer parameters turned into constants of its PTX, so that the driver's JIT
// compiles it for one shape: Halide 14's kernels take every extent and stride as a parameter, and
// a load whose offset is a product of them costs address arithmetic that a constant offset folds
// into the load (tensor_core_hooks.cpp compiles such a variant per shape at the first launch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fusedconv::cuda {

// The PTX types of `entry`'s parameters, in order (".u32", ".u64", ".f32", ...). Throws
// std::runtime_error when the module has no such entry or its parameter list cannot be read.
std::vector<std::string> entry_parameter_types(const std::string &ptx, const std::string &entry);

// Whether a parameter of this type is a 32-bit integer (.u32, .s32, .b32).
bool is_int32_parameter(const std::string &type);

// `ptx` with each `ld.param` of `entry`'s parameter k whose values[k] is set replaced by a move of
// that constant into the same register. Only 32-bit integer parameters may be given (throws
// std::runtime_error naming the parameter otherwise, or when one is never loaded as a whole).
// Other entries and parameters are left as they are.
std::string specialize_entry(const std::string &ptx, const std::string &entry,
                             const std::vector<std::optional<uint32_t>> &values);

}  // namespace fusedconv::cuda
