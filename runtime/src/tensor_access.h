// The library's own access to a tensor's stream bookkeeping (not public API).
#pragma once

#include "fusedconv/tensor.h"

namespace fusedconv::detail {

struct TensorAccess {
    // Tensor::empty whose GPU storage comes from Halide's cache for `stream`
    // (reused only from allocations freed on that stream) and returns there.
    static Tensor empty_on_stream(const Shape &shape, Device device, int device_index,
                                  void *stream);
    // Records that work on `stream` used `t` (a GPU tensor): its storage,
    // when freed, goes back to the cache for that stream.
    static void note_stream(const Tensor &t, void *stream);
    // Copies src's values into dst (same shape, either device), on the
    // legacy default stream of the GPU side, like Tensor::to.
    static void copy_into(const Tensor &src, Tensor &dst);
};

}  // namespace fusedconv::detail
