// The candidate table of the tuning binary. bench/tune/tune.py generates its
// definition (tune_table.cpp in the tuning build's gen/ folder): one Entry per
// AOT-compiled library of the round, with the function pointer typed per
// model, so a generator whose signature no longer matches fails to compile.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

struct halide_buffer_t;

namespace fusedconv::tune {

// Signatures of the generated functions (the generators' Inputs, then Output).
using P24Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
// p25 and p32 take `winograd` (generators/conv2d_min_generator.h) before the
// output; test_tune_signatures.cpp checks these against the generated headers.
using P25Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, bool,
                      halide_buffer_t *);
using P32Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float, bool,
                      halide_buffer_t *);
// The tensor-core libraries (p25_tc_cuda, p32_tc_cuda: the Winograd form only, no `winograd`).
using P25TcFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using P32TcFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float,
                        halide_buffer_t *);
using P83Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                      halide_buffer_t *, int32_t, float, float, float, float, float, bool,
                      uint32_t, halide_buffer_t *);

struct Entry {
    std::string model;        // "p32"
    std::string lib;          // "p32_cuda", "p32_xy_cuda": the library tuned (its space)
    std::string system;       // "default", "candidate" or "li2018"
    std::string id;           // "default", "c017", "li2018"
    std::string function;     // "fusedconv_tune_p32_cuda_c017"
    std::string params_json;  // GeneratorParams, a JSON object ("{}" for li2018)
    std::string build_error;  // non-empty: no library (e.g. Li2018 could not schedule it)
    P24Fn p24 = nullptr;
    P25Fn p25 = nullptr;
    P32Fn p32 = nullptr;
    P83Fn p83 = nullptr;
    P25TcFn p25_tc = nullptr;
    P32TcFn p32_tc = nullptr;
    bool callable() const { return p24 || p25 || p32 || p83 || p25_tc || p32_tc; }
};

inline Entry make_entry(const char *model, const char *lib, const char *system, const char *id,
                        const char *function, const char *params_json) {
    Entry e;
    e.model = model, e.lib = lib, e.system = system, e.id = id, e.function = function;
    e.params_json = params_json;
    return e;
}
// An entry of `model` whose function is `fn`, held in `slot` (Entry::p24, ...).
template <typename Fn>
Entry typed_entry(const char *model, Fn Entry::*slot, const char *lib, const char *system,
                  const char *id, const char *function, const char *params, Fn fn) {
    Entry e = make_entry(model, lib, system, id, function, params);
    e.*slot = fn;
    return e;
}
// One helper per signature (the generated table calls them): the argument's type is the
// signature check. The tensor-core libraries are their model's, with signatures of their own
// (search_space.json's "entry").
#define FUSEDCONV_TUNE_ENTRY(name, model, FnType)                                             \
    inline Entry name##_entry(const char *lib, const char *system, const char *id,            \
                              const char *function, const char *params, FnType fn) {          \
        return typed_entry(model, &Entry::name, lib, system, id, function, params, fn);       \
    }
FUSEDCONV_TUNE_ENTRY(p24, "p24", P24Fn)
FUSEDCONV_TUNE_ENTRY(p25, "p25", P25Fn)
FUSEDCONV_TUNE_ENTRY(p32, "p32", P32Fn)
FUSEDCONV_TUNE_ENTRY(p83, "p83", P83Fn)
FUSEDCONV_TUNE_ENTRY(p25_tc, "p25", P25TcFn)
FUSEDCONV_TUNE_ENTRY(p32_tc, "p32", P32TcFn)
#undef FUSEDCONV_TUNE_ENTRY
// A library that could not be built (the error is logged, nothing runs).
inline Entry failed_entry(const char *model, const char *lib, const char *system,
                          const char *id, const char *error) {
    Entry e = make_entry(model, lib, system, id, "", "{}");
    e.build_error = error;
    return e;
}

struct TableInfo {
    int round = 0;
    std::string commit;       // git commit of the sources at generation
    std::string source_hash;  // sha256 of schedules/ and generators/ at generation
    std::string token;        // unique per generated table
    std::string device;       // "gpu"; "cpu" for a smoke-test table of CPU libraries
    // Input shape per model (PyTorch order) the round is tuned for.
    std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
};

const TableInfo &table_info();
const std::vector<Entry> &table();

}  // namespace fusedconv::tune
