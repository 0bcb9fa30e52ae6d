// The runtime's environment switches (FUSEDCONV_TENSOR_CORES, FUSEDCONV_SHAPE_VARIANTS): on unless
// the variable is "0". Callers read one once, at its first use.
#pragma once

#include <cstdlib>
#include <cstring>

namespace fusedconv {

inline bool env_switch_on(const char *name) {
    const char *value = std::getenv(name);
    return !(value && std::strcmp(value, "0") == 0);
}

}  // namespace fusedconv
