// safetensors interchange: tensors and PyTorch state_dicts in and out.
//
// The format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}   (optional)
// then the data buffer; offsets are relative to the buffer, which the tensors
// cover exactly (no holes, no overlaps). PyTorch writes and reads these files with
// `safetensors.torch.save_file(model.state_dict(), path)` / `load_file(path)`.
//
// Every malformed file (truncated, bad JSON, an entry with missing or wrongly
// typed fields, offsets outside the buffer or not matching the shape and dtype,
// ...) is reported as a fusedconv::Error naming the file and the problem.
#pragma once

#include "fusedconv/models.h"
#include "fusedconv/tensor.h"

#include <map>
#include <string>

namespace fusedconv {

// Reads every tensor of a safetensors file into a host (CPU) float32 tensor,
// keyed by name. F32 is taken as is; F64, F16 and BF16 are converted to
// float32 (F64 rounds to nearest, out-of-range values become +-inf); any
// other dtype is an Error naming the tensor and the dtype. Tensors need at
// least one dimension and positive sizes (fusedconv tensors cannot be empty
// or 0-dimensional), so such entries are rejected too. "__metadata__" is
// accepted and ignored.
std::map<std::string, Tensor> load_safetensors(const std::string &path);

// Writes `tensors` as F32 (GPU tensors are copied to the host first): keys
// sorted, data contiguous in key order, header padded with spaces to a
// multiple of 8 bytes. The name "__metadata__", undefined tensors and
// tensors of more than 64 dimensions (which load_safetensors refuses) are
// rejected. Nothing is lost on failure: the data goes to a new file beside
// `path` that replaces it only once complete, so a failed save (a full disk,
// say) leaves the previous file as it was. A `path` that is a directory, a
// FIFO or a device is refused; a symbolic link is followed (its target is
// replaced, keeping its permission bits).
void save_safetensors(const std::string &path, const std::map<std::string, Tensor> &tensors);

// PyTorch state_dict names of a model's parameters: "conv.weight" and
// "conv.bias" for all four models, plus "norm.weight" and "norm.bias" for
// Conv3dGroupNormMinClampDropout (p83).
//
// Sets the model's parameters from `state` (host or device tensors; they are
// copied onto the model's device) through the model's set_parameters, which
// checks their shapes. Strict as PyTorch's load_state_dict(strict=True): a
// missing or an unexpected key is an Error naming it and listing the keys
// present; so is a wrongly shaped tensor (named by its key). On any error the
// model's parameters are left unchanged.
void load_state_dict(Model &model, const std::map<std::string, Tensor> &state);
// The model's parameters under the same names: copies on the model's device
// (changing them does not change the model).
std::map<std::string, Tensor> state_dict(const Model &model);

}  // namespace fusedconv
