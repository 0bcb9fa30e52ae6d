// fusedconv_tune: the tuning binary that bench/tune/tune.py builds for one
// round. Per library, at its model's input shape, it runs the default-parameter
// library (fusedconv_<lib>, e.g. fusedconv_p25_xy_cuda: the reference), then every candidate
// library of the round and the Li2018-autoscheduled one with the same inputs
// on the GPU; checks each output against the default's; times each (warm-up,
// then N runs each followed by a device synchronize; median and min); and
// appends one JSON line per measurement to the log, so an interrupted run
// loses nothing and a rerun with the same log resumes where it stopped.
#include "tune_core.h"
#include "tune_table.h"

#include "problems.h"
#include "results.h"

#include "fusedconv/device.h"
#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "halide_call.h"  // runtime/src: Halide errors -> fusedconv::Error
#include "nan_check.h"    // runtime/src: the Winograd form's NaN recomputation
#include "p25_xy_cuda.h"  // the direct recomputation after the tensor-core libraries
#include "p32_xy_cuda.h"
#include "run_tools.h"
#include "winograd2d_limits.h"  // the tensor-core libraries' input-channel limits

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <memory>
#include <random>

namespace fusedconv::tune {
namespace {

using nlohmann::json;

struct Options {
    std::string log = "fusedconv_tune_log.jsonl";
    std::vector<std::string> models;  // empty: every model of the table
    std::vector<std::string> shapes;  // "p24=2,3,24,32,32"
    std::vector<std::string> systems = {"default", "candidate", "li2018"};
    int reps = 20, warmup = 3;
    double max_slowdown = 5;
    bool resume = true, list = false, list_json = false;
};



bool contains(const std::vector<std::string> &v, const std::string &s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::string utc_time() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

std::string new_session_id() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", std::gmtime(&t));
    std::random_device rd;
    char hex[16];
    std::snprintf(hex, sizeof hex, "-%06x", rd() & 0xffffff);
    return std::string(buf) + hex;
}

json params_of(const Entry &e) {
    json p = json::parse(e.params_json, nullptr, false);
    return p.is_discarded() ? json::object() : p;
}

std::string params_text(const Entry &e) {
    json p = params_of(e);
    std::string s;
    for (auto it = p.begin(); it != p.end(); ++it) {
        if (!s.empty()) s += " ";
        s += it.key() + "=" + it.value().dump();
    }
    return s.empty() ? "(autoscheduled)" : s;
}

// The model at its KernelBench init arguments (as fusedconv_bench), its
// parameters on the GPU, a seeded input, and a call of any library of it.
class Problem {
public:
    Problem(const bench::Problem &p, const Shape &shape, Device device) : device_(device) {
        const DeviceChoice gpu = device == Device::GPU ? DeviceChoice::GPU : DeviceChoice::CPU;
        // p83 in training mode, as a fresh PyTorch module: every library gets
        // the same dropout seed, so the masks are identical.
        model_ = tools::kernelbench_model(p.id, gpu);
        Model *model = model_.get();
        m32_ = dynamic_cast<Conv2dScaleMin *>(model);
        m83_ = dynamic_cast<Conv3dGroupNormMinClampDropout *>(model);
        input_ = tools::uniform_input(shape, 1000 + shape[0]).to(device);  // as fusedconv_bench
        sentinel_ = Tensor::empty(model->output_shape(shape), Device::CPU);
        std::fill(sentinel_.data(), sentinel_.data() + sentinel_.numel(),
                  std::numeric_limits<float>::quiet_NaN());
    }

    // A fresh output on the device filled with NaN, so a library that leaves
    // part of it unwritten fails the check.
    Tensor fresh_output() const { return sentinel_.to(device_); }

    void call(const Entry &e, Tensor &out) const {
        int r = -1;
        halide_buffer_t *w = model_->conv_weight().raw(), *b = model_->conv_bias().raw();
        if (e.p24) {
            r = e.p24(input_.raw(), w, b, out.raw());
        } else if (e.p25 || e.p32) {
            // As the runtime calls them (p25_model.cpp, p32_model.cpp): the
            // Winograd form for a 3x3 kernel, the samples whose result holds
            // NaN recomputed in the direct form; so every candidate is timed
            // on the path a user's call takes.
            const bool winograd = detail::winograd_applies(model_->conv_weight());
            auto run = [&](bool wino, halide_buffer_t *in, halide_buffer_t *o) {
                detail::check_halide(e.p25 ? e.p25(in, w, b, wino, o)
                                           : e.p32(in, w, b, m32_->scale_factor(), wino, o),
                                     e.function);
            };
            detail::run_winograd_or_direct(winograd, input_, out, run);
            return;
        } else if (e.p25_tc || e.p32_tc) {
            call_tensor_core(e, out);
            return;
        } else if (e.p83) {
            const auto &m = *m83_;
            r = e.p83(input_.raw(), w, b, m.norm_weight().raw(), m.norm_bias().raw(), m.groups(),
                      m.eps(), m.min_value(), m.clamp_min(), m.clamp_max(), m.dropout_p(),
                      m.training(), m.dropout_seed(), out.raw());
        } else {
            throw Error(e.function + ": no library");
        }
        detail::check_halide(r, e.function);
    }

private:
    // As p25_run and p32_run call the tensor-core libraries (runtime/src/ops.cpp): the form on
    // the batch, the samples it marks NaN recomputed in the direct form of the model's F(4x4,
    // 3x3) library, which the runtime takes for them too.
    void call_tensor_core(const Entry &e, Tensor &out) const {
        const Tensor &weight = model_->conv_weight();
        const int64_t max_cin = e.p25_tc ? kTensorCoreMaxInChannels : kTensorCoreWideMaxInChannels;
        if (!detail::tensor_core_form_applies(weight, max_cin)) {
            throw Error(e.function + ": the tensor-core form does not apply to weights of shape " +
                        shape_string(weight.shape()) + " here: it takes 3x3 kernels with at most " +
                        std::to_string(max_cin) + " input channels, on a GPU with tf32 tensor "
                        "cores, with FUSEDCONV_TENSOR_CORES unset or 1");
        }
        halide_buffer_t *w = weight.raw(), *b = model_->conv_bias().raw();
        auto run = [&](bool wino, halide_buffer_t *in, halide_buffer_t *o) {
            if (wino) {
                detail::check_halide(e.p25_tc ? e.p25_tc(in, w, b, o)
                                              : e.p32_tc(in, w, b, m32_->scale_factor(), o),
                                     e.function);
            } else if (e.p25_tc) {
                detail::check_halide(fusedconv_p25_xy_cuda(in, w, b, false, o),
                                     "fusedconv_p25_xy_cuda (the direct form)");
            } else {
                const float scale = m32_->scale_factor();
                detail::check_halide(fusedconv_p32_xy_cuda(in, w, b, scale, false, o),
                                     "fusedconv_p32_xy_cuda (the direct form)");
            }
        };
        detail::run_winograd_or_direct(true, input_, out, run);
    }

    Device device_;
    std::unique_ptr<Model> model_;
    // model_ as its own class where a call needs more than the conv's
    // parameters: the one that matches, the other null.
    Conv2dScaleMin *m32_ = nullptr;
    Conv3dGroupNormMinClampDropout *m83_ = nullptr;
    Tensor input_, sentinel_;
};

class Tuner {
public:
    Tuner(const Options &o, const GpuInfo &info, Device device, std::set<std::string> done)
        : o_(o), info_(info), device_(device), done_(std::move(done)), session_(new_session_id()) {}

    void start() {
        const TableInfo &t = table_info();
        json s = {{"type", "session"},        {"session", session_},
                  {"device", info_.name},      {"slug", bench::device_slug(info_.name)},
                  {"cc", std::to_string(info_.cc_major) + "." + std::to_string(info_.cc_minor)},
                  {"sm_count", info_.sm_count}, {"date", bench::today()},
                  {"time", utc_time()},         {"round", t.round},
                  {"token", t.token},           {"commit", t.commit},
                  {"source_hash", t.source_hash}, {"reps", o_.reps},
                  {"warmup", o_.warmup},        {"max_slowdown", o_.max_slowdown}};
        if (device_ == Device::CPU) s["smoke"] = true;  // CPU libraries: not a tuning run
        append_record(o_.log, s);
        std::printf("fusedconv_tune round %d on %s (cc %d.%d, %d SMs); session %s; log %s\n",
                    t.round, info_.name.c_str(), info_.cc_major, info_.cc_minor, info_.sm_count,
                    session_.c_str(), o_.log.c_str());
        std::printf("each library: 1 checked run, %d warm-up, %d timed (median, min)\n", o_.warmup,
                    o_.reps);
        std::fflush(stdout);
    }

    // Every library of `model` in the table (p25: p25_cuda, p25_xy_cuda), in
    // the table's order. Returns false when the CUDA context became unusable
    // (the caller stops).
    bool run_model(const std::string &model, const Shape &shape) {
        std::vector<std::string> libs;
        for (const Entry &e : table()) {
            if (e.model == model && !contains(libs, e.lib)) libs.push_back(e.lib);
        }
        for (const std::string &lib : libs) {
            if (!run_library(model, lib, shape)) return false;
        }
        return true;
    }

private:
    // The default of `lib`, then its candidates and Li2018 schedule.
    bool run_library(const std::string &model, const std::string &lib, const Shape &shape) {
        const std::vector<Entry> &all = table();
        const Entry *def = nullptr;
        std::vector<const Entry *> cands, li;
        for (const Entry &e : all) {
            if (e.lib != lib) continue;
            if (e.system == "default") def = &e;
            if (e.system == "candidate" && wants("candidate") && !done(e, shape)) cands.push_back(&e);
            if (e.system == "li2018" && wants("li2018") && !done(e, shape)) li.push_back(&e);
        }
        if (!def) throw Error("the table has no default library for " + lib);
        if (cands.empty() && li.empty()) {
            std::printf("-- %s: nothing left to measure in this log\n", lib.c_str());
            return true;
        }
        std::printf("-- %s %s input %s: %zu candidates to measure%s\n", model.c_str(),
                    def->lib.c_str(), shape_string(shape).c_str(), cands.size(),
                    li.empty() ? "" : " + li2018");
        std::fflush(stdout);

        Problem prob(bench::find_problem(model), shape, device_);
        // The reference: the default schedule's output and time.
        std::vector<float> ref;
        Timing def_t;
        try {
            Tensor out = prob.fresh_output();
            prob.call(*def, out);
            synchronize();
            ref = out.to_vector();
            def_t = time_runs([&] { prob.call(*def, out); }, [] { synchronize(); }, o_.warmup,
                              o_.reps);
        } catch (const std::exception &ex) {
            json r = record(*def, shape, "error");
            r["error"] = ex.what();
            append_record(o_.log, r);
            std::printf("%s default FAILED: %s\n", def->lib.c_str(), ex.what());
            return healthy(*def, prob);
        }
        default_ms_ = def_t.median_ms;
        json r = record(*def, shape, "ok");
        put_timing(r, def_t);
        append_record(o_.log, r);
        std::printf("%s default (%s): median %.3f ms, min %.3f ms\n", def->lib.c_str(),
                    params_text(*def).c_str(), def_t.median_ms, def_t.min_ms);
        std::fflush(stdout);

        best_id_.clear();
        best_ms_ = 0;
        for (size_t k = 0; k < cands.size(); ++k) {
            std::printf("%s candidate %zu of %zu %s (%s): ", def->lib.c_str(), k + 1, cands.size(),
                        cands[k]->id.c_str(), params_text(*cands[k]).c_str());
            std::fflush(stdout);
            if (!measure(*cands[k], prob, ref, shape, *def)) return false;
        }
        for (const Entry *e : li) {
            std::printf("%s li2018 (Halide's Li2018 autoscheduler): ", def->lib.c_str());
            std::fflush(stdout);
            if (!measure(*e, prob, ref, shape, *def)) return false;
        }
        release_cached_gpu_memory();
        return true;
    }

    bool wants(const std::string &system) const { return contains(o_.systems, system); }

    bool done(const Entry &e, const Shape &shape) const {
        return done_.count(measurement_key(e.lib, e.id, shape)) > 0;
    }

    json record(const Entry &e, const Shape &shape, const std::string &status) const {
        const TableInfo &t = table_info();
        return {{"type", "measurement"}, {"session", session_},  {"round", t.round},
                {"token", t.token},      {"lib", e.lib},        {"model", e.model},
                {"system", e.system},    {"id", e.id},          {"function", e.function},
                {"params", params_of(e)}, {"shape", shape},     {"status", status},
                {"device", info_.name},  {"date", bench::today()}};
    }

    void put_timing(json &r, const Timing &t) const {
        r["median_ms"] = t.median_ms;
        r["min_ms"] = t.min_ms;
        r["times_ms"] = t.times_ms;
        r["reps"] = t.times_ms.size();
        r["warmup"] = o_.warmup;
        r["cut_short"] = t.cut_short;
    }

    // After a failure: is the CUDA context still usable? (A Halide error such
    // as a launch with too much shared memory leaves it usable; an illegal
    // address does not.) Runs the default once.
    bool healthy(const Entry &def, const Problem &prob) const {
        try {
            Tensor out = prob.fresh_output();
            prob.call(def, out);
            synchronize();
            return true;
        } catch (const std::exception &ex) {
            std::printf("the default library fails after that error (%s): the CUDA context is "
                        "unusable. Run fusedconv_tune again with the same --log: it resumes after "
                        "the measured candidates.\n",
                        ex.what());
            std::fflush(stdout);
            return false;
        }
    }

    bool measure(const Entry &e, const Problem &prob, const std::vector<float> &ref,
                 const Shape &shape, const Entry &def) {
        if (!e.callable()) {
            json r = record(e, shape, "build_failed");
            r["error"] = e.build_error;
            append_record(o_.log, r);
            std::printf("not built: %s\n", e.build_error.c_str());
            std::fflush(stdout);
            return true;
        }
        json r;
        bool ok = true;
        try {
            Tensor out = prob.fresh_output();
            auto t0 = std::chrono::steady_clock::now();
            prob.call(e, out);
            synchronize();
            const double first_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            std::vector<float> got = out.to_vector();
            Comparison c = compare_outputs(ref.data(), got.data(), int64_t(got.size()));
            if (!c.ok) {
                r = record(e, shape, "mismatch");
                r["error"] = "output differs from the default schedule's at " +
                             std::to_string(c.bad_count) + " elements (first at index " +
                             std::to_string(c.first_bad) + ": " + std::to_string(c.got_at_bad) +
                             " vs " + std::to_string(c.ref_at_bad) + ")";
                r["max_abs_diff"] = c.max_abs_diff;
                r["bad_count"] = c.bad_count;
                r["first_call_ms"] = first_ms;
                append_record(o_.log, r);
                std::printf("MISMATCH (%lld elements, max abs diff %.3g)\n", (long long)c.bad_count,
                            c.max_abs_diff);
                std::fflush(stdout);
                return true;
            }
            const double cutoff = o_.max_slowdown > 0 ? o_.max_slowdown * default_ms_ : 0;
            Timing t = time_runs([&] { prob.call(e, out); }, [] { synchronize(); }, o_.warmup,
                                 o_.reps, cutoff);
            r = record(e, shape, "ok");
            put_timing(r, t);
            r["max_abs_diff"] = c.max_abs_diff;
            r["first_call_ms"] = first_ms;
            r["default_median_ms"] = default_ms_;
            append_record(o_.log, r);
            if (e.system == "candidate" && (best_id_.empty() || t.median_ms < best_ms_)) {
                best_id_ = e.id;
                best_ms_ = t.median_ms;
            }
            std::printf("median %.3f ms, min %.3f ms%s, max abs diff %.2g; ", t.median_ms, t.min_ms,
                        t.cut_short ? " (cut short: slower than the cutoff)" : "", c.max_abs_diff);
        } catch (const std::exception &ex) {
            ok = false;
            r = record(e, shape, "error");
            r["error"] = ex.what();
            append_record(o_.log, r);
            std::printf("FAILED: %s; ", ex.what());
        }
        if (best_id_.empty() || best_ms_ >= default_ms_) {
            std::printf("best so far: the default, %.3f ms\n", default_ms_);
        } else {
            std::printf("best so far %s %.3f ms (default %.3f ms, %.2fx)\n", best_id_.c_str(),
                        best_ms_, default_ms_, default_ms_ / best_ms_);
        }
        std::fflush(stdout);
        return ok || healthy(def, prob);
    }

    Options o_;
    GpuInfo info_;
    Device device_;
    std::set<std::string> done_;
    std::string session_;
    double default_ms_ = 0, best_ms_ = 0;
    std::string best_id_;
};

void list_table(bool as_json) {
    const TableInfo &t = table_info();
    if (as_json) {
        json j = {{"round", t.round}, {"token", t.token}, {"commit", t.commit}, {"device", t.device},
                  {"source_hash", t.source_hash}, {"entries", json::array()}, {"shapes", json::object()}};
        for (const auto &[m, s] : t.shapes) j["shapes"][m] = s;
        for (const Entry &e : table()) {
            json x = {{"model", e.model}, {"lib", e.lib}, {"system", e.system}, {"id", e.id},
                      {"function", e.function}, {"params", params_of(e)}};
            if (!e.build_error.empty()) x["build_error"] = e.build_error;
            j["entries"].push_back(x);
        }
        std::printf("%s\n", j.dump(1).c_str());
        return;
    }
    std::printf("round %d, commit %s, %zu libraries\n", t.round, t.commit.c_str(), table().size());
    for (const Entry &e : table()) {
        std::printf("  %-9s %-9s %-8s %-34s %s%s\n", e.lib.c_str(), e.system.c_str(), e.id.c_str(),
                    e.function.c_str(), params_text(e).c_str(),
                    e.build_error.empty() ? "" : (" NOT BUILT: " + e.build_error).c_str());
    }
}

int run(int argc, char **argv) {
    Options o;
    std::string models, systems = "default,candidate,li2018";
    CLI::App app{"fusedconv_tune: times one tuning round's candidate schedules on the GPU "
                 "(built by bench/tune/tune.py; see bench/README.md)"};
    app.add_option("--log", o.log,
                   "JSON-lines log to append to; an existing log is resumed: its measured "
                   "candidates are not run again")
        ->capture_default_str();
    app.add_option("-m,--models", models, "Comma-separated models (default: all in the table)");
    app.add_option("--shape", o.shapes,
                   "Input shape of a model instead of the round's, PyTorch order, e.g. "
                   "p24=2,3,24,32,32 (repeatable)")
        ->take_all();
    app.add_option("-s,--systems", systems, "Comma-separated subset of default,candidate,li2018")
        ->capture_default_str();
    app.add_option("-r,--reps", o.reps, "Timed runs per library")->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_option("-w,--warmup", o.warmup, "Untimed runs first")->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    app.add_option("--max-slowdown", o.max_slowdown,
                   "Stop timing a library after 3 runs when their median exceeds this many times "
                   "the default's (0: never)")
        ->capture_default_str();
    app.add_flag("!--no-resume", o.resume, "Measure everything again, even what the log has");
    app.add_flag("--list", o.list, "Print the table of libraries and exit (no GPU needed)");
    app.add_flag("--list-json", o.list_json, "The same as JSON");
    CLI11_PARSE(app, argc, argv);
    o.models = tools::split_list(models);
    o.systems = tools::split_list(systems);

    try {
        if (o.list || o.list_json) {
            list_table(o.list_json);
            return 0;
        }
        for (const std::string &s : o.systems) {
            if (s != "default" && s != "candidate" && s != "li2018") {
                throw Error("unknown system '" + s + "' (default, candidate, li2018)");
            }
        }
        // Models and shapes: the table's, in its order, unless overridden.
        std::vector<std::pair<std::string, Shape>> work;
        for (const auto &[m, s] : table_info().shapes) {
            if (o.models.empty() || contains(o.models, m)) work.emplace_back(m, s);
        }
        for (const std::string &m : o.models) {
            bench::find_problem(m);  // throws on an unknown id
            bool in_table = false;
            for (auto &w : work) in_table |= w.first == m;
            if (!in_table) throw Error("model " + m + " is not in this round's table");
        }
        for (const std::string &spec : o.shapes) {
            size_t eq = spec.find('=');
            if (eq == std::string::npos) throw Error("--shape '" + spec + "': expected ID=N,C,...");
            const std::string m = spec.substr(0, eq);
            const bench::Problem &p = bench::find_problem(m);
            Shape s = bench::parse_shape(p, spec.substr(eq + 1));
            bool found = false;
            for (auto &w : work) {
                if (w.first == m) w.second = s, found = true;
            }
            if (!found) throw Error("--shape for " + m + ", which is not being run");
        }
        const Device device = table_info().device == "cpu" ? Device::CPU : Device::GPU;
        if (device == Device::GPU && !gpu_available()) {
            std::fprintf(stderr, "fusedconv_tune needs a CUDA GPU: %s\n",
                         gpu_unavailable_reason().c_str());
            return 2;
        }
        detail::install_halide_error_handler();
        int bad = 0;
        std::vector<json> old = o.resume ? read_records(o.log, &bad) : std::vector<json>{};
        if (bad) std::printf("log %s: %d unreadable line(s) skipped (an interrupted write)\n", o.log.c_str(), bad);
        std::set<std::string> done = done_keys(old);
        if (!done.empty()) std::printf("resuming: %zu measurements already in %s\n", done.size(), o.log.c_str());
        GpuInfo info;
        if (device == Device::GPU) {
            info = gpu_info();
        } else {
            info.name = "CPU smoke test";
            std::printf("SMOKE TEST: this table holds CPU libraries (tune.py round --smoke-cpu); "
                        "the timings are not GPU measurements\n");
        }
        Tuner tuner(o, info, device, done);
        tuner.start();
        for (auto &[m, s] : work) {
            if (!tuner.run_model(m, s)) return 3;
        }
        std::printf("done; measurements in %s (python3 bench/tune/tune.py ingest %s)\n",
                    o.log.c_str(), o.log.c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv_tune: %s\n", e.what());
        return 2;
    }
    return 0;
}

}  // namespace
}  // namespace fusedconv::tune

int main(int argc, char **argv) { return fusedconv::tune::run(argc, argv); }
