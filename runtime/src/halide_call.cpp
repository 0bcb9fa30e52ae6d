#include "halide_call.h"

#include "fusedconv/error.h"

#include "HalideRuntime.h"

#include <mutex>
#include <string>
#include <utility>

namespace fusedconv::detail {

namespace {

// Halide reports an error through the handler, then returns non-zero from
// the pipeline; the message is kept per thread for check_halide. An error
// raised inside a CPU parallel loop reaches the handler on one of Halide's
// worker threads, so the latest message of any thread is kept as well and
// used when the calling thread has none (with errors in several threads at
// once that one may belong to another call; it is still the better message
// than a bare error code).
thread_local std::string last_message;
std::mutex any_thread_mutex;
std::string any_thread_message;

void record_error(void *, const char *msg) {
    std::string text = msg ? msg : "";
    while (!text.empty() && text.back() == '\n') text.pop_back();
    {
        std::lock_guard<std::mutex> lock(any_thread_mutex);
        any_thread_message = text;
    }
    last_message = std::move(text);
}

// The message for a failed call on this thread, consumed.
std::string take_message() {
    std::string msg = std::move(last_message);
    last_message.clear();
    std::lock_guard<std::mutex> lock(any_thread_mutex);
    if (msg.empty()) msg = std::move(any_thread_message);
    any_thread_message.clear();
    return msg;
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
    std::string msg = take_message();
    if (msg.empty()) msg = "Halide error code " + std::to_string(result);
    throw Error(what + ": " + msg);
}

}  // namespace fusedconv::detail
