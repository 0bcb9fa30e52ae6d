#include "tune_core.h"

#include "fusedconv/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fusedconv::tune {

using nlohmann::json;

Comparison compare_outputs(const float *ref, const float *got, int64_t n, double rel_tol) {
    Comparison c;
    for (int64_t i = 0; i < n; ++i) {
        const double r = ref[i], g = got[i];
        bool good;
        if (std::isnan(r) || std::isnan(g)) {
            good = std::isnan(r) && std::isnan(g);
        } else if (std::isinf(r) || std::isinf(g)) {
            good = r == g;
        } else {
            const double d = std::abs(g - r);
            c.max_abs_diff = std::max(c.max_abs_diff, d);
            good = d <= rel_tol * std::max(1.0, std::abs(r));
        }
        if (!good) {
            if (c.bad_count == 0) {
                c.first_bad = i;
                c.ref_at_bad = r;
                c.got_at_bad = g;
            }
            ++c.bad_count;
            c.ok = false;
        }
    }
    return c;
}

void append_record(const std::string &path, const json &record) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    std::FILE *f = std::fopen(path.c_str(), "a");
    if (!f) throw Error("cannot open log " + path + " for appending");
    const std::string line = record.dump() + "\n";
    const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fflush(f) == 0;
    std::fclose(f);
    if (!ok) throw Error("cannot write to log " + path);
}

std::vector<json> read_records(const std::string &path, int *bad_lines) {
    std::vector<json> out;
    int bad = 0;
    std::ifstream in(path);
    std::string line;
    while (in && std::getline(in, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object()) {
            out.push_back(std::move(j));
        } else {
            ++bad;
        }
    }
    if (bad_lines) *bad_lines = bad;
    return out;
}

std::string measurement_key(const std::string &lib, const std::string &id,
                            const std::vector<int64_t> &shape) {
    std::ostringstream s;
    s << lib << "/" << id << "/";
    for (size_t i = 0; i < shape.size(); ++i) s << (i ? "x" : "") << shape[i];
    return s.str();
}

std::set<std::string> done_keys(const std::vector<json> &records) {
    std::set<std::string> keys;
    for (const json &r : records) {
        if (r.value("type", "") != "measurement" || r.value("system", "") == "default") continue;
        if (!r.contains("shape") || !r["shape"].is_array()) continue;
        std::vector<int64_t> shape;
        for (const json &s : r["shape"]) {
            if (s.is_number_integer()) shape.push_back(s.get<int64_t>());
        }
        keys.insert(measurement_key(r.value("lib", ""), r.value("id", ""), shape));
    }
    return keys;
}

}  // namespace fusedconv::tune
