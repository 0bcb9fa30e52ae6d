// The functional entry points: validation of every argument, then the
// generated pipeline for the tensors' device, under a cuda::Scope that points
// Halide's CUDA hooks at that device and the caller's stream.
#include "fusedconv/ops.h"

#include "batch_halves.h"
#include "cuda_context.h"
#include "halide_call.h"
#include "model_util.h"
#include "nan_check.h"
#include "ops_detail.h"
#include "shape_variants.h"
#include "tensor_access.h"

#include "p24_cpu.h"
#include "p24_cuda.h"
#include "p24_wg_cuda.h"
#include "p25_cpu.h"
#include "p25_cuda.h"
#include "p25_tc_cuda.h"
#include "p25_xy_cuda.h"
#include "p32_cpu.h"
#include "p32_cuda.h"
#include "p32_tc_cuda.h"
#include "p32_xy_cuda.h"
#include "winograd2d_limits.h"
#include "p83_cpu.h"
#include "p83_cuda.h"
#include "p83_xy_cuda.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fusedconv {

namespace detail {

namespace {

std::string prefix(const char *who) { return std::string(who) + ": "; }

// %.9g: every float distinct (to_string's 6 decimals print 1.0000001 as
// "1.000000" and -1e-10 as "-0.000000").
std::string float_string(float v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
    return text;
}

std::string where(const Tensor &t) { return device_string(t.device(), t.device_index()); }

// The conv weight (Cout, Cin, k...) of `spatial` dimensions, checked.
struct ConvDims {
    int64_t cout, cin, k;
};

ConvDims conv_dims(const char *who, const Shape &weight, int spatial) {
    const size_t rank = 2 + spatial;
    const char *layout = spatial == 3 ? "(Cout, Cin, k, k, k)" : "(Cout, Cin, k, k)";
    if (weight.size() != rank) {
        throw Error(prefix(who) + "conv.weight must have rank " + std::to_string(rank) + " " +
                    layout + ", got shape " + shape_string(weight));
    }
    for (int64_t s : weight) {
        if (s <= 0) {
            throw Error(prefix(who) + "conv.weight shape " + shape_string(weight) +
                        " has a non-positive size");
        }
    }
    for (size_t d = 3; d < rank; ++d) {
        if (weight[d] != weight[2]) {
            throw Error(prefix(who) + "conv.weight shape " + shape_string(weight) +
                        " has kernel sizes that differ; only square (cubic) kernels are supported");
        }
    }
    if (bounded_numel(weight) < 0) {
        throw Error(prefix(who) + "conv.weight shape " + shape_string(weight) + " has " +
                    past_indexing_limit());
    }
    return {weight[0], weight[1], weight[2]};
}

Shape conv_shape(const char *who, const Shape &input, const Shape &weight, int spatial) {
    const ConvDims w = conv_dims(who, weight, spatial);
    return conv_output_shape(who, input, spatial, w.cin, w.cout, w.k,
                             "conv.weight of shape " + shape_string(weight));
}

// The tensors of one call, by name: defined, on one device, the per-channel
// parameters of the right shape, and the output checked against all of them.
class Args {
public:
    explicit Args(const char *who) : who_(who) {}

    void add(const char *name, const Tensor &t) {
        if (!t.defined()) throw Error(prefix(who_) + "the " + name + " tensor is undefined");
        if (!all_.empty()) {
            const auto &[first_name, first] = all_.front();
            if (t.device() != first->device() || t.device_index() != first->device_index()) {
                throw Error(prefix(who_) + name + " of shape " + shape_string(t.shape()) +
                            " is on " + where(t) + " but " + first_name + " of shape " +
                            shape_string(first->shape()) + " is on " + where(*first) +
                            "; every tensor of a call must be on one device");
            }
        }
        all_.emplace_back(name, &t);
    }

    // A parameter of shape (channels,).
    void add_per_channel(const char *name, const Tensor &t, int64_t channels) {
        add(name, t);
        if (t.shape() != Shape{channels}) {
            throw Error(prefix(who_) + name + " has shape " + shape_string(t.shape()) +
                        ", expected " + shape_string(Shape{channels}) + " (one value per output channel)");
        }
    }

    void check_output(const Tensor &output, const Shape &expected) {
        add("output", output);
        all_.pop_back();
        if (output.shape() != expected) {
            throw Error(prefix(who_) + "output has shape " + shape_string(output.shape()) +
                        ", expected " + shape_string(expected));
        }
        // The pipelines read every input while they write the output: shared
        // storage would give garbage, so it is refused.
        const auto out = range(output);
        for (const auto &[name, t] : all_) {
            const auto in = range(*t);
            if (in.first < out.second && out.first < in.second) {
                throw Error(prefix(who_) + "output of shape " + shape_string(output.shape()) +
                            " shares storage with the " + name + " of shape " +
                            shape_string(t->shape()) + "; the model cannot run in place");
            }
        }
    }

    // Runs `call(gpu)` on the tensors' device: on the GPU under a Scope of
    // their CUDA device and options.stream. `allocates`: the pipeline
    // allocates device memory (or waits for the host), so it cannot be
    // captured into a CUDA graph; refused on a capturing stream.
    template <typename Call>
    void run(const ExecOptions &options, const char *allocates, Call call) const {
        install_halide_error_handler();
        const Tensor &first = *all_.front().second;
        if (first.device() == Device::CPU) {
            call(false);
            return;
        }
        std::unique_ptr<cuda::Scope> scope;
        try {
            scope = std::make_unique<cuda::Scope>(first.device_index(), options.stream);
        } catch (const Error &e) {
            throw Error(prefix(who_) + e.what());
        }
        if (allocates) {
            const cuda::Capture capture = cuda::capture_status();
            if (capture != cuda::Capture::None) {
                char stream[32];
                std::snprintf(stream, sizeof stream, "%p", options.stream);
                throw Error(prefix(who_) + "stream " + stream + " of " + where(first) +
                            (capture == cuda::Capture::Active
                                 ? " is being captured into a CUDA graph"
                                 : " is in an invalidated CUDA graph capture") +
                            ", but this model " + allocates +
                            ", which a graph cannot hold; call it outside the capture");
            }
        }
        call(true);
        for (const auto &named : all_) TensorAccess::note_stream(*named.second, options.stream);
    }

private:
    static std::pair<uintptr_t, uintptr_t> range(const Tensor &t) {
        const uintptr_t begin = t.device() == Device::GPU
                                    ? reinterpret_cast<uintptr_t>(t.device_data())
                                    : reinterpret_cast<uintptr_t>(t.data());
        return {begin, begin + static_cast<uintptr_t>(t.numel()) * sizeof(float)};
    }

    const char *who_;
    std::vector<std::pair<const char *, const Tensor *>> all_;
};

constexpr const char *kAllocatesAndWaits =
    "allocates device memory for intermediates and copies a NaN count to the host";
constexpr const char *kAllocates = "allocates device memory for intermediates";

std::string what_call(const char *who, const Tensor &input) {
    return std::string(who) + " forward on input " + shape_string(input.shape());
}

}  // namespace

void check_p24_dim(const char *who, int dim) {
    // The min runs over the output's depth; PyTorch also accepts -3 for it.
    if (dim != 2 && dim != -3) {
        throw Error(prefix(who) + "dim " + std::to_string(dim) +
                    " is not supported; only dim=2 (depth) is");
    }
}

void check_dropout_p(const char *who, float p) {
    if (!(p >= 0.0f && p <= 1.0f)) {  // also rejects NaN
        throw Error(prefix(who) + "dropout probability has to be between 0 and 1, but got " +
                    float_string(p));
    }
}

void check_groups(const char *who, int groups, int64_t out_channels) {
    require_positive(who, "groups", groups);
    if (out_channels % groups != 0) {
        throw Error(prefix(who) + "groups " + std::to_string(groups) +
                    " does not divide out_channels " + std::to_string(out_channels));
    }
}

Shape p24_shape(const char *who, const Shape &input, const Shape &weight, int dim) {
    check_p24_dim(who, dim);
    const Shape conv = conv_shape(who, input, weight, 3);
    return checked_output_shape(who, input, {conv[0], conv[1], conv[3], conv[4]});
}

Shape p25_shape(const char *who, const Shape &input, const Shape &weight) {
    const Shape conv = conv_shape(who, input, weight, 2);
    return checked_output_shape(who, input, {conv[0], 1, conv[2], conv[3]});
}

Shape p32_shape(const char *who, const Shape &input, const Shape &weight) {
    return p25_shape(who, input, weight);
}

Shape p83_shape(const char *who, const Shape &input, const Shape &weight, int groups) {
    const Shape conv = conv_shape(who, input, weight, 3);
    check_groups(who, groups, weight[0]);
    return checked_output_shape(who, input, conv);
}

void p24_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             int dim, Tensor &output, const ExecOptions &options) {
    Args args(who);
    args.add("input", input);
    args.add("conv.weight", weight);
    const Shape out = p24_shape(who, input.shape(), weight.shape(), dim);
    args.add_per_channel("conv.bias", bias, weight.shape()[0]);
    args.check_output(output, out);
    args.run(options, nullptr, [&](bool gpu) {
        const std::string what = what_call(who, input);
        // On sm_90, the wgmma form where it applies, its NaN samples recomputed directly (as
        // p25's tensor-core form). It allocates its depth-minima and waits for a NaN count, so a
        // stream being captured into a CUDA graph keeps the direct form, which does neither.
        if (gpu &&
            wgmma_form_applies(input, weight, kWgmmaMaxInChannels, kWgmmaMaxOutChannels, kWgmmaMinOutHeight) &&
            cuda::capture_status() == cuda::Capture::None) {
            auto run = [&](bool wgmma, halide_buffer_t *in, halide_buffer_t *o) {
                if (!wgmma) {
                    check_halide(fusedconv_p24_cuda(in, weight.raw(), bias.raw(), o), what);
                    return;
                }
                // The wgmma kernel compiled for this shape: its tap rows at constant offsets
                // (H100: the call 0.276-0.278 ms against 0.295-0.298; shape_variants.h), with at
                // most kMaxRegisters a thread: the JIT's own choice, 128, fits 4 blocks an SM
                // (H200: the kernel 207 us against 217, ncu; the call 0.250-0.255 ms against
                // 0.261-0.262).
                constexpr int kMaxRegisters = 80;
                cuda::ShapeVariantScope variants(kMaxRegisters);
                check_halide(fusedconv_p24_wg_cuda(in, weight.raw(), bias.raw(), o), what);
            };
            // The softmax over channels makes every channel of a pixel NaN where one is (its
            // maximum or its sum NaN), so channel 0 shows every NaN pixel.
            run_winograd_or_direct(true, input, output, run, NanProbe::FirstChannel);
            return;
        }
        auto fn = gpu ? fusedconv_p24_cuda : fusedconv_p24_cpu;
        try {
            check_halide(fn(input.raw(), weight.raw(), bias.raw(), output.raw()), what);
        } catch (const Error &e) {
            // The GPU schedule keeps a block's depth-min of every output
            // channel in shared memory (schedules/p24_schedule.h), at most
            // 48 KB a block; with too many channels the kernel cannot launch.
            const std::string text = e.what();
            if (!gpu || text.find("cuLaunchKernel") == std::string::npos) throw;
            throw Error(text + " (on the GPU each block keeps the depth-min of all " +
                        std::to_string(weight.shape()[0]) +
                        " output channels in at most 48 KB of shared memory; with this many "
                        "channels it may not fit: run the model on the CPU)");
        }
    });
}

void p25_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             Tensor &output, const ExecOptions &options) {
    Args args(who);
    args.add("input", input);
    args.add("conv.weight", weight);
    const Shape out = p25_shape(who, input.shape(), weight.shape());
    args.add_per_channel("conv.bias", bias, weight.shape()[0]);
    args.check_output(output, out);
    args.run(options, kAllocatesAndWaits, [&](bool gpu) {
        const std::string what = what_call(who, input);
        auto cuda = winograd2d_applies(weight, kP25Winograd2DMaxInChannels) ? fusedconv_p25_xy_cuda : fusedconv_p25_cuda;
        // The tensor-core form where it applies; the direct recomputation of its NaN samples
        // is the other library's.
        const bool tensor_cores = gpu && tensor_core_form_applies(weight, kTensorCoreMaxInChannels);
        auto run = [&](bool winograd, halide_buffer_t *in, halide_buffer_t *o) {
            if (winograd && tensor_cores) {
                check_halide(fusedconv_p25_tc_cuda(in, weight.raw(), bias.raw(), o), what);
                return;
            }
            auto fn = gpu ? cuda : fusedconv_p25_cpu;
            check_halide(fn(in, weight.raw(), bias.raw(), winograd, o), what);
        };
        run_winograd_or_direct(winograd_applies(weight), input, output, run);
    });
}

void p32_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             float scale_factor, Tensor &output, const ExecOptions &options) {
    Args args(who);
    args.add("input", input);
    args.add("conv.weight", weight);
    const Shape out = p32_shape(who, input.shape(), weight.shape());
    args.add_per_channel("conv.bias", bias, weight.shape()[0]);
    args.check_output(output, out);
    args.run(options, kAllocatesAndWaits, [&](bool gpu) {
        const std::string what = what_call(who, input);
        auto cuda = winograd2d_applies(weight, kP32Winograd2DMaxInChannels) ? fusedconv_p32_xy_cuda : fusedconv_p32_cuda;
        // As p25's: the tensor-core form where it applies, its NaN samples recomputed directly.
        const bool tensor_cores = gpu && tensor_core_form_applies(weight, kTensorCoreWideMaxInChannels);
        auto run = [&](bool winograd, halide_buffer_t *in, halide_buffer_t *o) {
            if (winograd && tensor_cores) {
                check_halide(fusedconv_p32_tc_cuda(in, weight.raw(), bias.raw(), scale_factor, o), what);
                return;
            }
            auto fn = gpu ? cuda : fusedconv_p32_cpu;
            check_halide(fn(in, weight.raw(), bias.raw(), scale_factor, winograd, o), what);
        };
        run_winograd_or_direct(winograd_applies(weight), input, output, run);
    });
}

void p83_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             const Tensor &norm_weight, const Tensor &norm_bias, const P83Params &params,
             Tensor &output, const ExecOptions &options) {
    check_dropout_p(who, params.dropout_p);
    // > 0, as the model's set_eps and the CLI require (p83_model.cpp says why).
    if (!(params.eps > 0.0f) || std::isinf(params.eps)) {
        throw Error(prefix(who) + "eps must be finite and > 0, got " + float_string(params.eps));
    }
    Args args(who);
    args.add("input", input);
    args.add("conv.weight", weight);
    const Shape out = p83_shape(who, input.shape(), weight.shape(), params.groups);
    const int64_t cout = weight.shape()[0];
    args.add_per_channel("conv.bias", bias, cout);
    args.add_per_channel("norm.weight", norm_weight, cout);
    args.add_per_channel("norm.bias", norm_bias, cout);
    args.check_output(output, out);
    // On the GPU, 3x3x3 kernels with few input channels take the F(4x4, 3x3)
    // library, whose NaN samples are recomputed in the direct form (as
    // p25's). A tile it marks NaN makes its group's mean NaN, and so every
    // output of the group (GroupNorm, min, clamp and dropout all keep NaN):
    // the first element of each channel finds every such group.
    // Its output kernel stores vectors: the output's storage must be aligned
    // to them (else the direct library, which stores floats).
    const bool xy = output.device() == Device::GPU &&
                    winograd3d_xy_applies(weight, kP83XYMaxInChannels) &&
                    reinterpret_cast<uintptr_t>(output.device_data()) % kP83XYOutputAlignment == 0;
    args.run(options, xy ? kAllocatesAndWaits : kAllocates, [&](bool gpu) {
        const std::string what = what_call(who, input);
        auto run = [&](bool winograd, halide_buffer_t *in, halide_buffer_t *o) {
            auto fn = !gpu       ? fusedconv_p83_cpu
                      : winograd ? fusedconv_p83_xy_cuda
                                 : fusedconv_p83_cuda;
            check_halide(fn(in, weight.raw(), bias.raw(), norm_weight.raw(), norm_bias.raw(),
                            params.groups, params.eps, params.min_value, params.clamp_min,
                            params.clamp_max, params.dropout_p, params.training, params.seed, o),
                         what);
        };
        // The F(4x4, 3x3) library runs on the whole batch (a NaN sample's recomputation on its
        // samples): in two halves on two streams where batch_halves.h says so.
        const bool halves = xy && batch_halves_apply(output);
        auto whole_or_halves = [&](bool winograd, halide_buffer_t *in, halide_buffer_t *o) {
            if (!(winograd && halves)) return run(winograd, in, o);
            run_batch_halves(input, output, [&](halide_buffer_t *i, halide_buffer_t *h) {
                run(true, i, h);
            });
        };
        run_winograd_or_direct(xy, input, output, whole_or_halves, NanProbe::FirstOfEachChannel);
    });
}

}  // namespace detail

Shape p24_output_shape(const Shape &input, const Shape &weight, int dim) {
    return detail::p24_shape("p24_output_shape", input, weight, dim);
}
Shape p25_output_shape(const Shape &input, const Shape &weight) {
    return detail::p25_shape("p25_output_shape", input, weight);
}
Shape p32_output_shape(const Shape &input, const Shape &weight) {
    return detail::p32_shape("p32_output_shape", input, weight);
}
Shape p83_output_shape(const Shape &input, const Shape &weight, int groups) {
    return detail::p83_shape("p83_output_shape", input, weight, groups);
}

void p24_forward(const Tensor &input, const Tensor &weight, const Tensor &bias, int dim,
                 Tensor &output, const ExecOptions &options) {
    detail::p24_run("p24_forward", input, weight, bias, dim, output, options);
}
void p25_forward(const Tensor &input, const Tensor &weight, const Tensor &bias, Tensor &output,
                 const ExecOptions &options) {
    detail::p25_run("p25_forward", input, weight, bias, output, options);
}
void p32_forward(const Tensor &input, const Tensor &weight, const Tensor &bias,
                 float scale_factor, Tensor &output, const ExecOptions &options) {
    detail::p32_run("p32_forward", input, weight, bias, scale_factor, output, options);
}
void p83_forward(const Tensor &input, const Tensor &weight, const Tensor &bias,
                 const Tensor &norm_weight, const Tensor &norm_bias, const P83Params &params,
                 Tensor &output, const ExecOptions &options) {
    detail::p83_run("p83_forward", input, weight, bias, norm_weight, norm_bias, params, output,
                    options);
}

}  // namespace fusedconv
