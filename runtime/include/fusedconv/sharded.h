// Data-parallel forward: one batch split over several replicas of a model,
// each already placed on its own device (a GPU index, or the CPU), run at
// the same time from one thread per replica, gathered into one output.
//
// The batch (dim 0) is cut into contiguous ranges as even as possible: with
// B samples and n replicas, the first B % n replicas get B / n + 1 samples,
// the others B / n; when B < n, replicas past the B-th get nothing and do
// not run. Every model computes each sample on its own, so the output is
// bit-identical to one replica's forward of the whole batch (same kernels,
// same arithmetic per sample) -- except for p83's dropout in training mode,
// whose mask is keyed on the element's index in the whole tensor: a shard
// that starts at sample n0 > 0 would draw another mask, so that case is
// refused (Error) rather than silently changed; eval mode, p = 0 and p = 1
// do not depend on the index and are accepted.
//
// The caller's responsibility (not checked): the replicas are the same
// model kind with the same parameters and settings (as after copying one
// model's state_dict into each); otherwise the shards are computed by
// different models.
//
// Input and output may live anywhere (the CPU or any GPU). A shard whose
// replica is on the device of the input (or output) reads (writes) a
// batch_range view of it in place; otherwise the shard is copied to the
// replica's device, run there, and copied back into the output; between
// two GPUs these copies go peer to peer on two copy streams of the
// replica's GPU (in and out), after the call has waited for the work queued
// on the input's and output's GPUs (the legacy default stream and the
// blocking streams it orders). p24's shards, whose forward only queues
// kernels, are then run in 4 pieces, each piece's copies overlapping the
// other pieces' forwards. GPU work
// runs on each device's legacy default stream, as Model::forward with
// default ExecOptions: when a shard ran in place on a GPU, the call may
// return before that work finishes (synchronize() before reading the output
// from another stream; Tensor::to and to_vector already wait for it).
//
// Errors: bad arguments (no replicas, a null one, undefined tensors, an
// output of the wrong shape or sharing the input's storage, p83's split
// dropout) throw Error before any work. A replica whose shard fails (such as
// one built with other in_channels) is reported as an Error naming the
// replica's index, device and sample range, with the first failure's
// message; the other shards still run, so the output's contents are then
// unspecified. All threads are joined before any return or throw.
// A single shard (one replica, or a batch of one) runs on the calling thread.
#pragma once

#include "fusedconv/models.h"
#include "fusedconv/tensor.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace fusedconv {

// The sample ranges [begin, end) of each replica that runs, in replica
// order, for `batch` samples over `replicas` replicas (both > 0).
std::vector<std::pair<int64_t, int64_t>> shard_ranges(int64_t batch, int replicas);

// Runs `input` through the replicas into `output` (already of the models'
// output shape for input.shape(), on any device, not sharing storage with
// `input`). Thread safety: as for Model::forward_into on each replica.
void sharded_forward_into(const std::vector<Model *> &replicas, const Tensor &input,
                          Tensor &output);

// As sharded_forward_into, into a new tensor on the input's device.
Tensor sharded_forward(const std::vector<Model *> &replicas, const Tensor &input);

}  // namespace fusedconv
