// The C ABI's error reporting: every fc_* function runs its body through
// call(), which turns any exception into a non-zero return and keeps the
// message for fc_last_error() on the calling thread.
#pragma once

#include <string>

namespace fusedconv::capi {

// The calling thread's last failure message ("" before the first one).
const std::string &last_error();
void set_last_error(std::string message);

// Runs `body`; 0 when it returns, 1 (message kept) when it throws.
template <typename Body>
int call(Body body) noexcept {
    try {
        body();
        return 0;
    } catch (const std::exception &e) {
        set_last_error(e.what());
    } catch (...) {
        set_last_error("unknown failure (an exception that is not a std::exception)");
    }
    return 1;
}

}  // namespace fusedconv::capi
