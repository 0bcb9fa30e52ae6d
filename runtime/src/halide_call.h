// Calling generated pipelines: their errors (bounds, allocation, CUDA) become
// fusedconv::Error exceptions carrying Halide's own message.
#pragma once

#include <string>

namespace fusedconv::detail {

// Installs the error handler once; call before any generated function.
void install_halide_error_handler();
// Throws Error("<what>: <Halide's message>") when `result` is non-zero.
void check_halide(int result, const std::string &what);

}  // namespace fusedconv::detail
