#include "c_errors.h"

#include <utility>

namespace fusedconv::capi {

namespace {
thread_local std::string message;
}

const std::string &last_error() { return message; }

void set_last_error(std::string text) {
    try {
        message = std::move(text);
    } catch (...) {
        // No memory even for the message: keep the previous one.
    }
}

}  // namespace fusedconv::capi
