// fusedconv: runs the four models at their default shapes on the best
// available device, times them and checks each against a float64 reference.
#include "checks.h"

#include "fusedconv/error.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>

namespace {

std::vector<std::string> split_list(const std::string &s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    using namespace fusedconv;
    CLI::App app{"fusedconv: fused Halide pipelines of four small conv models (p24, p25, p32, "
                 "p83), timed and checked against a float64 reference"};
    std::string models = "p24,p25,p32,p83", device = "auto";
    cli::RunOptions opt;
    app.add_option("-m,--models", models, "Comma-separated models to run (p24,p25,p32,p83)")
        ->capture_default_str();
    app.add_option("-d,--device", device, "auto (GPU when usable), cpu or gpu")
        ->capture_default_str();
    app.add_option("-b,--batch", opt.batch, "Batch size (0: each model's default)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-r,--reps", opt.reps, "Timed repetitions (0: 20 on GPU, 3 on CPU)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-w,--warmup", opt.warmup, "Untimed warm-up runs (default: 3 on GPU, 1 on CPU)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-s,--samples", opt.samples, "Output positions checked against float64")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_option("--seed", opt.seed, "Seed of the inputs and parameters")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    std::vector<std::string> names = split_list(models);
    try {
        opt.device = parse_device_choice(device);
        if (names.empty()) throw Error("--models: no model named");
        for (const std::string &n : names) {
            bool known = false;
            for (const std::string &k : cli::model_names()) known = known || k == n;
            if (!known) throw Error("unknown model '" + n + "' (expected p24, p25, p32 or p83)");
        }
        if (opt.device == DeviceChoice::Auto && !gpu_available()) {
            std::printf("note: running on the CPU (%s)\n", gpu_unavailable_reason().c_str());
        }
        resolve(opt.device);  // a forced but unusable GPU fails here, before any work
    } catch (const Error &e) {
        std::fprintf(stderr, "fusedconv: %s\n", e.what());
        return 2;
    }

    bool all_ok = true;
    std::printf("%-4s %-36s %-24s %-18s %-4s %11s %11s %10s  %s\n", "id", "model", "input",
                "output", "dev", "median_ms", "min_ms", "max_err", "status");
    for (const std::string &n : names) {
        cli::RunResult r = cli::run_model(n, opt);
        all_ok = all_ok && r.ok;
        if (!r.error.empty()) {
            std::printf("%-4s %-36s FAIL: %s\n", n.c_str(), r.description.c_str(), r.error.c_str());
            continue;
        }
        std::printf("%-4s %-36s %-24s %-18s %-4s %11.3f %11.3f %10.2e  %s\n", n.c_str(),
                    r.description.c_str(), shape_string(r.input_shape).c_str(),
                    shape_string(r.output_shape).c_str(), to_string(r.device).c_str(),
                    r.median_ms, r.min_ms, r.max_abs_err, r.ok ? "ok" : "FAIL");
        for (const std::string &note : r.notes) std::printf("     %s\n", note.c_str());
        std::fflush(stdout);
    }
    return all_ok ? 0 : 1;
}
