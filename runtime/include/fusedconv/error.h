#pragma once

#include <stdexcept>
#include <string>

namespace fusedconv {

// Every error the library reports: bad shapes or values (the message names
// them), an unusable device, or a failure inside a generated pipeline.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string &what) : std::runtime_error(what) {}
};

}  // namespace fusedconv
