// fusedconv: runs the four models at their default shapes on the best
// available device, times them and checks each against a float64 reference.
// With --weights / --input / --output (one model), parameters and input come
// from PyTorch safetensors files and the output goes to one; a --weights
// file's conv.weight shape sets the channel counts and kernel size, and flags
// set the other init arguments, so a user's own model runs too.
#include "checks.h"
#include "cli_options.h"
#include "run_tools.h"

#include "fusedconv/error.h"
#include "fusedconv/safetensors.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace {

// --input: the tensor "input" of the file, or its only tensor.
fusedconv::Tensor pick_input(const std::map<std::string, fusedconv::Tensor> &tensors,
                             const std::string &path) {
    auto it = tensors.find("input");
    if (it != tensors.end()) return it->second;
    if (tensors.size() == 1) return tensors.begin()->second;
    std::string keys;
    for (const auto &entry : tensors) keys += (keys.empty() ? "'" : ", '") + entry.first + "'";
    throw fusedconv::Error("--input: safetensors file '" + path + "' has no tensor \"input\" (" +
                           (tensors.empty() ? std::string("it holds no tensors")
                                            : "it holds " + std::to_string(tensors.size()) +
                                                  ": " + keys) +
                           "); store the input under the key \"input\"");
}

// --output: fails before any work when the file cannot be created there,
// would replace something that is not a file, or is the --input file.
void check_output_path(const std::string &path, const std::string &input_path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (path.empty()) throw fusedconv::Error("--output: empty file name");
    if (fs::is_directory(path, ec)) {
        throw fusedconv::Error("--output: '" + path + "' is a directory");
    }
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
        throw fusedconv::Error("--output: '" + path +
                               "' exists and is not a regular file (a device or a FIFO?)");
    }
    if (!input_path.empty() && fs::equivalent(path, input_path, ec)) {
        throw fusedconv::Error("--output: '" + path + "' is the --input file; the output "
                               "would replace the input");
    }
    fs::path dir = fs::path(path).parent_path();
    if (!dir.empty() && !fs::is_directory(dir, ec)) {
        throw fusedconv::Error("--output: directory '" + dir.string() + "' of '" + path +
                               "' does not exist");
    }
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
    app.add_option("-d,--device", device, "auto (GPU when usable), cpu or gpu (also: cuda)")
        ->capture_default_str();
    CLI::Option *batch_opt =
        app.add_option("-b,--batch", opt.batch, "Batch size (0: each model's default)")
            ->check(tools::integer_in(0, std::numeric_limits<int64_t>::max()));
    app.add_option("-r,--reps", opt.reps, "Timed repetitions (0: 20 on GPU, 3 on CPU)")
        ->check(tools::integer_in(0, std::numeric_limits<int>::max()));
    app.add_option("-w,--warmup", opt.warmup, "Untimed warm-up runs (default: 3 on GPU, 1 on CPU)")
        ->check(tools::integer_in(0, std::numeric_limits<int>::max()));
    app.add_option("-s,--samples", opt.samples, "Output positions checked against float64 (every one when at least their number)")
        ->capture_default_str()
        ->check(tools::integer_in(1, std::numeric_limits<int>::max()));
    app.add_option("--seed", opt.seed, "Seed of the inputs and parameters")
        ->capture_default_str()
        ->check(tools::uint64_value());
    CLI::Option *weights_opt =
        app.add_option("--weights", opt.weights_path,
                       "Parameters from a safetensors PyTorch state_dict (one model); its "
                       "conv.weight shape (Cout, Cin, k, k[, k]) sets the channels and kernel "
                       "size (default: KernelBench's)")
            ->type_name("FILE");
    CLI::Option *input_opt =
        app.add_option("--input", opt.input_path,
                       "Input: tensor \"input\" (or the only one) of a safetensors file; its "
                       "shape replaces the default (one model, no --batch)")
            ->type_name("FILE");
    CLI::Option *output_opt =
        app.add_option("--output", opt.output_path,
                       "Save the output of the timed runs as tensor \"output\" (one model)")
            ->type_name("FILE");
    // The init arguments other than the convolution's (which come from
    // KernelBench, or from conv.weight's shape in --weights).
    cli::InitArgs &init = opt.init;
    CLI::Option *dim_opt =
        app.add_option("--dim", init.dim, "p24's min dimension (only 2, the depth, is supported)")
            ->capture_default_str();
    CLI::Option *scale_opt =
        app.add_option("--scale", init.scale, "p32's scale_factor")->capture_default_str();
    const std::vector<CLI::Option *> p83_opts = {
        app.add_option("--groups", init.groups, "p83's GroupNorm groups (dividing its output channels)")
            ->capture_default_str()
            ->check(tools::integer_in(1, std::numeric_limits<int>::max())),
        app.add_option("--min-value", init.min_value, "p83's min_value: torch.min(x, min_value), then the clamp's lower bound")
            ->capture_default_str(),
        app.add_option("--max-value", init.max_value, "p83's max_value: the clamp's upper bound")
            ->capture_default_str(),
        app.add_option("--dropout-p", init.dropout_p, "p83's dropout probability, in [0, 1]")
            ->capture_default_str(),
        app.add_option("--eps", init.eps, "p83's GroupNorm eps (> 0)")->capture_default_str()};
    CLI::Option *eval_opt = app.add_flag(
        "--eval", opt.eval, "p83 in eval mode: dropout is the identity (default: training mode)");
    // Usage errors exit with 2, as the README says (CLI11's own codes are
    // 105, 109, ...); --help exits with 0.
    if (int code = tools::parse_or_exit_code(app, argc, argv); code >= 0) return code;

    std::vector<std::string> names = fusedconv::tools::split_list(models);
    try {
        opt.device = parse_device_choice(device);
        if (names.empty()) throw Error("--models: no model named");
        for (const std::string &n : names) {
            bool known = false;
            for (const std::string &k : cli::model_names()) known = known || k == n;
            if (!known) throw Error("unknown model '" + n + "' (expected p24, p25, p32 or p83)");
        }
        auto named = [&](const char *m) {
            return std::find(names.begin(), names.end(), m) != names.end();
        };
        for (const std::string &n : names) {
            if (std::count(names.begin(), names.end(), n) > 1) {
                throw Error("--models names '" + n + "' more than once ('" + models +
                            "'); name each model at most once");
            }
        }
        const bool files = weights_opt->count() || input_opt->count() || output_opt->count();
        if (files && names.size() != 1) {
            throw Error("--weights, --input and --output need exactly one model in --models, "
                        "got '" + models + "'");
        }
        if (input_opt->count() && batch_opt->count()) {
            throw Error("--batch cannot be combined with --input: the input's shape sets the "
                        "batch");
        }
        if (scale_opt->count() && !named("p32")) {
            throw Error("--scale sets p32's scale_factor, but p32 is not in --models");
        }
        if (dim_opt->count() && !named("p24")) {
            throw Error("--dim sets p24's min dimension, but p24 is not in --models");
        }
        for (const CLI::Option *o : p83_opts) {
            if (o->count() && !named("p83")) {
                throw Error(o->get_name() + " sets an init argument of p83, but p83 is not in "
                            "--models");
            }
        }
        if (eval_opt->count() && !named("p83")) {
            throw Error("--eval sets p83's dropout mode, but p83 is not in --models");
        }
        if (output_opt->count()) check_output_path(opt.output_path, opt.input_path);
        if (opt.device == DeviceChoice::Auto && !gpu_available()) {
            std::printf("note: running on the CPU (%s)\n", gpu_unavailable_reason().c_str());
        }
        resolve(opt.device);  // a forced but unusable GPU fails here, before any work
        // Malformed files fail here too, before any work.
        if (weights_opt->count()) opt.weights = load_safetensors(opt.weights_path);
        if (input_opt->count()) {
            opt.input = pick_input(load_safetensors(opt.input_path), opt.input_path);
        }
        // Each model's init arguments and --input against them, before any work.
        for (const std::string &n : names) {
            const cli::ConvArgs conv =
                cli::conv_args(n, weights_opt->count() ? &opt.weights : nullptr);
            cli::check_init_args(n, conv, opt.init);
            if (input_opt->count()) cli::check_input_shape(n, conv, opt.input.shape());
        }
    } catch (const Error &e) {
        std::fprintf(stderr, "fusedconv: %s\n", e.what());
        return 2;
    }

    bool all_ok = true;
    std::printf("%-4s %-36s %-24s %-22s %-4s %11s %11s %10s  %s\n", "id", "model", "input",
                "output", "dev", "median_ms", "min_ms", "max_err", "status");
    for (const std::string &n : names) {
        cli::RunResult r = cli::run_model(n, opt);
        all_ok = all_ok && r.ok;
        if (!r.error.empty()) {
            std::printf("%-4s %-36s FAIL: %s\n", n.c_str(), r.description.c_str(), r.error.c_str());
            continue;
        }
        std::printf("%-4s %-36s %-24s %-22s %-4s %11.3f %11.3f %10.2e  %s\n", n.c_str(),
                    r.description.c_str(), shape_string(r.input_shape).c_str(),
                    shape_string(r.output_shape).c_str(), to_string(r.device).c_str(),
                    r.median_ms, r.min_ms, r.max_err, r.ok ? "ok" : "FAIL");
        for (const std::string &note : r.notes) std::printf("     %s\n", note.c_str());
        std::fflush(stdout);
    }
    // A results table that could not be written (a full disk, a closed pipe)
    // is a failed run, not a silent success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "fusedconv: writing the results to stdout failed\n");
        return 1;
    }
    return all_ok ? 0 : 1;
}
