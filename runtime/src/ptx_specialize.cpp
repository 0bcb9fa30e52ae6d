#include "ptx_specialize.h"

#include <cctype>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace fusedconv::cuda {

namespace {

const std::string kEntry = ".entry ", kParam = "_param_", kParamDirective = ".param ";

// Where `entry`'s declaration starts (".entry NAME("), or npos.
size_t find_entry(const std::string &ptx, const std::string &entry) {
    return ptx.find(kEntry + entry + "(");
}

std::string trim(const std::string &s) {
    const size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r");
    return s.substr(a, b - a + 1);
}

// [begin, end) of the entry's body: from its opening brace to just past the matching closing one.
std::pair<size_t, size_t> entry_body(const std::string &ptx, const std::string &entry) {
    const size_t at = find_entry(ptx, entry);
    if (at == std::string::npos) throw std::runtime_error("PTX specialization: no entry " + entry);
    const size_t close = ptx.find(')', at);
    const size_t open = close == std::string::npos ? close : ptx.find('{', close);
    if (open == std::string::npos) throw std::runtime_error("PTX specialization: entry " + entry + " has no body");
    int depth = 0;
    for (size_t i = open; i < ptx.size(); i++) {
        if (ptx[i] == '{') depth++;
        if (ptx[i] == '}' && --depth == 0) return {open, i + 1};
    }
    throw std::runtime_error("PTX specialization: entry " + entry + "'s body is not closed");
}

std::string param_name(const std::string &entry, size_t k) { return entry + kParam + std::to_string(k); }

}  // namespace

std::vector<std::string> entry_parameter_types(const std::string &ptx, const std::string &entry) {
    const size_t at = find_entry(ptx, entry);
    if (at == std::string::npos) throw std::runtime_error("PTX specialization: no entry " + entry);
    const size_t open = at + kEntry.size() + entry.size(), close = ptx.find(')', open);
    if (close == std::string::npos) throw std::runtime_error("PTX specialization: entry " + entry + "'s parameters are not closed");
    std::vector<std::string> types;
    std::istringstream list(ptx.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(list, item, ',')) {
        std::istringstream words(trim(item));
        std::string param, type, name;
        words >> param >> type >> name;
        if (param.empty()) continue;
        // ".param .align A .b8 name[N]" (a struct by value) is not a scalar: its type is kept whole.
        if (param != ".param" || name != param_name(entry, types.size())) {
            if (param == ".param" && type == ".align") {
                types.push_back(trim(item).substr(kParamDirective.size()));
                continue;
            }
            throw std::runtime_error("PTX specialization: cannot read parameter " + std::to_string(types.size()) +
                                     " of " + entry + ": '" + trim(item) + "'");
        }
        types.push_back(type);
    }
    return types;
}

bool is_int32_parameter(const std::string &type) { return type == ".u32" || type == ".s32" || type == ".b32"; }

std::string specialize_entry(const std::string &ptx, const std::string &entry,
                             const std::vector<std::optional<uint32_t>> &values) {
    const std::vector<std::string> types = entry_parameter_types(ptx, entry);
    if (values.size() > types.size()) {
        throw std::runtime_error("PTX specialization: " + std::to_string(values.size()) + " values for " + entry +
                                 "'s " + std::to_string(types.size()) + " parameters");
    }
    for (size_t k = 0; k < values.size(); k++) {
        if (values[k] && !is_int32_parameter(types[k])) {
            throw std::runtime_error("PTX specialization: parameter " + std::to_string(k) + " of " + entry +
                                     " is " + types[k] + ", not a 32-bit integer");
        }
    }
    const auto [begin, end] = entry_body(ptx, entry);
    std::string out = ptx.substr(0, begin);
    std::istringstream body(ptx.substr(begin, end - begin));
    std::string line;
    bool first = true;
    while (std::getline(body, line)) {
        if (!first) out += '\n';
        first = false;
        // "ld.param.u32 %r12, [NAME_param_4];": the only form in which a specialized parameter
        // may appear; any other mention of one (its address taken, an offset) is refused.
        const std::string t = trim(line);
        const size_t name_at = t.find(entry + kParam);
        if (name_at == std::string::npos) {
            out += line;
            continue;
        }
        const size_t digits = name_at + entry.size() + kParam.size();
        size_t n = 0;
        while (digits + n < t.size() && std::isdigit(static_cast<unsigned char>(t[digits + n]))) n++;
        if (n == 0) {
            out += line;
            continue;
        }
        const size_t k = std::stoul(t.substr(digits, n));
        if (k >= values.size() || !values[k]) {
            out += line;
            continue;
        }
        std::istringstream words(t);
        std::string op, reg, operand;
        words >> op >> reg >> operand;
        const bool plain_load = (op == "ld.param.u32" || op == "ld.param.s32" || op == "ld.param.b32") &&
                                reg.size() > 2 && reg.back() == ',' && operand == "[" + param_name(entry, k) + "];";
        if (!plain_load) {
            throw std::runtime_error("PTX specialization: parameter " + std::to_string(k) + " of " + entry +
                                     " is used as '" + t + "', not loaded as a whole");
        }
        char value[16];
        std::snprintf(value, sizeof value, "0x%08X", static_cast<unsigned>(*values[k]));
        out += "\tmov.b32 \t" + reg + " " + value + ";";
    }
    return out + ptx.substr(end);
}

}  // namespace fusedconv::cuda
