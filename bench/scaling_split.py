"""How torch_scaling.py cuts one batch over N processes: the same rule as the C++
shard_ranges (runtime/include/fusedconv/sharded.h) and the same batch cap as fusedconv_scaling
(bench/scaling_plan.h). Standard library only, so it is tested without torch.

NCCL's scatter and gather move tensors of one size per rank: every rank's window is `width`
samples (the largest shard). For scatter, rank r receives the window of the input that starts at
min(begin_r, batch - width) (views of the one input, read only, so windows may overlap) and
computes on its own samples inside it; for gather, each rank sends `width` output samples (its
own first, padding after) into a padded buffer on rank 0, which is compacted when the split is
uneven.
"""

# Halide without large_buffers: at most 2^31 - 1 bytes in one buffer (runtime/src/model_util.h).
MAX_BUFFER_ELEMENTS = (1 << 31) // 4 - 1


def shard_ranges(batch, n):
    """[(begin, end)] of each rank that gets samples: the first batch % n ranks get one more;
    ranks past the batch get none (as C++ shard_ranges)."""
    if batch <= 0 or n <= 0:
        raise ValueError("shard_ranges: needs batch > 0 and n > 0, got batch %r and n %r" % (batch, n))
    shards = min(batch, n)
    base, extra = divmod(batch, shards)
    out, begin = [], 0
    for i in range(shards):
        end = begin + base + (1 if i < extra else 0)
        out.append((begin, end))
        begin = end
    return out


def windows(batch, n):
    """Per rank 0..n-1: (window_start, own_begin, own_end) with windows of one width (the largest
    shard); a rank without samples has own_begin == own_end. Returns (width, list)."""
    ranges = shard_ranges(batch, n)
    width = ranges[0][1] - ranges[0][0]
    out = []
    for r in range(n):
        b, e = ranges[r] if r < len(ranges) else (batch, batch)
        out.append((min(b, batch - width), b, e))
    return width, out


def max_batch_for_buffers(in_per_sample, out_per_sample):
    if in_per_sample <= 0 or out_per_sample <= 0:
        raise ValueError("per-sample sizes must be > 0, got %r and %r" % (in_per_sample, out_per_sample))
    return min(MAX_BUFFER_ELEMENTS // in_per_sample, MAX_BUFFER_ELEMENTS // out_per_sample)


def choose_batch(wanted, max_batch, largest_count):
    """(batch, capped): wanted, or when it does not fit one buffer the largest multiple of
    largest_count that fits (the largest batch that fits if not even largest_count does)."""
    if wanted < 1 or max_batch < 1 or largest_count < 1:
        raise ValueError("choose_batch: needs positive arguments, got batch %r, limit %r, count %r"
                         % (wanted, max_batch, largest_count))
    if wanted <= max_batch:
        return wanted, False
    multiple = max_batch // largest_count * largest_count
    return (multiple if multiple > 0 else max_batch), True
