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
    // Copies src's values into dst (same shape, on two different GPUs) peer
    // to peer after the work queued on the legacy default stream of
    // `stream_device` (src's or dst's device) and waits for it
    // (cuda::copy_peer_and_wait). Work queued on the other device that
    // writes src or uses dst is not waited for: the caller orders it.
    static void copy_peer(const Tensor &src, Tensor &dst, int stream_device);
};

}  // namespace fusedconv::detail
