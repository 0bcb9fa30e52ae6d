// GPU-free helpers of the tuning binary (bench/tune/tune_main.cpp): the
// output check against the default schedule, and the JSON-lines measurement log (one record per line, appended and flushed per
// candidate, so an interrupted run loses nothing and a rerun resumes).
#pragma once

#include "run_tools.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace fusedconv::tune {

// Timing statistics are the project's shared ones (runtime/tools).
using tools::median;
using tools::time_runs;
using tools::Timing;

struct Comparison {
    bool ok = true;
    double max_abs_diff = 0;     // over finite pairs
    int64_t bad_count = 0;       // elements outside the tolerance
    int64_t first_bad = -1;      // index of the first such element
    double ref_at_bad = 0, got_at_bad = 0;
};

// Element-wise check: |got - ref| <= rel_tol * max(1, |ref|); NaN matches NaN
// only (a NaN or infinity where the reference is finite is a mismatch).
Comparison compare_outputs(const float *ref, const float *got, int64_t n, double rel_tol = 1e-5);

// Appends one record as a line to `path` (created if missing), flushed and
// closed before returning. Throws fusedconv::Error when it cannot write.
void append_record(const std::string &path, const nlohmann::json &record);
// All records of a log; a missing file is empty, and a line that does not
// parse as a JSON object (an interrupted write) is skipped and counted.
std::vector<nlohmann::json> read_records(const std::string &path, int *bad_lines = nullptr);

// Identity of a measurement: library, candidate id and input shape.
std::string measurement_key(const std::string &lib, const std::string &id,
                            const std::vector<int64_t> &shape);
// Keys of the measurement records that are final (any status but a default
// timing, which every run repeats): a resumed run skips these.
std::set<std::string> done_keys(const std::vector<nlohmann::json> &records);

}  // namespace fusedconv::tune
