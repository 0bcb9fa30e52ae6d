#include "halide_call.h"

#include "fusedconv/error.h"

#include "HalideRuntime.h"

#include <mutex>

namespace fusedconv::detail {

namespace {

// Halide reports an error through the handler, then returns non-zero from
// the pipeline; the message is kept per thread for check_halide.
thread_local std::string last_message;

void record_error(void *, const char *msg) {
    last_message = msg ? msg : "";
    while (!last_message.empty() && last_message.back() == '\n') last_message.pop_back();
}

}  // namespace

void install_halide_error_handler() {
    static std::once_flag once;
    std::call_once(once, [] { halide_set_error_handler(record_error); });
}

void check_halide(int result, const std::string &what) {
    if (result == 0) {
        last_message.clear();
        return;
    }
    std::string msg = last_message.empty() ? "Halide error code " + std::to_string(result)
                                           : last_message;
    last_message.clear();
    throw Error(what + ": " + msg);
}

}  // namespace fusedconv::detail
