// fusedconv_scaling: data-parallel throughput of each model over 1, 2, 4, 8
// GPUs of one host (issue 30). For each replica count n it times
// sharded_forward_into (fusedconv/sharded.h) over n replicas built from the
// same seed (the same weights), replica i on GPU i, on one batch that lives
// on GPU 0 as a user's batch would: the shards of replicas on other GPUs are
// copied there and back by sharded_forward inside the timed region (through
// host memory, as Tensor::to copies between GPUs). The clock stops after
// every GPU used has finished. Each n-replica output must equal the
// 1-replica output bit for bit; a difference is an error (exit 1).
//
// --cpu-replicas runs the replicas on the CPU instead (one thread each), so
// the whole tool -- timing, checks, JSON, table -- runs on machines without
// a GPU (CI); its figures say nothing about GPUs.
//
// Exit codes: 0 done (models that did not fit are skipped with a message),
// 1 a failed run or bit-identity check, 2 a usage error (found before any
// measurement).
#include "problems.h"
#include "results.h"
#include "scaling_plan.h"

#include "fusedconv/error.h"
#include "fusedconv/models.h"
#include "fusedconv/sharded.h"
#include "cli_options.h"
#include "run_tools.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusedconv_commit.h"  // FUSEDCONV_COMMIT, written at build time

namespace fusedconv::bench {
namespace {

constexpr const char *kSystem = "halide-sharded";
constexpr const char *kCpuDevice = "cpu-replicas";

struct Options {
    std::vector<std::string> problems;
    std::vector<std::string> shapes;  // "p24=2,3,24,32,32"
    int64_t batch = 0;                // 0: multiplier x the shape's batch
    int multiplier = 8;
    std::string devices;              // unset -> default_device_counts(visible)
    bool cpu_replicas = false;
    int reps = 20, warmup = 3;
    uint64_t seed = 0;
    std::string results;  // "" -> bench/results/scaling-<slug>.json; "-" -> none
    std::string commit = FUSEDCONV_COMMIT;
};

// What the output and each record say about where the data lives.
std::string data_note(bool cpu) {
    if (cpu) return "input and output in host memory; CPU replicas read and write them in place";
    return "input and output on cuda:0; the shards of replicas on other GPUs are copied there "
           "and back by sharded_forward (peer to peer) inside the timed region";
}

// Models to time: a problem and the shape whose batch the multiplier scales.
struct Work {
    const Problem *problem;
    Shape shape;
};

class Scaling {
public:
    Scaling(const Options &o, std::vector<int> counts, std::string device, int gpu_count)
        : o_(o), counts_(std::move(counts)), device_(std::move(device)), gpu_count_(gpu_count) {}

    // Times one model at every count. Returns false on a failed run or check.
    bool run(const Work &w) {
        const Problem &p = *w.problem;
        Shape shape = w.shape;
        std::vector<std::unique_ptr<Model>> owned;
        Tensor in, reference_out;
        Shape out_shape;
        try {
            // Replica i on GPU i, same seed: the same parameters everywhere.
            for (int i = 0; i < counts_.back(); ++i) {
                std::unique_ptr<Model> m = tools::kernelbench_model(p.id, DeviceChoice::CPU, o_.seed);
                // sharded_forward refuses p83's training-mode dropout when split
                // (its mask is keyed on the element index): eval mode.
                if (auto *p83 = dynamic_cast<Conv3dGroupNormMinClampDropout *>(m.get())) {
                    p83->set_training(false);
                }
                if (!o_.cpu_replicas) m->to(Device::GPU, i);
                owned.push_back(std::move(m));
            }
            shape[0] = batch_for(p, shape, *owned[0]);
            out_shape = owned[0]->output_shape(shape);
            const Tensor host_in = tools::uniform_input(shape, 1000 + uint64_t(shape[0]));
            in = o_.cpu_replicas ? host_in : host_in.to(Device::GPU, 0);
        } catch (const std::exception &e) {
            std::printf("%s: skipped, input %s does not fit: %s\n", p.id.c_str(),
                        shape_string(shape).c_str(), e.what());
            skipped_.push_back(p.id);
            return true;
        }
        std::printf("-- %s %s: input %s (%.1f MB), output %s\n", p.id.c_str(), p.name.c_str(),
                    shape_string(shape).c_str(), 4e-6 * double(in.numel()),
                    shape_string(out_shape).c_str());
        std::fflush(stdout);

        std::vector<float> reference;
        double throughput_1 = 0;
        for (int n : counts_) {
            std::vector<Model *> replicas;
            for (int i = 0; i < n; ++i) replicas.push_back(owned[size_t(i)].get());
            try {
                // A fresh output filled with a NaN pattern: a shard that wrote
                // nothing cannot pass for one that wrote the reference.
                Tensor out = sentinel_output(out_shape);
                const int used = int(std::min<int64_t>(n, shape[0]));
                auto sync = [&] {
                    if (o_.cpu_replicas) return;
                    for (int d = 0; d < used; ++d) synchronize_device(d);
                };
                tools::Timing t = tools::time_runs(
                    [&] { sharded_forward_into(replicas, in, out); }, sync, o_.warmup, o_.reps);
                std::vector<float> got = out.to_vector();
                ScalingRecord r = record(p, shape, n, t);
                if (n == 1) {
                    reference = std::move(got);
                    throughput_1 = r.samples_per_s;
                } else {
                    r.bit_identical = bit_identical(p.id, n, got, reference);
                    if (!r.bit_identical) failed_ = true;
                }
                r.efficiency = efficiency(r.samples_per_s, n, throughput_1);
                std::printf("%s x%d: median %.3f ms, %.1f samples/s, efficiency %.3f%s\n",
                            p.id.c_str(), n, r.median_s * 1e3, r.samples_per_s, r.efficiency,
                            n == 1 ? " (reference)"
                                   : r.bit_identical ? ", bit-identical to x1" : ", MISMATCH");
                std::fflush(stdout);
                records_.push_back(r);
            } catch (const std::exception &e) {
                // Such as out of device memory on one GPU: the larger counts of
                // this model are not run.
                std::fprintf(stderr, "fusedconv_scaling: %s with %d replica%s failed: %s\n",
                             p.id.c_str(), n, n == 1 ? "" : "s", e.what());
                failed_ = true;
                break;
            }
        }
        return !failed_;
    }

    void print_table() const {
        std::printf("\n%-4s %-15s %4s %6s %11s %13s %10s %9s\n", "prob", "system", "devs",
                    "batch", "median_ms", "samples/s", "efficiency", "identical");
        for (const ScalingRecord &r : records_) {
            std::printf("%-4s %-15s %4d %6lld %11.3f %13.1f %10.3f %9s\n", r.problem.c_str(),
                        r.system.c_str(), r.devices, static_cast<long long>(r.shape[0]),
                        r.median_s * 1e3, r.samples_per_s, r.efficiency,
                        r.devices == 1 ? "(ref)" : r.bit_identical ? "yes" : "NO");
        }
        std::printf("(efficiency: samples/s with n devices / (n x samples/s with 1); data: %s)\n",
                    data_note(o_.cpu_replicas).c_str());
        for (const std::string &id : skipped_) std::printf("skipped: %s (did not fit)\n", id.c_str());
    }

    std::vector<nlohmann::json> records_json() const {
        std::vector<nlohmann::json> out;
        for (const ScalingRecord &r : records_) out.push_back(to_json(r));
        return out;
    }
    bool failed() const { return failed_; }

private:
    // --batch, or the multiplier times the shape's batch, capped (with a
    // message) to what one Halide buffer holds when the user named no batch.
    int64_t batch_for(const Problem &p, const Shape &shape, const Model &m) {
        if (o_.batch > 0) return o_.batch;
        Shape one = shape;
        one[0] = 1;
        const int64_t in_per_sample = bounded(one), out_per_sample = bounded(m.output_shape(one));
        const int64_t wanted = shape[0] * o_.multiplier;
        const BatchChoice c =
            choose_batch(wanted, max_batch_for_buffers(in_per_sample, out_per_sample), counts_.back());
        if (c.capped) {
            std::printf("%s: batch %lld (%d x %lld) has more than 2^31 - 1 bytes in one tensor, past "
                        "Halide's 32-bit indexing; running batch %lld, the largest multiple of %d "
                        "that fits\n",
                        p.id.c_str(), static_cast<long long>(wanted), o_.multiplier,
                        static_cast<long long>(shape[0]), static_cast<long long>(c.batch),
                        counts_.back());
            notes_[p.id] = "batch capped from " + std::to_string(wanted) +
                           " (2^31 - 1 bytes per Halide buffer)";
        }
        return c.batch;
    }

    static int64_t bounded(const Shape &s) {
        int64_t n = 1;
        for (int64_t d : s) n *= d;
        return n;
    }

    Tensor sentinel_output(const Shape &shape) const {
        std::vector<float> fill(size_t(bounded(shape)));
        const uint32_t bits = 0x7fc0dead;  // a quiet NaN with a payload no model writes
        float nan;
        std::memcpy(&nan, &bits, sizeof nan);
        std::fill(fill.begin(), fill.end(), nan);
        Tensor host = Tensor::from_vector(shape, fill);
        return o_.cpu_replicas ? host : host.to(Device::GPU, 0);
    }

    static bool bit_identical(const std::string &id, int n, const std::vector<float> &got,
                              const std::vector<float> &ref) {
        const BitDiff d = compare_bits(got, ref);
        if (d.identical()) return true;
        std::fprintf(stderr,
                     "fusedconv_scaling: ERROR: %s with %d replicas differs from the 1-replica "
                     "output in %zu of %zu elements (first at flat index %zu)\n",
                     id.c_str(), n, d.differing, ref.size(), d.first);
        return false;
    }

    ScalingRecord record(const Problem &p, const Shape &shape, int n, const tools::Timing &t) {
        ScalingRecord r;
        r.problem = p.id;
        r.system = kSystem;
        r.devices = n;
        r.shape = shape;
        r.median_s = t.median_ms / 1e3;
        r.min_s = t.min_ms / 1e3;
        r.samples_per_s = throughput(shape[0], r.median_s);
        r.device = device_;
        r.gpu_count = gpu_count_;
        r.date = today();
        r.commit = o_.commit;
        r.data = data_note(o_.cpu_replicas);
        r.reps = o_.reps;
        r.warmup = o_.warmup;
        std::string note = p.id == "p83" ? "p83 in eval mode (split training-mode dropout is refused)" : "";
        if (auto it = notes_.find(p.id); it != notes_.end()) note += (note.empty() ? "" : "; ") + it->second;
        r.note = note;
        return r;
    }

    Options o_;
    std::vector<int> counts_;
    std::string device_;
    int gpu_count_;
    std::vector<ScalingRecord> records_;
    std::vector<std::string> skipped_;
    std::map<std::string, std::string> notes_;
    bool failed_ = false;
};

int run(int argc, char **argv) {
    Options o;
    std::string problems = "p24,p25,p32,p83";
    CLI::App app{"fusedconv_scaling: data-parallel throughput of each model over 1, 2, 4, 8 GPUs "
                 "(sharded_forward_into; input and output on GPU 0)"};
    app.add_option("-p,--problems", problems, "Comma-separated problems")->capture_default_str();
    app.add_option("--shape", o.shapes,
                   "Input shape of a problem instead of its default, PyTorch order, e.g. "
                   "p24=2,3,4,6,7 (repeatable; its batch is scaled by --batch-multiplier)")
        ->take_all();
    app.add_option("--batch", o.batch,
                   "Batch of every model (0: --batch-multiplier x the shape's batch)")
        ->capture_default_str()
        ->check(tools::integer_in(0, std::numeric_limits<int>::max()));
    app.add_option("--batch-multiplier", o.multiplier,
                   "Batch = this x the model's default (or --shape) batch, capped to what one "
                   "Halide buffer holds (2^31 - 1 bytes)")
        ->capture_default_str()
        ->check(tools::integer_in(1, 1 << 20));
    CLI::Option *devices_opt = app.add_option("--devices", o.devices,
                   "Comma-separated replica counts, replica i on GPU i (default: powers of two up "
                   "to the visible GPUs, plus their number; 1 is always run)");
    app.add_flag("--cpu-replicas", o.cpu_replicas,
                 "Simulated devices: every replica on the CPU, one thread each (CI; default "
                 "counts 1, 2)");
    app.add_option("-r,--reps", o.reps, "Timed runs")
        ->capture_default_str()
        ->check(tools::integer_in(1, 1000000));
    app.add_option("-w,--warmup", o.warmup, "Warm-up runs")
        ->capture_default_str()
        ->check(tools::integer_in(0, 1000000));
    app.add_option("--seed", o.seed, "Seed of every replica's parameters")
        ->capture_default_str()
        ->check(tools::uint64_value());
    app.add_option("--results", o.results,
                   "Results file to merge into ('-' for none; default "
                   "bench/results/scaling-<device>.json, relative to the current directory)");
    app.add_option("--commit", o.commit,
                   "Commit recorded in the results (default: the build's, " FUSEDCONV_COMMIT ")")
        ->capture_default_str();
    if (int code = tools::parse_or_exit_code(app, argc, argv); code >= 0) return code;

    // Usage errors (exit 2) are all found before any measurement.
    std::vector<Work> work;
    std::vector<int> counts;
    std::string device, results_path;
    int gpu_count = 0;
    try {
        for (const std::string &id : tools::split_list(problems)) {
            const Problem &p = find_problem(id);
            work.push_back({&p, p.default_input});
        }
        if (work.empty()) throw Error("-p names no problem: nothing to run");
        for (const std::string &spec : o.shapes) {
            const size_t eq = spec.find('=');
            if (eq == std::string::npos) throw Error("--shape '" + spec + "': expected ID=N,C,...");
            const Problem &p = find_problem(spec.substr(0, eq));
            bool found = false;
            for (Work &w : work) {
                if (w.problem == &p) w.shape = parse_shape(p, spec.substr(eq + 1)), found = true;
            }
            if (!found) throw Error("--shape " + spec + ": " + p.id + " is not in -p");
        }
        const bool counts_given = devices_opt->count() > 0;
        if (counts_given) counts = parse_device_counts(o.devices);  // "" is an error too
        if (o.cpu_replicas) {
            if (!counts_given) counts = {1, 2};
            device = kCpuDevice;
        } else {
            gpu_count = gpu_available() ? cuda_device_count() : 0;
            if (gpu_count == 0) {
                throw Error(std::string(!counts_given
                                            ? "needs CUDA GPUs"
                                            : "--devices " + o.devices + " asks for " +
                                                  std::to_string(counts.back()) + " GPUs") +
                            ", but none is usable: " + gpu_unavailable_reason() +
                            " (--cpu-replicas runs the replicas on the CPU instead)");
            }
            if (counts.empty()) counts = default_device_counts(gpu_count);
            if (counts.back() > gpu_count) {
                throw Error("--devices asks for " + std::to_string(counts.back()) + " GPUs, but " +
                            std::to_string(gpu_count) + " " + (gpu_count == 1 ? "is" : "are") +
                            " visible");
            }
            device = gpu_info(0).name;
        }
        if (o.results != "-") {
            results_path = o.results.empty()
                               ? "bench/results/scaling-" + device_slug(device) + ".json"
                               : o.results;
            prepare_results_file(results_path);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv_scaling: %s\n", e.what());
        return 2;
    }

    try {
        std::printf("device %s, %d GPU%s visible; replica counts:", device.c_str(), gpu_count,
                    gpu_count == 1 ? "" : "s");
        for (int n : counts) std::printf(" %d", n);
        std::printf("\ndata: %s\n", data_note(o.cpu_replicas).c_str());
        Scaling scaling(o, counts, device, gpu_count);
        for (const Work &w : work) scaling.run(w);
        scaling.print_table();
        if (!results_path.empty()) {
            const auto records = scaling.records_json();
            merge_into_file(results_path, records);
            std::printf("merged %zu records into %s\n", records.size(), results_path.c_str());
        }
        if (scaling.failed()) {
            std::fprintf(stderr, "fusedconv_scaling: FAILED (see the errors above)\n");
            return 1;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fusedconv_scaling: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace
}  // namespace fusedconv::bench

int main(int argc, char **argv) { return fusedconv::bench::run(argc, argv); }
