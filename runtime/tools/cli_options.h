// Command-line helpers shared by the fusedconv CLI and fusedconv_bench:
// integer validators whose messages name the value (CLI11's own range
// validators print "not in range 0.000000 to 1.79e308" for "-1" and "abc"
// alike), and parsing that exits with the project's usage-error code.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace fusedconv::tools {

// A signed integer option in [lo, hi].
inline CLI::Validator integer_in(long long lo, long long hi) {
    const std::string what =
        lo == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(lo);
    return CLI::Validator(
        [lo, hi, what](std::string &value) -> std::string {
            errno = 0;
            char *end = nullptr;
            const long long v = std::strtoll(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || errno == ERANGE) {
                return "expected " + what + ", got '" + value + "'";
            }
            if (v < lo) return "must be " + what + ", got " + value;
            if (v > hi) return "must be at most " + std::to_string(hi) + ", got " + value;
            return std::string();
        },
        lo == 0 ? "INT>=0" : "INT>=" + std::to_string(lo));
}

// An unsigned 64-bit option, 0 .. 2^64 - 1 (strtoull alone would accept
// "-1" as 2^64 - 1 and clamp overflowing values to it).
inline CLI::Validator uint64_value() {
    return CLI::Validator(
        [](std::string &value) -> std::string {
            const std::string expected =
                "expected an integer from 0 to 18446744073709551615, got '" + value + "'";
            if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
                return expected;
            }
            errno = 0;
            std::strtoull(value.c_str(), nullptr, 10);
            return errno == ERANGE ? expected : std::string();
        },
        "UINT64");
}

// app.parse, with usage errors exiting 2 (CLI11's own codes are 105, 109,
// ...) after CLI11's message; --help exits 0. Returns -1 when parsing
// succeeded and the program goes on.
inline int parse_or_exit_code(CLI::App &app, int argc, char **argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    return -1;
}

}  // namespace fusedconv::tools
