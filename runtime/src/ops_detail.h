// The functional entry points of ops.h with the name that their messages
// start with: "p24_forward" for the public functions and the C ABI, the
// class name ("Conv3dMinSoftmax") when a model calls them.
#pragma once

#include "fusedconv/ops.h"

#include <string>

namespace fusedconv::detail {

Shape p24_shape(const char *who, const Shape &input, const Shape &weight, int dim);
Shape p25_shape(const char *who, const Shape &input, const Shape &weight);
Shape p32_shape(const char *who, const Shape &input, const Shape &weight);
Shape p83_shape(const char *who, const Shape &input, const Shape &weight, int groups);

void p24_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             int dim, Tensor &output, const ExecOptions &options);
void p25_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             Tensor &output, const ExecOptions &options);
void p32_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             float scale_factor, Tensor &output, const ExecOptions &options);
void p83_run(const char *who, const Tensor &input, const Tensor &weight, const Tensor &bias,
             const Tensor &norm_weight, const Tensor &norm_bias, const P83Params &params,
             Tensor &output, const ExecOptions &options);

// Throws Error("<who>: dim <d> is not supported; only dim=2 (depth) is").
void check_p24_dim(const char *who, int dim);
// Throws Error("<who>: dropout probability has to be between 0 and 1, but got <p>").
void check_dropout_p(const char *who, float p);
// Throws Error naming `groups` unless 1 <= groups and groups divides out_channels.
void check_groups(const char *who, int groups, int64_t out_channels);

}  // namespace fusedconv::detail
