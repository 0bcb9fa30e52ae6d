// LLVM options for one generator's code. Halide reads HL_LLVM_ARGS once per process, when it
// first initializes LLVM (CodeGen_LLVM::initialize_llvm, Halide 14), which a generator process
// does after generate(); the build runs one generator process per library (add_halide_library),
// so an option set from generate() applies to that library's code only.
#pragma once

#include <cstdlib>
#include <string>

namespace fusedconv {

// Adds -disable-lsr (no loop strength reduction) to HL_LLVM_ARGS, keeping what the caller set.
inline void disable_llvm_loop_strength_reduction() {
    const char *set = std::getenv("HL_LLVM_ARGS");
    std::string args = set ? set : "";
    if (args.find("-disable-lsr") != std::string::npos) return;
    args += args.empty() ? "-disable-lsr" : " -disable-lsr";
    setenv("HL_LLVM_ARGS", args.c_str(), 1);
}

}  // namespace fusedconv
