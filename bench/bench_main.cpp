// fusedconv_bench: times each model's Halide pipeline on the GPU next to a
// cuDNN eager baseline (PyTorch eager's structure: a cuDNN convolution, then
// one kernel per epilogue op, each intermediate in global memory) in strict
// FP32 and in TF32, in one run; checks every output against float64 on
// sampled positions and against each other; derives achieved TFLOP/s, GB/s
// and roofline fractions; merges the records into bench/results/<device>.json.
#include "problems.h"
#include "results.h"
#include "roofline.h"

#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "cli_options.h"
#include "reference.h"
#include "run_tools.h"
#include "sampled_check.h"

#ifdef FUSEDCONV_BENCH_CUDA
#include "cudnn_eager.h"
#include "gpu_ceilings.h"
#endif

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>

#include "fusedconv_commit.h"  // FUSEDCONV_COMMIT, written at build time
// "halide" for the schedules' default parameters, "halide-tuned" for a build
// configured with -DFUSEDCONV_TUNED=<file>.
#ifndef FUSEDCONV_HALIDE_SYSTEM
#define FUSEDCONV_HALIDE_SYSTEM "halide"
#endif

namespace fusedconv::bench {
namespace {

using nlohmann::json;
using reference::HostTensor;

struct Options {
    std::vector<std::string> problems = {"p24", "p25", "p32", "p83"};
    std::vector<std::string> shapes;  // "p24=2,3,24,32,32"
    std::vector<std::string> systems = {"halide", "cudnn-eager-fp32", "cudnn-eager-tf32"};
    int reps = 30, warmup = 3, samples = 64;
    std::string results;  // "" -> bench/results/<slug>.json; "-" -> none
    bool measure_ceilings = true;
};

using tools::host_copy;
using tools::p83_args;
using tools::Timing;

Timing time_runs(const std::function<void()> &run, int warmup, int reps) {
    return tools::time_runs(run, synchronize, warmup, reps);
}

// Float64 check of one output on sampled positions.
reference::SampleReport check(const Problem &p, const Model &m, const HostTensor &in,
                              const std::vector<float> &out, const Shape &out_shape, int samples) {
    HostTensor w = host_copy(m.conv_weight()), b = host_copy(m.conv_bias());
    if (p.id == "p24") return reference::check_p24(in, w, b, out.data(), out_shape, samples, 24);
    if (p.id == "p25") return reference::check_p25(in, w, b, out.data(), out_shape, samples, 25);
    if (p.id == "p32") {
        double scale = dynamic_cast<const Conv2dScaleMin &>(m).scale_factor();
        return reference::check_p32(in, w, b, scale, out.data(), out_shape, samples, 32);
    }
    auto &g = dynamic_cast<const Conv3dGroupNormMinClampDropout &>(m);
    return reference::check_p83(in, w, b, host_copy(g.norm_weight()), host_copy(g.norm_bias()), p83_args(g),
                                out.data(), out_shape, samples, 83);
}

double max_abs_diff(const std::vector<float> &a, const std::vector<float> &b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        double d = std::abs(double(a[i]) - double(b[i]));
        worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
    return worst;
}

double mb(double bytes) { return bytes / 1e6; }

struct Row {
    std::string problem, system;
    Timing t;
    Roofline roof;
    double err = 0, diff = -1, peak_mb = 0;
};

class Bench {
public:
    Bench(const Options &o, const Ceilings &c, const GpuInfo &info) : o_(o), c_(c), info_(info) {}

    void run(const Problem &p, const Shape &shape) {
        release_cached_gpu_memory();
        size_t free0 = 0, total = 0;
        gpu_memory(&free0, &total);
        std::unique_ptr<Model> model = tools::kernelbench_model(p.id, DeviceChoice::GPU);
        Tensor host_in = tools::uniform_input(shape, 1000 + shape[0]);
        Tensor in = host_in.to(Device::GPU);
        Shape out_shape = model->output_shape(shape);
        Tensor out = Tensor::empty(out_shape, Device::GPU);
        model->forward_into(in, out);
        synchronize();
        size_t free1 = 0;
        gpu_memory(&free1, &total);
        // With Halide's allocation cache on, the intermediates of the call
        // above are still held: the drop in free memory is the peak.
        const double halide_peak = free0 > free1 ? double(free0 - free1) : 0.0;

        const double flops = conv_flops(p, shape), bytes = unavoidable_bytes(p, shape);
        HostTensor hin = host_copy(host_in);
        std::vector<float> halide_out;
        if (wants("halide")) {
            Timing t = time_runs([&] { model->forward_into(in, out); }, o_.warmup, o_.reps);
            halide_out = out.to_vector();
            add(p, shape, FUSEDCONV_HALIDE_SYSTEM, t, check(p, *model, hin, halide_out, out_shape, o_.samples),
                -1, halide_peak, flops, bytes, "peak = drop in free device memory over one call");
        }
#ifdef FUSEDCONV_BENCH_CUDA
        for (auto [system, math] : {std::make_pair("cudnn-eager-fp32", ConvMath::FP32),
                                    std::make_pair("cudnn-eager-tf32", ConvMath::TF32)}) {
            if (!wants(system)) continue;
            Tensor eager_out = Tensor::empty(out_shape, Device::GPU);
            std::unique_ptr<EagerModel> eager = make_eager(p, *model, in, eager_out, math);
            Timing t = time_runs([&] { eager->run(); }, o_.warmup, o_.reps);
            std::vector<float> got = eager_out.to_vector();
            double params = 4.0 * (model->conv_weight().numel() + model->conv_bias().numel());
            double peak = double(eager->device_bytes()) + 4.0 * (in.numel() + eager_out.numel()) + params;
            add(p, shape, system, t, check(p, *model, hin, got, out_shape, o_.samples),
                halide_out.empty() ? -1 : max_abs_diff(got, halide_out), peak, flops, bytes,
                std::to_string(eager->launches()) + " launches; " + eager->conv_algo());
        }
#endif
    }

    void print_table() const {
        std::printf("\n%-4s %-17s %10s %10s %8s %9s %6s %6s %9s %9s %9s %8s\n", "prob", "system",
                    "median_ms", "min_ms", "TFLOP/s", "GB/s", "%FMA", "%BW", "err_fp64",
                    "diff_hal", "peak_MB", "vs_hal");
        std::map<std::string, double> halide_ms;
        for (const Row &r : rows_) {
            if (r.system == FUSEDCONV_HALIDE_SYSTEM) halide_ms[r.problem] = r.t.median_ms;
        }
        for (const Row &r : rows_) {
            auto h = halide_ms.find(r.problem);
            std::string ratio = h != halide_ms.end() && r.system != FUSEDCONV_HALIDE_SYSTEM
                                    ? fmt("%.2fx", r.t.median_ms / h->second)
                                    : "";
            std::printf("%-4s %-17s %10.3f %10.3f %8.2f %9.1f %5.1f%% %5.1f%% %9.2e %9s %9.1f %8s\n",
                        r.problem.c_str(), r.system.c_str(), r.t.median_ms, r.t.min_ms,
                        r.roof.tflops, r.roof.gbps, 100 * r.roof.fma_frac, 100 * r.roof.mem_frac,
                        r.err, r.diff < 0 ? "" : fmt("%.2e", r.diff).c_str(), r.peak_mb,
                        ratio.c_str());
        }
        std::printf("(vs_hal: system median / Halide median; diff_hal: max |output - Halide output|)\n");
    }

    const std::vector<json> &records() const { return records_; }

private:
    static std::string fmt(const char *f, double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, f, v);
        return buf;
    }

    bool wants(const std::string &system) const {
        return std::find(o_.systems.begin(), o_.systems.end(), system) != o_.systems.end();
    }

#ifdef FUSEDCONV_BENCH_CUDA
    std::unique_ptr<EagerModel> make_eager(const Problem &p, const Model &m, const Tensor &in,
                                           Tensor &out, ConvMath math) {
        auto dev = [](const Tensor &t) { return static_cast<const float *>(t.device_data()); };
        float *o = static_cast<float *>(out.device_data());
        const Shape &s = in.shape();
        const float *w = dev(m.conv_weight()), *b = dev(m.conv_bias());
        if (p.id == "p24") return make_p24(dev(in), s, w, b, p.cout, p.k, o, math);
        if (p.id == "p25") return make_p25(dev(in), s, w, b, p.cout, p.k, o, math);
        if (p.id == "p32") {
            float scale = dynamic_cast<const Conv2dScaleMin &>(m).scale_factor();
            return make_p32(dev(in), s, w, b, p.cout, p.k, scale, o, math);
        }
        auto &g = dynamic_cast<const Conv3dGroupNormMinClampDropout &>(m);
        P83Scalars sc{g.groups(), g.eps(), g.min_value(), g.clamp_min(), g.clamp_max(),
                      g.dropout_p(), g.training(), g.dropout_seed()};
        return make_p83(dev(in), s, w, b, dev(g.norm_weight()), dev(g.norm_bias()), p.cout, p.k,
                        sc, o, math);
    }
#endif

    void add(const Problem &p, const Shape &shape, const std::string &system, const Timing &t,
             const reference::SampleReport &rep, double diff, double peak_bytes, double flops,
             double bytes, const std::string &note) {
        Row r{p.id, system, t, roofline(flops, bytes, t.median_ms, c_), rep.max_abs_err, diff,
              mb(peak_bytes)};
        rows_.push_back(r);
        std::printf("%s %-17s median %.3f ms  err_fp64 %.2e\n", p.id.c_str(), system.c_str(),
                    t.median_ms, rep.max_abs_err);
        std::fflush(stdout);
        json j = {{"problem", p.id},
                  {"system", system},
                  {"shape", shape},
                  {"median_ms", t.median_ms},
                  {"min_ms", t.min_ms},
                  {"max_abs_err_vs_fp64", rep.max_abs_err},
                  {"peak_device_mem_mb", r.peak_mb},
                  {"device", info_.name},
                  {"date", today()},
                  {"commit", FUSEDCONV_COMMIT},
                  {"tflops", r.roof.tflops},
                  {"gbps", r.roof.gbps},
                  {"fma_roofline_frac", r.roof.fma_frac},
                  {"mem_roofline_frac", r.roof.mem_frac},
                  {"floor_ms", r.roof.floor_ms},
                  {"reps", o_.reps},
                  {"samples_checked", rep.checked},
                  {"note", note}};
        if (diff >= 0) j["max_abs_diff_vs_halide"] = diff;
        records_.push_back(j);
    }

    Options o_;
    Ceilings c_;
    GpuInfo info_;
    std::vector<Row> rows_;
    std::vector<json> records_;
};

// The Halide system's name(s) in this build, for --help and errors.
std::string halide_systems() {
    const std::string recorded = FUSEDCONV_HALIDE_SYSTEM;
    if (recorded == "halide") return "halide";
    return "halide (recorded as " + recorded + " by this tuned build, which accepts that name too)";
}

int run(int argc, char **argv) {
    Options o;
    std::string problems = "p24,p25,p32,p83", systems = "halide,cudnn-eager-fp32,cudnn-eager-tf32";
    CLI::App app{"fusedconv_bench: Halide pipelines vs cuDNN eager baselines on the GPU, one run"};
    app.add_option("-p,--problems", problems, "Comma-separated problems")->capture_default_str();
    app.add_option("--shape", o.shapes,
                   "Extra input shape to time, PyTorch order, e.g. p24=2,3,24,32,32 (repeatable; "
                   "runs whether or not -p names the problem); the -p problems' default shapes "
                   "run too unless --only-shapes")
        ->take_all();
    bool only_shapes = false;
    app.add_flag("--only-shapes", only_shapes, "Run only the --shape shapes");
    app.add_option("-s,--systems", systems,
                   "Comma-separated systems: " + halide_systems() +
                       ", cudnn-eager-fp32, cudnn-eager-tf32")
        ->capture_default_str();
    app.add_option("-r,--reps", o.reps, "Timed runs")
        ->capture_default_str()
        ->check(tools::integer_in(1, 1000000));
    app.add_option("-w,--warmup", o.warmup, "Warm-up runs")
        ->capture_default_str()
        ->check(tools::integer_in(0, 1000000));
    app.add_option("--samples", o.samples,
                   "Output positions checked against float64 (every one when at least their "
                   "number)")
        ->capture_default_str()
        ->check(tools::integer_in(1, std::numeric_limits<int>::max()));
    app.add_option("--results", o.results,
                   "Results file to merge into ('-' for none; default bench/results/<device>.json, "
                   "relative to the current directory)");
    app.add_flag("!--no-measure-ceilings", o.measure_ceilings,
                 "Use the driver's attributes for the roofline instead of measuring copy "
                 "bandwidth and FMA rate");
    if (int code = tools::parse_or_exit_code(app, argc, argv); code >= 0) return code;
    o.problems = tools::split_list(problems);
    o.systems = tools::split_list(systems);

    // Argument errors (exit 2) are all found before any measurement; a
    // failure during the runs exits 1.
    std::vector<std::pair<const Problem *, Shape>> work;
    GpuInfo info;
    std::string results_path;
    try {
        for (std::string &s : o.systems) {
            // A tuned build records its Halide timings as "halide-tuned": its
            // own name selects them as well as "halide" does.
            if (s == FUSEDCONV_HALIDE_SYSTEM) s = "halide";
            if (s != "halide" && s != "cudnn-eager-fp32" && s != "cudnn-eager-tf32") {
                throw Error("unknown system '" + s + "' (this build's systems: " +
                            halide_systems() + ", cudnn-eager-fp32, cudnn-eager-tf32)");
            }
#ifndef FUSEDCONV_BENCH_CUDA
            if (s != "halide") {
                throw Error("system " + s + " needs the CUDA toolkit and cuDNN at build time");
            }
#endif
        }
        for (const std::string &id : o.problems) {
            const Problem &p = find_problem(id);
            if (!only_shapes) work.emplace_back(&p, p.default_input);
        }
        for (const std::string &spec : o.shapes) {
            size_t eq = spec.find('=');
            if (eq == std::string::npos) throw Error("--shape '" + spec + "': expected ID=N,C,...");
            const Problem &p = find_problem(spec.substr(0, eq));
            work.emplace_back(&p, parse_shape(p, spec.substr(eq + 1)));
        }
        if (only_shapes && o.shapes.empty()) {
            throw Error("--only-shapes without --shape: nothing to run");
        }
        if (work.empty()) throw Error("-p names no problem and no --shape is given: nothing to run");
        // A results file that cannot be read, or whose directory cannot be
        // created, fails now, not after the runs; a --results path does not
        // need the GPU's name, so it is checked before the GPU.
        if (o.results != "-" && !o.results.empty()) {
            results_path = o.results;
            prepare_results_file(results_path);
        }
        if (!gpu_available()) throw Error("needs a CUDA GPU: " + gpu_unavailable_reason());
        info = gpu_info();
        if (o.results.empty()) {
            results_path = "bench/results/" + device_slug(info.name) + ".json";
            prepare_results_file(results_path);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv_bench: %s\n", e.what());
        return 2;
    }

    try {
        Ceilings c = attribute_ceilings(info);
#ifdef FUSEDCONV_BENCH_CUDA
        if (o.measure_ceilings) {
            c.mem_gbps = measure_copy_gbps(size_t(2) << 30);
            c.fma_tflops = measure_fma_tflops();
            c.source = "measured (2 GiB device copy; FMA chains)";
        }
#endif
        std::printf("device %s: %d SMs, cc %d.%d; ceilings (%s): %.1f TFLOP/s fp32 FMA, %.0f GB/s\n",
                    info.name.c_str(), info.sm_count, info.cc_major, info.cc_minor, c.source.c_str(),
                    c.fma_tflops, c.mem_gbps);
        Bench bench(o, c, info);
        for (auto &[p, shape] : work) {
            std::printf("-- %s %s input %s\n", p->id.c_str(), p->name.c_str(), shape_string(shape).c_str());
            bench.run(*p, shape);
        }
        bench.print_table();
        if (o.results != "-") {
            merge_into_file(results_path, bench.records());
            std::printf("merged %zu records into %s\n", bench.records().size(),
                        results_path.c_str());
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace
}  // namespace fusedconv::bench

int main(int argc, char **argv) { return fusedconv::bench::run(argc, argv); }
