// The four models, each mirroring its PyTorch module: constructed with the
// module's init arguments, owning its parameters, forward(input) -> output.
//
// Parameters start with PyTorch's default init (kaiming-uniform with
// a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias;
// GroupNorm weight 1, bias 0) drawn from `seed`, or are set from tensors in
// PyTorch's layout. They live on the model's device (the CPU or one CUDA
// device, cuda:0 unless moved with to()); on the GPU, inputs, parameters and
// outputs stay device-resident and nothing is copied between calls.
// forward() requires the input on the model's device (Tensor::to). A forward
// runs the functional entry point of ops.h with the model's parameters, on
// ExecOptions::stream of the model's device (default: its legacy default
// stream); ops.h says which models wait for the host and which can be
// captured into a CUDA graph.
//
// Thread safety:
// - forward() and forward_into() may run at the same time from several
//   threads, on one model or several, on the same or different streams and
//   devices; each call reads the model's parameters and settings only.
// - The setters (set_parameters, set_*, to) must not run while another
//   thread uses the same model (as with any C++ object).
// - Tensors are handles to shared storage: concurrent calls that write the
//   same output storage race, as they would in PyTorch.
// - Work queued on two streams is ordered only by the caller (events,
//   synchronization): reading an output on another stream or on the host
//   needs that stream's work finished (synchronize()).
#pragma once

#include "fusedconv/device.h"
#include "fusedconv/error.h"
#include "fusedconv/ops.h"
#include "fusedconv/tensor.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace fusedconv {

// Shared by the four models: device, the convolution's parameters, output
// shape.
class Model {
public:
    virtual ~Model() = default;
    Device device() const { return device_; }
    // The CUDA device index of a GPU model; -1 on the CPU.
    int device_index() const { return device_index_; }
    // Moves the parameters to `device` (for the GPU: CUDA device
    // `device_index`), like PyTorch's module.to(); throws Error naming an
    // index out of range, and then leaves the model as it was.
    void to(Device device, int device_index = 0);
    // The convolution's weight (PyTorch layout) and bias, on device(): like
    // PyTorch's module.weight, the model's own storage (a Tensor copy shares
    // it, so writes through one change the model; clone() gives an
    // independent copy, as state_dict() does).
    const Tensor &conv_weight() const { return weight_; }
    const Tensor &conv_bias() const { return bias_; }
    // Output shape for an input shape; throws Error naming the mismatch (also
    // when the output would be past Halide's 32-bit indexing, 2^31 - 1 bytes,
    // as with more output than input channels).
    virtual Shape output_shape(const Shape &input_shape) const = 0;
    // Runs the model; the output is a new tensor on the model's device
    // (on the GPU, from allocations of options.stream).
    Tensor forward(const Tensor &input, const ExecOptions &options = {});
    // Runs the model into `output` (already of output_shape, on the device,
    // not sharing storage with `input` or with the model's parameters: the
    // models cannot run in place): with a reused output no device allocation
    // happens per call.
    virtual void forward_into(const Tensor &input, Tensor &output,
                              const ExecOptions &options = {}) = 0;

protected:
    explicit Model(DeviceChoice choice);
    void check_input(const Tensor &input) const;
    // `output` defined, of shape `expected`, on the model's device and not
    // sharing storage with `input` (already checked by check_input) or with
    // any of parameters().
    void check_output(const Tensor &input, const Tensor &output, const Shape &expected) const;
    // The model's parameter tensors with their state_dict names.
    virtual std::vector<std::pair<const char *, const Tensor *>> parameters() const {
        return {{"conv.weight", &weight_}, {"conv.bias", &bias_}};
    }
    // A parameter in PyTorch layout, copied onto the model's device after
    // its shape is checked against `expected`.
    Tensor adopt(const Tensor &value, const Shape &expected, const char *name) const;
    Device device_;
    int device_index_;
    Tensor weight_, bias_;  // set by each model's constructor and set_parameters
};

// p24: Conv3d(in, out, k) -> torch.min(x, dim)[0] -> softmax(dim=1).
// Only dim = 2 (depth) is supported; another dim throws Error.
class Conv3dMinSoftmax : public Model {
public:
    Conv3dMinSoftmax(int in_channels, int out_channels, int kernel_size, int dim = 2,
                     DeviceChoice device = DeviceChoice::Auto, uint64_t seed = 0);
    void set_parameters(const Tensor &conv_weight, const Tensor &conv_bias);
    Shape output_shape(const Shape &input_shape) const override;
    void forward_into(const Tensor &input, Tensor &output,
                      const ExecOptions &options = {}) override;

private:
    int in_channels_, out_channels_, kernel_size_;
};

// p32 and p25 with 3x3 kernels compute the convolution by Winograd (F(4x4,
// 3x3), or F(4, 3) along x past its channel limit), check the result for the
// NaN with which that form marks the tiles where it could differ from the
// direct form (a NaN or infinity in the input, or an overflow inside its
// transforms), and recompute in the direct form the samples that hold one.
// On the GPU that check copies a count per sample to the host, so their
// forward_into waits for the call's stream to finish, as p83's does on the
// GPU for its F(4x4, 3x3) form (3x3x3 kernels, at most 3 input channels).
// p24 on a GPU of compute capability 9.0 (H100, H200) with 3x3x3 kernels, at
// most 3 input and 24 output channels and an input height of at least 4 runs
// its conv on the tensor cores
// (wgmma) and checks channel 0 of its result for NaN in the same way, so it
// waits too; elsewhere, and on a stream being captured into a CUDA graph, it
// copies nothing back to the host.

// p32: Conv2d(in, out, k) -> x * scale_factor -> torch.min(x, dim=1, keepdim=True)[0].
class Conv2dScaleMin : public Model {
public:
    Conv2dScaleMin(int in_channels, int out_channels, int kernel_size, float scale_factor,
                   DeviceChoice device = DeviceChoice::Auto, uint64_t seed = 0);
    void set_parameters(const Tensor &conv_weight, const Tensor &conv_bias);
    void set_scale_factor(float scale_factor);
    float scale_factor() const { return scale_; }
    Shape output_shape(const Shape &input_shape) const override;
    void forward_into(const Tensor &input, Tensor &output,
                      const ExecOptions &options = {}) override;

private:
    int in_channels_, out_channels_, kernel_size_;
    float scale_;
};

// p25: Conv2d(in, out, k) -> torch.min(x, dim=1, keepdim=True)[0] -> tanh -> tanh.
class Conv2dMinTanhTanh : public Model {
public:
    Conv2dMinTanhTanh(int in_channels, int out_channels, int kernel_size,
                      DeviceChoice device = DeviceChoice::Auto, uint64_t seed = 0);
    void set_parameters(const Tensor &conv_weight, const Tensor &conv_bias);
    Shape output_shape(const Shape &input_shape) const override;
    void forward_into(const Tensor &input, Tensor &output,
                      const ExecOptions &options = {}) override;

private:
    int in_channels_, out_channels_, kernel_size_;
};

// p83: Conv3d(in, out, k) -> GroupNorm(groups, out) -> torch.min(x, min_value)
// -> torch.clamp(x, clamp_min, clamp_max) -> Dropout(p).
// PyTorch's module clamps with (min_value, max_value); set_clamp() sets the
// clamp bounds on their own, so that variants where GroupNorm reaches the
// output exist. Training mode is the default, as for a fresh PyTorch module;
// the dropout mask is a pure function of (seed, element index).
class Conv3dGroupNormMinClampDropout : public Model {
public:
    Conv3dGroupNormMinClampDropout(int in_channels, int out_channels, int kernel_size,
                                   int groups, float min_value, float max_value,
                                   float dropout_p, DeviceChoice device = DeviceChoice::Auto,
                                   uint64_t seed = 0);
    void set_parameters(const Tensor &conv_weight, const Tensor &conv_bias,
                        const Tensor &norm_weight, const Tensor &norm_bias);
    void set_min_value(float min_value);
    void set_clamp(float clamp_min, float clamp_max);
    void set_dropout_p(float p);        // throws Error outside [0, 1]
    void set_training(bool training);   // false: dropout is the identity
    void set_dropout_seed(uint32_t seed);
    // GroupNorm's eps (PyTorch's default 1e-5); throws Error unless finite
    // and > 0.
    void set_eps(float eps);
    float min_value() const { return min_value_; }
    float clamp_min() const { return clamp_lo_; }
    float clamp_max() const { return clamp_hi_; }
    float dropout_p() const { return p_; }
    bool training() const { return training_; }
    uint32_t dropout_seed() const { return dropout_seed_; }
    float eps() const { return eps_; }
    int groups() const { return groups_; }
    const Tensor &norm_weight() const { return gamma_; }  // shared like conv_weight()
    const Tensor &norm_bias() const { return beta_; }
    Shape output_shape(const Shape &input_shape) const override;
    void forward_into(const Tensor &input, Tensor &output,
                      const ExecOptions &options = {}) override;

protected:
    std::vector<std::pair<const char *, const Tensor *>> parameters() const override {
        return {{"conv.weight", &weight_}, {"conv.bias", &bias_}, {"norm.weight", &gamma_},
                {"norm.bias", &beta_}};
    }

private:
    int in_channels_, out_channels_, kernel_size_, groups_;
    float min_value_, clamp_lo_, clamp_hi_, p_, eps_ = 1e-5f;
    bool training_ = true;
    uint32_t dropout_seed_ = 0;
    Tensor gamma_, beta_;
};

}  // namespace fusedconv
