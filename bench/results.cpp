#include "results.h"

#include "fusedconv/error.h"
#include "atomic_file.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace fusedconv::bench {

using nlohmann::json;

std::string device_slug(const std::string &device_name) {
    std::string slug;
    for (char ch : device_name) {
        if (std::isalnum(static_cast<unsigned char>(ch))) {
            slug += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        } else if (!slug.empty() && slug.back() != '-') {
            slug += '-';
        }
    }
    while (!slug.empty() && slug.back() == '-') slug.pop_back();
    return slug.empty() ? "unknown-device" : slug;
}

static bool same_key(const json &a, const json &b) {
    return a.value("problem", "") == b.value("problem", "") &&
           a.value("system", "") == b.value("system", "") &&
           a.value("shape", json()) == b.value("shape", json()) &&
           // The scaling files (bench/scaling_main.cpp) hold one record per
           // replica count; the other files have no "devices" key.
           a.value("devices", json()) == b.value("devices", json());
}

json merge_records(const json &existing, const std::vector<json> &records) {
    json out = json::array();
    for (const json &old : existing) {
        bool replaced = std::any_of(records.begin(), records.end(),
                                    [&](const json &r) { return same_key(old, r); });
        if (!replaced) out.push_back(old);
    }
    for (const json &r : records) out.push_back(r);
    std::stable_sort(out.begin(), out.end(), [](const json &a, const json &b) {
        return std::make_tuple(a.value("problem", ""), a.value("system", ""), a.value("devices", 0)) <
               std::make_tuple(b.value("problem", ""), b.value("system", ""), b.value("devices", 0));
    });
    return out;
}

json read_results_file(const std::string &path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (!fs::exists(status)) return json::array();
    if (!fs::is_regular_file(status)) {
        throw Error("results file " + path + " exists and is not a regular file");
    }
    std::ifstream in(path);
    if (!in) throw Error("cannot read results file " + path);
    json existing;
    try {
        existing = json::parse(in);
    } catch (const json::exception &e) {
        throw Error("results file " + path + " is not valid JSON: " + e.what());
    }
    if (!existing.is_array()) throw Error("results file " + path + " is not a JSON list");
    return existing;
}

void prepare_results_file(const std::string &path) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) {
        throw Error("cannot create the directory " + parent.string() + " of results file " +
                    path + ": " + ec.message());
    }
    read_results_file(path);
}

void merge_into_file(const std::string &path, const std::vector<json> &records) {
    const json merged = merge_records(read_results_file(path), records);
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw Error("cannot create the directory of results file " + path + ": " + ec.message());
    // A new file that replaces the old one once complete: an interrupted
    // write cannot cost the records of earlier runs.
    const std::string text = merged.dump(1) + "\n";
    detail::write_file_atomically(path, "results file", [&](const detail::ByteSink &write) {
        write(text.data(), text.size());
    });
}

std::string today() {
    std::time_t t = std::time(nullptr);
    char buf[16];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
    return buf;
}

}  // namespace fusedconv::bench
