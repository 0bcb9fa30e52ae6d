#include "fusedconv/safetensors.h"

#include "fusedconv/error.h"
#include "atomic_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

namespace fusedconv {

namespace {

using json = nlohmann::json;

// safetensors' own limit on the header (100 MB): a larger length field means
// a corrupted file or not a safetensors file at all.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests three deep ({name: {shape: [..]}}) and its arrays are
// shapes and [begin, end] pairs. These bounds keep a hostile header (say
// 100 MB of '[') from turning into gigabytes of parsed JSON.
constexpr int kMaxJsonDepth = 8;
constexpr size_t kMaxArrayLength = 64;
constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

[[noreturn]] void fail(const std::string &path, const std::string &what) {
    throw Error("safetensors file '" + path + "': " + what);
}

// A JSON value for a message, cut short when long.
std::string brief(const json &value) {
    std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

std::string quoted(const std::string &name) {
    std::string s = name.size() > 80 ? name.substr(0, 77) + "..." : name;
    return "'" + s + "'";
}

template <typename U>
U load_le(const unsigned char *p) {
    U v = 0;
    for (size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(p[i]) << (8 * i);
    return v;
}

template <typename U>
void store_le(unsigned char *p, U v) {
    for (size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

float bits_to_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// IEEE binary16 -> binary32 (exact: every half is a float).
float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
    if (exponent != 0) return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
    // Zero or subnormal: mantissa * 2^-24, a normal float.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
}

// bfloat16 is the upper half of a float32.
float bfloat16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

// Round to nearest even; magnitudes past float's range become +-inf (without
// the undefined behaviour of an out-of-range cast).
float double_to_float(double d) {
    if (std::isfinite(d) && std::abs(d) > static_cast<double>(FLT_MAX)) {
        // Half-way between FLT_MAX and 2^128 rounds to even, i.e. to infinity.
        const bool overflows = std::abs(d) >= 0x1.ffffffp127;
        return static_cast<float>(
            std::copysign(overflows ? static_cast<double>(std::numeric_limits<float>::infinity())
                                    : static_cast<double>(FLT_MAX),
                          d));
    }
    return static_cast<float>(d);
}

struct DType {
    const char *name;
    uint64_t size;
};

const DType *find_dtype(const std::string &name) {
    static const DType kSupported[] = {{"F32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}};
    for (const DType &d : kSupported) {
        if (name == d.name) return &d;
    }
    return nullptr;
}

// Converts `count` elements of `dtype` at `src` into float32 at `dst`.
void convert(const DType &dtype, const unsigned char *src, float *dst, size_t count) {
    const std::string name = dtype.name;
    if (name == "F32") {
        for (size_t i = 0; i < count; ++i) dst[i] = bits_to_float(load_le<uint32_t>(src + 4 * i));
    } else if (name == "F64") {
        for (size_t i = 0; i < count; ++i) {
            const uint64_t bits = load_le<uint64_t>(src + 8 * i);
            double d;
            std::memcpy(&d, &bits, sizeof d);
            dst[i] = double_to_float(d);
        }
    } else if (name == "F16") {
        for (size_t i = 0; i < count; ++i) dst[i] = half_to_float(load_le<uint16_t>(src + 2 * i));
    } else {  // BF16
        for (size_t i = 0; i < count; ++i)
            dst[i] = bfloat16_to_float(load_le<uint16_t>(src + 2 * i));
    }
}

// One tensor entry of the header, validated.
struct Entry {
    std::string name;
    const DType *dtype = nullptr;
    Shape shape;
    uint64_t begin = 0, end = 0;
};

// Parses the header text; bounds nesting and array lengths while parsing and
// rejects a tensor name given twice (nlohmann would keep the last silently).
json parse_header(const std::string &path, const std::string &text) {
    struct Open {
        bool is_array;
        size_t length;
    };
    std::vector<Open> open;
    std::set<std::string> names;
    auto count_element = [&] {
        if (!open.empty() && open.back().is_array && ++open.back().length > kMaxArrayLength) {
            fail(path, "header has a JSON array of more than " + std::to_string(kMaxArrayLength) +
                           " elements; no safetensors header has one");
        }
    };
    json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json &parsed) {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= kMaxJsonDepth) {
                    fail(path, "header nests JSON deeper than " + std::to_string(kMaxJsonDepth) +
                                   " levels; a safetensors header nests 3");
                }
                open.push_back({event == json::parse_event_t::array_start, 0});
                break;
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
                open.pop_back();
                count_element();
                break;
            case json::parse_event_t::key:
                if (depth == 1 && !names.insert(parsed.get<std::string>()).second) {
                    fail(path, "tensor name " + quoted(parsed.get<std::string>()) +
                                   " appears twice in the header");
                }
                break;
            case json::parse_event_t::value:
                count_element();
                break;
        }
        return true;
    };
    try {
        return json::parse(text, callback);
    } catch (const json::exception &e) {
        fail(path, std::string("header is not valid JSON: ") + e.what());
    }
}

// A non-negative integer field value, or an Error saying what it is instead.
uint64_t non_negative_integer(const std::string &path, const std::string &where,
                              const json &value) {
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    if (value.is_number_integer()) {
        fail(path, where + " has a negative value " + brief(value));
    }
    if (value.is_number_float()) fail(path, where + " has a non-integer value " + brief(value));
    fail(path, where + " has a non-numeric value " + brief(value));
}

Entry parse_entry(const std::string &path, const std::string &name, const json &e) {
    Entry entry;
    entry.name = name;
    const std::string what = "tensor " + quoted(name);
    if (!e.is_object()) {
        fail(path, what + ": entry is a JSON " + std::string(e.type_name()) +
                       ", expected an object with \"dtype\", \"shape\" and \"data_offsets\"");
    }
    auto field = [&](const char *key) -> const json & {
        auto it = e.find(key);
        if (it == e.end()) fail(path, what + ": entry has no \"" + key + "\" field");
        return *it;
    };
    const json &dtype = field("dtype");
    const json &shape = field("shape");
    const json &offsets = field("data_offsets");

    if (!dtype.is_string()) {
        fail(path, what + ": \"dtype\" is " + brief(dtype) + ", expected a string such as \"F32\"");
    }
    const std::string dtype_name = dtype.get<std::string>();
    entry.dtype = find_dtype(dtype_name);
    if (!entry.dtype) {
        fail(path, what + " has dtype " + quoted(dtype_name) +
                       ", which is not supported (F32, F64, F16 and BF16 are; they load as "
                       "float32)");
    }

    if (!shape.is_array()) {
        fail(path, what + ": \"shape\" is " + brief(shape) + ", expected an array of sizes");
    }
    for (const json &s : shape) {
        const uint64_t size = non_negative_integer(path, what + ": \"shape\" " + brief(shape), s);
        if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail(path, what + ": shape " + brief(shape) + " has a size past int64");
        }
        entry.shape.push_back(static_cast<int64_t>(size));
    }
    if (entry.shape.empty()) {
        fail(path, what +
                       " has shape [], a 0-dimensional (scalar) tensor; fusedconv tensors "
                       "need at least one dimension (store it with shape [1])");
    }
    if (std::count(entry.shape.begin(), entry.shape.end(), 0) > 0) {
        fail(path, what + " has shape " + brief(shape) +
                       " with a zero size (an empty tensor); fusedconv tensors need positive "
                       "sizes");
    }
    int64_t numel = 1;
    for (int64_t s : entry.shape) {
        if (__builtin_mul_overflow(numel, s, &numel)) {
            fail(path, what + ": the element count of shape " + brief(shape) + " overflows int64");
        }
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel), entry.dtype->size, &nbytes)) {
        fail(path, what + ": the byte size of shape " + brief(shape) + " in " + dtype_name +
                       " overflows 64 bits");
    }

    if (!offsets.is_array() || offsets.size() != 2) {
        fail(path, what + ": \"data_offsets\" is " + brief(offsets) +
                       ", expected an array [begin, end] of two integers");
    }
    entry.begin =
        non_negative_integer(path, what + ": \"data_offsets\" " + brief(offsets), offsets[0]);
    entry.end =
        non_negative_integer(path, what + ": \"data_offsets\" " + brief(offsets), offsets[1]);
    if (entry.end < entry.begin) {
        fail(path, what + ": data_offsets " + brief(offsets) + " end before they begin");
    }
    if (entry.end - entry.begin != nbytes) {
        fail(path, what + ": data_offsets " + brief(offsets) + " hold " +
                       std::to_string(entry.end - entry.begin) + " bytes, but shape " +
                       brief(shape) + " of " + dtype_name + " needs " + std::to_string(nbytes));
    }
    return entry;
}

void read_exact(std::ifstream &in, const std::string &path, uint64_t offset, void *dst,
                uint64_t bytes) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char *>(dst), static_cast<std::streamsize>(bytes));
    if (!in || static_cast<uint64_t>(in.gcount()) != bytes) {
        fail(path, "read of " + std::to_string(bytes) + " bytes at offset " +
                       std::to_string(offset) + " failed (file changed or unreadable)");
    }
}

}  // namespace

std::map<std::string, Tensor> load_safetensors(const std::string &path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
        fail(path, "cannot open: " + (ec ? ec.message() : std::string("no such file")));
    }
    if (fs::is_directory(status)) fail(path, "cannot open: it is a directory");
    // Not a FIFO or device, whose read could block forever.
    if (!fs::is_regular_file(status)) fail(path, "cannot open: not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const std::streamoff end = in.tellg();
    if (!in || end < 0) fail(path, "cannot determine its size");
    const uint64_t file_size = static_cast<uint64_t>(end);

    if (file_size < 8) {
        fail(path, "file is " + std::to_string(file_size) +
                       " bytes, shorter than the 8-byte header length; not a safetensors file");
    }
    unsigned char length_bytes[8];
    read_exact(in, path, 0, length_bytes, 8);
    const uint64_t header_size = load_le<uint64_t>(length_bytes);
    if (header_size > kMaxHeaderBytes) {
        fail(path, "header length " + std::to_string(header_size) +
                       " is absurd (more than 100 MB); not a safetensors file, or corrupted");
    }
    if (header_size > file_size - 8) {
        fail(path, "header length " + std::to_string(header_size) +
                       " is larger than the rest of the file (" + std::to_string(file_size - 8) +
                       " bytes); truncated, or not a safetensors file");
    }
    std::string text(header_size, '\0');
    read_exact(in, path, 8, text.data(), header_size);
    const uint64_t data_start = 8 + header_size, data_size = file_size - data_start;
    // nlohmann's parser stops at a NUL byte and would ignore what follows;
    // JSON text has none, so such a header is corrupted.
    const size_t nul = text.find('\0');
    if (nul != std::string::npos) {
        fail(path, "header has a NUL byte at offset " + std::to_string(8 + nul) +
                       "; JSON text has none (corrupted, or not a safetensors file)");
    }

    const json header = parse_header(path, text);
    if (!header.is_object()) {
        fail(path, "header is a JSON " + std::string(header.type_name()) +
                       ", not a JSON object of tensors");
    }
    std::vector<Entry> entries;
    for (const auto &item : header.items()) {
        if (item.key() == "__metadata__") {
            if (!item.value().is_object()) {
                fail(path, "\"__metadata__\" is " + brief(item.value()) +
                               ", expected an object of strings");
            }
            continue;
        }
        entries.push_back(parse_entry(path, item.key(), item.value()));
        const Entry &e = entries.back();
        if (e.end > data_size) {
            fail(path, "tensor " + quoted(e.name) + ": data_offsets [" + std::to_string(e.begin) +
                           ", " + std::to_string(e.end) +
                           "] run past the end of the data buffer (" + std::to_string(data_size) +
                           " bytes)");
        }
    }

    // The tensors tile the data buffer exactly: no overlaps, no holes.
    std::vector<const Entry *> by_offset;
    for (const Entry &e : entries) by_offset.push_back(&e);
    std::sort(by_offset.begin(), by_offset.end(), [](const Entry *a, const Entry *b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t covered = 0;
    const Entry *previous = nullptr;
    for (const Entry *e : by_offset) {
        if (e->begin < covered) {
            fail(path, "tensors " + quoted(previous->name) + " and " + quoted(e->name) +
                           " overlap in the data buffer (bytes [" + std::to_string(e->begin) +
                           ", " + std::to_string(std::min(covered, e->end)) + "))");
        }
        if (e->begin > covered) {
            fail(path, "bytes [" + std::to_string(covered) + ", " + std::to_string(e->begin) +
                           ") of the data buffer belong to no tensor (the format allows no holes)");
        }
        covered = e->end;
        previous = e;
    }
    if (covered != data_size) {
        fail(path, "the data buffer has " + std::to_string(data_size) +
                       " bytes but the tensors cover only the first " + std::to_string(covered) +
                       " (the format allows no trailing bytes)");
    }

    std::map<std::string, Tensor> result;
    std::vector<unsigned char> chunk;
    for (const Entry *e : by_offset) {
        Tensor t;
        try {
            t = Tensor::empty(e->shape, Device::CPU);
        } catch (const Error &err) {
            fail(path, "tensor " + quoted(e->name) + ": " + err.what());
        }
        const uint64_t offset = data_start + e->begin, nbytes = e->end - e->begin;
        if (kLittleEndian && std::string(e->dtype->name) == "F32") {
            read_exact(in, path, offset, t.data(), nbytes);
        } else {
            const uint64_t step = kChunkBytes / e->dtype->size * e->dtype->size;
            chunk.resize(static_cast<size_t>(std::min(nbytes, step)));
            for (uint64_t done = 0; done < nbytes; done += step) {
                const uint64_t n = std::min(step, nbytes - done);
                read_exact(in, path, offset + done, chunk.data(), n);
                convert(*e->dtype, chunk.data(), t.data() + done / e->dtype->size,
                        static_cast<size_t>(n / e->dtype->size));
            }
        }
        result.emplace(e->name, t);
    }
    return result;
}

void save_safetensors(const std::string &path, const std::map<std::string, Tensor> &tensors) {
    json header = json::object();
    uint64_t offset = 0;
    for (const auto &[name, t] : tensors) {
        if (name == "__metadata__") {
            fail(path, "cannot save a tensor named \"__metadata__\" (reserved by the format)");
        }
        if (!t.defined()) fail(path, "cannot save tensor " + quoted(name) + ": it is undefined");
        if (t.shape().size() > kMaxArrayLength) {
            // load_safetensors would refuse the file (kMaxArrayLength).
            fail(path, "cannot save tensor " + quoted(name) + " of rank " +
                           std::to_string(t.shape().size()) + ": at most " +
                           std::to_string(kMaxArrayLength) + " dimensions can be read back");
        }
        const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * sizeof(float);
        json entry = json::object();
        entry["dtype"] = "F32";
        entry["shape"] = t.shape();
        entry["data_offsets"] = json::array({offset, offset + nbytes});
        header[name] = std::move(entry);
        offset += nbytes;
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const json::exception &e) {
        fail(path,
             std::string("cannot write the header (a tensor name is not UTF-8?): ") + e.what());
    }
    text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N is a multiple of 8 too

    // Into a new file that replaces `path` only once complete: a failed
    // write (a full disk, a GPU copy that fails) leaves the previous file.
    detail::write_file_atomically(path, "safetensors file", [&](const detail::ByteSink &write) {
        unsigned char length_bytes[8];
        store_le<uint64_t>(length_bytes, text.size());
        write(length_bytes, 8);
        write(text.data(), text.size());
        std::vector<unsigned char> le;
        for (const auto &entry : tensors) {
            const Tensor &t = entry.second;
            std::vector<float> copy;
            const float *values;
            if (t.device() == Device::CPU) {
                values = t.data();
            } else {
                copy = t.to_vector();
                values = copy.data();
            }
            const size_t count = static_cast<size_t>(t.numel());
            if (kLittleEndian) {
                write(values, count * sizeof(float));
            } else {
                le.resize(count * sizeof(float));
                for (size_t i = 0; i < count; ++i) {
                    uint32_t bits;
                    std::memcpy(&bits, values + i, sizeof bits);
                    store_le<uint32_t>(le.data() + 4 * i, bits);
                }
                write(le.data(), le.size());
            }
        }
    });
}

namespace {

// The model's class name and its parameters' state_dict names, in the order
// set_parameters takes them.
std::vector<std::string> parameter_names(const Model &model, std::string &type) {
    if (dynamic_cast<const Conv3dGroupNormMinClampDropout *>(&model)) {
        type = "Conv3dGroupNormMinClampDropout";
        return {"conv.weight", "conv.bias", "norm.weight", "norm.bias"};
    }
    if (dynamic_cast<const Conv3dMinSoftmax *>(&model)) {
        type = "Conv3dMinSoftmax";
    } else if (dynamic_cast<const Conv2dScaleMin *>(&model)) {
        type = "Conv2dScaleMin";
    } else if (dynamic_cast<const Conv2dMinTanhTanh *>(&model)) {
        type = "Conv2dMinTanhTanh";
    } else {
        throw Error("state_dict: unknown model class (expected one of the four fusedconv models)");
    }
    return {"conv.weight", "conv.bias"};
}

std::string key_list(const std::vector<std::string> &keys) {
    if (keys.empty()) return "none";
    std::string s;
    const size_t shown = std::min<size_t>(keys.size(), 20);
    for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + quoted(keys[i]);
    if (keys.size() > shown) s += ", ... (" + std::to_string(keys.size() - shown) + " more)";
    return s;
}

}  // namespace

void load_state_dict(Model &model, const std::map<std::string, Tensor> &state) {
    std::string type;
    const std::vector<std::string> names = parameter_names(model, type);
    std::vector<std::string> missing, unexpected, present;
    for (const std::string &n : names) {
        if (!state.count(n)) missing.push_back(n);
    }
    for (const auto &entry : state) {
        present.push_back(entry.first);
        if (std::find(names.begin(), names.end(), entry.first) == names.end()) {
            unexpected.push_back(entry.first);
        }
    }
    const std::string where = "load_state_dict(" + type + "): ";
    if (!missing.empty() || !unexpected.empty()) {
        std::string msg = where;
        if (!missing.empty()) msg += "missing key(s) " + key_list(missing);
        if (!unexpected.empty()) {
            msg += std::string(missing.empty() ? "" : "; ") + "unexpected key(s) " +
                   key_list(unexpected);
        }
        msg += " (keys present: " + key_list(present) + "; expected: " + key_list(names) + ")";
        throw Error(msg);
    }
    try {
        if (auto *m = dynamic_cast<Conv3dGroupNormMinClampDropout *>(&model)) {
            m->set_parameters(state.at(names[0]), state.at(names[1]), state.at(names[2]),
                              state.at(names[3]));
        } else if (auto *m = dynamic_cast<Conv3dMinSoftmax *>(&model)) {
            m->set_parameters(state.at(names[0]), state.at(names[1]));
        } else if (auto *m = dynamic_cast<Conv2dScaleMin *>(&model)) {
            m->set_parameters(state.at(names[0]), state.at(names[1]));
        } else if (auto *m = dynamic_cast<Conv2dMinTanhTanh *>(&model)) {
            m->set_parameters(state.at(names[0]), state.at(names[1]));
        }
    } catch (const Error &e) {
        throw Error(where + e.what());
    }
}

std::map<std::string, Tensor> state_dict(const Model &model) {
    std::string type;
    parameter_names(model, type);
    std::map<std::string, Tensor> state;
    if (auto *m = dynamic_cast<const Conv3dGroupNormMinClampDropout *>(&model)) {
        state["conv.weight"] = m->conv_weight().clone();
        state["conv.bias"] = m->conv_bias().clone();
        state["norm.weight"] = m->norm_weight().clone();
        state["norm.bias"] = m->norm_bias().clone();
    } else if (auto *m = dynamic_cast<const Conv3dMinSoftmax *>(&model)) {
        state["conv.weight"] = m->conv_weight().clone();
        state["conv.bias"] = m->conv_bias().clone();
    } else if (auto *m = dynamic_cast<const Conv2dScaleMin *>(&model)) {
        state["conv.weight"] = m->conv_weight().clone();
        state["conv.bias"] = m->conv_bias().clone();
    } else if (auto *m = dynamic_cast<const Conv2dMinTanhTanh *>(&model)) {
        state["conv.weight"] = m->conv_weight().clone();
        state["conv.bias"] = m->conv_bias().clone();
    }
    return state;
}

}  // namespace fusedconv
