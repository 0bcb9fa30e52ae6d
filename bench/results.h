// The shared results file bench/results/<device slug>.json: a list of
// records {problem, system, shape, median_ms, min_ms, max_abs_err_vs_fp64,
// peak_device_mem_mb, device, date, commit, ...}. Writers merge: records with
// the same (problem, system, shape, devices) are replaced ("devices": the
// replica count of bench/results/scaling-<slug>.json; absent elsewhere). bench/results_io.py does
// the same for the Python side.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fusedconv::bench {

// "NVIDIA H200" -> "nvidia-h200": lowercase, runs of other characters -> '-'.
std::string device_slug(const std::string &device_name);
// Merges `records` into `existing` by the rule above; sorted by (problem, system, devices).
nlohmann::json merge_records(const nlohmann::json &existing, const std::vector<nlohmann::json> &records);
// The records of `path`: a missing file is an empty list; a file that is not
// a JSON list (or not a regular file) is an Error naming it. The harness
// calls this before measuring, so a bad --results fails before any work.
nlohmann::json read_results_file(const std::string &path);
// What the harness does before measuring: creates the missing directories
// of `path` and reads it as above, so that a results file that cannot be
// written there fails before any work (an Error naming the directory).
void prepare_results_file(const std::string &path);
// Reads `path` as above, merges, and writes it back through a new file that
// replaces it once complete (a failed write leaves the previous records).
void merge_into_file(const std::string &path, const std::vector<nlohmann::json> &records);
// UTC date "YYYY-MM-DD".
std::string today();

}  // namespace fusedconv::bench
