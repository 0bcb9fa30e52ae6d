#include "shape_variants.h"

#include "env_switch.h"
#include "ptx_specialize.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace fusedconv::cuda {

namespace {

constexpr int kJitMaxRegisters = 0;       // CU_JIT_MAX_REGISTERS
constexpr int kJitOptimizationLevel = 7;  // CU_JIT_OPTIMIZATION_LEVEL

struct Module {
    std::string ptx;
    std::vector<int> options;
    std::vector<void *> values;
};

struct Variant {
    std::vector<uint32_t> args;
    void *module = nullptr;  // both null where it failed to compile
    void *function = nullptr;
};

struct Function {
    void *module = nullptr;
    std::shared_ptr<const Module> image;
    std::string entry;
    std::vector<size_t> ints;  // the indices of its 32-bit integer parameters
    std::vector<Variant> variants;
};

std::mutex mutex;
DriverEntryPoints driver;
std::unordered_map<void *, std::shared_ptr<const Module>> modules;
std::unordered_map<void *, Function> functions;

thread_local int scopes = 0;
thread_local int scope_max_registers = 0;  // the innermost scope's cap (0: none)

bool enabled() {
    static const bool on = env_switch_on("FUSEDCONV_SHAPE_VARIANTS");
    return on;
}

// fn's PTX with `args` as its integer parameters, compiled with the module's options.
Variant compile(const Function &fn, const std::vector<uint32_t> &args) {
    Variant v;
    v.args = args;
    try {
        std::vector<std::optional<uint32_t>> values(fn.ints.empty() ? 0 : fn.ints.back() + 1);
        for (size_t i = 0; i < fn.ints.size(); i++) values[fn.ints[i]] = args[i];
        const std::string ptx = specialize_entry(fn.image->ptx, fn.entry, values);
        std::vector<int> opts = fn.image->options;
        std::vector<void *> vals = fn.image->values;
        if (scope_max_registers > 0) {
            void *cap = reinterpret_cast<void *>(static_cast<uintptr_t>(scope_max_registers));
            auto at = std::find(opts.begin(), opts.end(), kJitMaxRegisters);
            if (at != opts.end()) {  // the lower of the module's cap and the scope's
                void *&v = vals[static_cast<size_t>(at - opts.begin())];
                if (reinterpret_cast<uintptr_t>(v) > static_cast<uintptr_t>(scope_max_registers)) v = cap;
            } else {
                opts.push_back(kJitMaxRegisters);
                vals.push_back(cap);
            }
        }
        void *m = nullptr, *f = nullptr;
        if (int rc = driver.load(&m, ptx.c_str(), static_cast<unsigned>(opts.size()), opts.data(), vals.data())) {
            std::fprintf(stderr, "fusedconv: the CUDA JIT refused a shape variant of %s (%d)\n", fn.entry.c_str(), rc);
            return v;
        }
        if (int rc = driver.get_function(&f, m, fn.entry.c_str())) {
            std::fprintf(stderr, "fusedconv: a shape variant of %s has no such kernel (%d)\n", fn.entry.c_str(), rc);
            driver.unload(m);
            return v;
        }
        v.module = m;
        v.function = f;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv: no shape variant of %s: %s\n", fn.entry.c_str(), e.what());
    }
    return v;
}

}  // namespace

void set_variant_driver(const DriverEntryPoints &d) {
    std::lock_guard<std::mutex> lock(mutex);
    driver = d;
}

void note_variant_module(void *module, const std::string &ptx, unsigned n, const int *options,
                         void *const *values) {
    auto image = std::make_shared<Module>();
    image->ptx = ptx;
    for (unsigned i = 0; i < n; i++) {
        if (options[i] == kJitMaxRegisters || options[i] == kJitOptimizationLevel) {
            image->options.push_back(options[i]);
            image->values.push_back(values[i]);
        }
    }
    std::lock_guard<std::mutex> lock(mutex);
    modules[module] = std::move(image);
}

void note_variant_function(void *f, void *module, const char *entry) {
    // Only a scope's launches read what is noted, and Halide's runtime asks for the function
    // right before each launch: outside a scope this returns before the lock.
    if (scopes == 0 || !enabled()) return;
    std::lock_guard<std::mutex> lock(mutex);
    auto known = functions.find(f);
    if (known != functions.end() && known->second.module == module && known->second.entry == entry) return;
    auto m = modules.find(module);
    if (m == modules.end()) return;
    Function fn;
    fn.module = module;
    fn.image = m->second;
    fn.entry = entry;
    try {
        const std::vector<std::string> types = entry_parameter_types(fn.image->ptx, fn.entry);
        for (size_t k = 0; k < types.size(); k++) {
            if (is_int32_parameter(types[k])) fn.ints.push_back(k);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv: %s gets no shape variants: %s\n", entry, e.what());
        return;
    }
    functions[f] = std::move(fn);
}

void forget_variant_module(void *module, bool unload_variants) {
    std::lock_guard<std::mutex> lock(mutex);
    modules.erase(module);
    for (auto it = functions.begin(); it != functions.end();) {
        if (it->second.module != module) {
            ++it;
            continue;
        }
        for (const Variant &v : it->second.variants) {
            if (unload_variants && v.module && driver.unload) driver.unload(v.module);
        }
        it = functions.erase(it);
    }
}

ShapeVariantScope::ShapeVariantScope(int max_registers) : outer_max_registers_(scope_max_registers) {
    scopes++;
    if (max_registers > 0) scope_max_registers = max_registers;
}
ShapeVariantScope::~ShapeVariantScope() {
    scopes--;
    scope_max_registers = outer_max_registers_;
}

void *variant_for_launch(void *f, void **params) {
    if (scopes == 0 || !enabled() || !params) return f;
    std::lock_guard<std::mutex> lock(mutex);
    if (!driver.load || !driver.get_function || !driver.unload) return f;
    auto it = functions.find(f);
    if (it == functions.end()) return f;
    Function &fn = it->second;
    // A known variant is found without copying the arguments (this runs at every launch).
    auto same_args = [&](const Variant &v) {
        for (size_t i = 0; i < fn.ints.size(); i++) {
            if (std::memcmp(&v.args[i], params[fn.ints[i]], sizeof(uint32_t)) != 0) return false;
        }
        return true;
    };
    for (const Variant &v : fn.variants) {
        if (same_args(v)) return v.function ? v.function : f;
    }
    if (fn.variants.size() >= static_cast<size_t>(kMaxShapeVariants)) return f;
    std::vector<uint32_t> args(fn.ints.size());
    for (size_t i = 0; i < fn.ints.size(); i++) std::memcpy(&args[i], params[fn.ints[i]], sizeof(uint32_t));
    fn.variants.push_back(compile(fn, args));
    return fn.variants.back().function ? fn.variants.back().function : f;
}

}  // namespace fusedconv::cuda
