#include "fusedconv/sharded.h"

#include "fusedconv/error.h"

#include "cuda_context.h"
#include "tensor_access.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace fusedconv {

namespace {

std::string range_string(std::pair<int64_t, int64_t> r) {
    return "[" + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
}

std::string where(const Model &m) { return device_string(m.device(), m.device_index()); }

bool on_device_of(const Tensor &t, const Model &m) {
    return t.device() == m.device() && t.device_index() == m.device_index();
}

// Storage shared between input and output: concurrent shards would read
// what others have already written.
bool overlapping(const Tensor &a, const Tensor &b) {
    if (a.device() != b.device() || a.device_index() != b.device_index()) return false;
    auto begin = [](const Tensor &t) {
        return t.device() == Device::GPU ? reinterpret_cast<uintptr_t>(t.device_data())
                                         : reinterpret_cast<uintptr_t>(t.data());
    };
    const uintptr_t a0 = begin(a), b0 = begin(b);
    const uintptr_t a1 = a0 + static_cast<uintptr_t>(a.numel()) * sizeof(float);
    const uintptr_t b1 = b0 + static_cast<uintptr_t>(b.numel()) * sizeof(float);
    return a0 < b1 && b0 < a1;
}

// p83's dropout mask in training mode (0 < p < 1) is a function of the
// element's index in the whole tensor: a shard starting past sample 0 would
// draw another mask than the unsharded forward. (p = 0 or 1 keeps all or
// none: no index in it.)
void refuse_index_keyed_dropout(const Model &m, size_t index, std::pair<int64_t, int64_t> range) {
    const auto *p83 = dynamic_cast<const Conv3dGroupNormMinClampDropout *>(&m);
    if (!p83 || range.first == 0 || !p83->training()) return;
    const float p = p83->dropout_p();
    if (!(p > 0.0f && p < 1.0f)) return;
    throw Error("sharded_forward: replica " + std::to_string(index) + " (" + where(m) +
                ", Conv3dGroupNormMinClampDropout) is in training mode with dropout p = " +
                std::to_string(p) + ", whose mask is keyed on each element's index in the whole "
                "batch: its shard " + range_string(range) +
                " would draw a different mask than one forward; use one replica, or eval mode "
                "(set_training(false))");
}

bool gpu_to_other_gpu(const Tensor &t, const Model &m) {
    return t.device() == Device::GPU && m.device() == Device::GPU &&
           t.device_index() != m.device_index();
}

// A shard whose input or output is on another GPU runs in pieces, so that
// the copies of one piece overlap the forwards of the others and copies in
// and out of the GPU overlap each other (NVLink carries both directions at
// once): p24 on 2 x H100 0.83-0.87 of perfect scaling in 4 pieces against
// 0.70-0.71 in one. Only for forwards that queue their work and return
// (p24): those that wait for the host (p25, p32, p83 on the GPU) measured
// slower in pieces (p25 0.53 against 0.64, p32 0.55 against 0.76), the copy
// back of the first piece waiting for the other GPU's whole forward;
// bench/README.md ("Scaling over GPUs") has the figures. (p83 must stay
// whole anyway where its dropout mask is keyed on the element's index.)
constexpr int kPiecesPerRemoteShard = 4;

int pieces_for(const Model &m) {
    return dynamic_cast<const Conv3dMinSoftmax *>(&m) ? kPiecesPerRemoteShard : 1;
}

// Waits, ignoring errors, until nothing queued on the device's legacy stream
// or on the given copy streams can still touch the shard's buffers.
void drain(int device, void *in_stream, void *out_stream) noexcept {
    auto wait = [device](void *stream) {
        try {
            cuda::stream_synchronize(device, stream);
        } catch (...) {
        }
    };
    if (in_stream) wait(in_stream);
    if (out_stream) wait(out_stream);
    wait(nullptr);  // the legacy default stream: the forwards
}

uint64_t device_address(const Tensor &t) { return reinterpret_cast<uint64_t>(t.device_data()); }
size_t byte_size(const Tensor &t) { return static_cast<size_t>(t.numel()) * sizeof(float); }

// The events of one shard's copies in, each waited for later by its piece's
// forward, destroyed with the shard.
class ShardEvents {
public:
    explicit ShardEvents(int device) : device_(device) {}
    ~ShardEvents() {
        for (void *e : events_) cuda::event_destroy(device_, e);
    }
    ShardEvents(const ShardEvents &) = delete;
    ShardEvents &operator=(const ShardEvents &) = delete;
    // A new event recorded on `stream` of the shard's device.
    void *record(void *stream) {
        events_.push_back(nullptr);  // the slot first: a recorded event is never lost
        events_.back() = cuda::event_record(device_, stream);
        return events_.back();
    }

private:
    int device_;
    std::vector<void *> events_;
};

// One replica's shard. In place when the caller's tensors are on its
// device. Otherwise through copies: between two GPUs peer to peer and
// asynchronous -- the pieces' inputs all queued on one copy stream of the
// replica's GPU, each piece's forward (on the replica's legacy default
// stream) waiting for its own input only, each piece's output copied back on
// a second copy stream as soon as its forward is done -- and to or from the
// host synchronously, as Tensor::to. The caller's pending work on the input
// and output was waited for before the shards started (sharded_forward_into).
void run_shard(Model &m, const Tensor &input, Tensor &output, std::pair<int64_t, int64_t> r) {
    const Tensor in = input.batch_range(r.first, r.second);
    Tensor out = output.batch_range(r.first, r.second);
    const bool in_here = on_device_of(in, m), out_here = on_device_of(out, m);
    if (in_here && out_here) {
        m.forward_into(in, out);
        return;
    }
    const int device = std::max(m.device_index(), 0);
    const bool pull = gpu_to_other_gpu(in, m), push = gpu_to_other_gpu(out, m);
    const Tensor local_in = in_here ? in
                            : pull  ? Tensor::empty(in.shape(), Device::GPU, device)
                                    : in.to(m.device(), device);
    Tensor local_out = out_here ? out : Tensor::empty(out.shape(), m.device(), device);
    const auto pieces = shard_ranges(in.shape()[0], pull || push ? pieces_for(m) : 1);
    void *in_stream = pull ? cuda::copy_stream(device, 0) : nullptr;
    void *out_stream = push ? cuda::copy_stream(device, 1) : nullptr;
    ShardEvents events(device);
    try {
        std::vector<void *> arrived;
        if (pull) {
            // local_in's storage may come from the allocation cache of the
            // legacy stream, where work of an earlier call may still read it.
            cuda::stream_wait_stream(device, in_stream, nullptr);
            for (const auto &p : pieces) {
                const Tensor src = in.batch_range(p.first, p.second);
                const Tensor dst = local_in.batch_range(p.first, p.second);
                cuda::copy_peer_async(in_stream, device, device, device_address(dst),
                                      in.device_index(), device_address(src), byte_size(src));
                arrived.push_back(events.record(in_stream));
            }
        }
        for (size_t k = 0; k < pieces.size(); ++k) {
            const auto &p = pieces[k];
            if (pull) cuda::stream_wait_event(device, nullptr, arrived[k]);
            Tensor piece_out = local_out.batch_range(p.first, p.second);
            m.forward_into(local_in.batch_range(p.first, p.second), piece_out);
            if (push) {
                cuda::stream_wait_stream(device, out_stream, nullptr);
                const Tensor dst = out.batch_range(p.first, p.second);
                cuda::copy_peer_async(out_stream, device, out.device_index(), device_address(dst),
                                      device, device_address(piece_out), byte_size(piece_out));
            }
        }
        // The copies out are the last users of local_out; local_in's last
        // users are the forwards, queued on the legacy stream, to whose
        // allocation cache its storage returns.
        if (push) {
            cuda::stream_synchronize(device, out_stream);
        } else if (!out_here) {
            detail::TensorAccess::copy_into(local_out, out);
        }
    } catch (...) {
        if (pull || push) drain(device, in_stream, out_stream);
        throw;
    }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> shard_ranges(int64_t batch, int replicas) {
    if (batch <= 0 || replicas <= 0) {
        throw Error("shard_ranges: needs batch > 0 and replicas > 0, got batch " +
                    std::to_string(batch) + " and " + std::to_string(replicas) + " replicas");
    }
    const int64_t shards = std::min<int64_t>(batch, replicas);
    const int64_t base = batch / shards, extra = batch % shards;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    int64_t begin = 0;
    for (int64_t i = 0; i < shards; ++i) {
        const int64_t end = begin + base + (i < extra ? 1 : 0);
        ranges.emplace_back(begin, end);
        begin = end;
    }
    return ranges;
}

void sharded_forward_into(const std::vector<Model *> &replicas, const Tensor &input,
                          Tensor &output) {
    if (replicas.empty()) throw Error("sharded_forward: the replica list is empty");
    for (size_t i = 0; i < replicas.size(); ++i) {
        if (!replicas[i]) throw Error("sharded_forward: replica " + std::to_string(i) + " is null");
    }
    if (!input.defined()) throw Error("sharded_forward: the input tensor is undefined");
    if (!output.defined()) throw Error("sharded_forward: the output tensor is undefined");
    const Shape expected = replicas[0]->output_shape(input.shape());
    if (output.shape() != expected) {
        throw Error("sharded_forward: output has shape " + shape_string(output.shape()) +
                    ", expected " + shape_string(expected) + " for input shape " +
                    shape_string(input.shape()));
    }
    if (overlapping(input, output)) {
        throw Error("sharded_forward: output of shape " + shape_string(output.shape()) +
                    " shares storage with the input of shape " + shape_string(input.shape()) +
                    " (the models cannot run in place)");
    }
    if (replicas.size() > static_cast<size_t>(INT32_MAX)) {
        throw Error("sharded_forward: " + std::to_string(replicas.size()) + " replicas is too many");
    }
    const auto ranges = shard_ranges(input.shape()[0], static_cast<int>(replicas.size()));
    for (size_t i = 0; i < ranges.size(); ++i) refuse_index_keyed_dropout(*replicas[i], i, ranges[i]);

    // The peer copies of run_shard run on the replicas' streams: the work
    // the caller queued on the input's and output's GPUs must be done first.
    const bool peer_copies =
        std::any_of(replicas.begin(), replicas.begin() + ranges.size(), [&](const Model *m) {
            return gpu_to_other_gpu(input, *m) || gpu_to_other_gpu(output, *m);
        });
    if (peer_copies) {
        if (input.device() == Device::GPU) cuda::stream_synchronize(input.device_index(), nullptr);
        if (output.device() == Device::GPU && !(input.device() == Device::GPU &&
                                                input.device_index() == output.device_index())) {
            cuda::stream_synchronize(output.device_index(), nullptr);
        }
    }

    // One failure slot per shard, written only by its thread (read after join).
    std::vector<std::string> failures(ranges.size());
    auto shard = [&](size_t i) {
        try {
            run_shard(*replicas[i], input, output, ranges[i]);
        } catch (const std::exception &e) {
            failures[i] = e.what();
            if (failures[i].empty()) failures[i] = "unknown error";
        } catch (...) {
            failures[i] = "unknown (non-standard) exception";
        }
    };
    if (ranges.size() == 1) {
        shard(0);  // nothing to overlap with: no thread
    } else {
        std::vector<std::thread> threads;
        threads.reserve(ranges.size());
        try {
            for (size_t i = 0; i < ranges.size(); ++i) threads.emplace_back(shard, i);
        } catch (const std::exception &e) {
            // Nothing may be left running when we return.
            for (std::thread &t : threads) t.join();
            throw Error("sharded_forward: could not start the thread of replica " +
                        std::to_string(threads.size()) + ": " + e.what());
        }
        for (std::thread &t : threads) t.join();
    }

    size_t failed = 0, first = ranges.size();
    for (size_t i = 0; i < ranges.size(); ++i) {
        if (failures[i].empty()) continue;
        ++failed;
        if (first == ranges.size()) first = i;
    }
    if (failed == 0) return;
    std::string message = "sharded_forward: replica " + std::to_string(first) + " (" +
                           where(*replicas[first]) + ") failed on samples " +
                           range_string(ranges[first]) + ": " + failures[first];
    if (failed > 1) {
        message += " (and " + std::to_string(failed - 1) + " more replica" +
                   (failed > 2 ? "s" : "") + " failed)";
    }
    throw Error(message);
}

Tensor sharded_forward(const std::vector<Model *> &replicas, const Tensor &input) {
    if (replicas.empty()) throw Error("sharded_forward: the replica list is empty");
    if (!replicas[0]) throw Error("sharded_forward: replica 0 is null");
    if (!input.defined()) throw Error("sharded_forward: the input tensor is undefined");
    Tensor output = Tensor::empty(replicas[0]->output_shape(input.shape()), input.device(),
                                  std::max(input.device_index(), 0));
    sharded_forward_into(replicas, input, output);
    return output;
}

}  // namespace fusedconv
