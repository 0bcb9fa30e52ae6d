#!/usr/bin/env python3
"""Data-parallel throughput of fusedconv.torch's drop-in modules over N processes (torchrun).

    torchrun --standalone --nproc_per_node=N bench/torch_scaling.py -p p24,p25 [--reps 20]
    torchrun --standalone --nproc_per_node=2 bench/torch_scaling.py --backend gloo --device cpu \
        -p p24 --shape p24=1,3,4,6,7 --batch 7          # on CPUs, for tests

Each rank builds the model's fusedconv.torch module on cuda:<local_rank> (or the CPU) after
torch.manual_seed(--seed), so every rank holds the same weights; p83 runs in eval mode (as in
fusedconv_scaling: its training-mode dropout mask is keyed on the element index, so a split
batch would draw another mask). The whole batch is created once on rank 0's device (torch.rand
from a seeded CPU generator, then copied there), as a user's batch on one GPU, and each timed
step moves it as fusedconv_scaling's C++ figure does, input on GPU 0 and output gathered to
GPU 0:
  scatter  NCCL scatter from rank 0: rank r receives a window of the largest shard's width that
           holds its contiguous shard (scaling_split.py: the split rule of C++ shard_ranges),
  forward  each rank's module on its own samples,
  gather   NCCL gather of one padded window per rank into a buffer on rank 0, compacted into the
           output when the split is uneven (one device copy per shard on rank 0).
With one process the step is the plain forward (no collectives): the efficiency's baseline.
Every rank waits for its device before rank 0 stops the clock; a barrier (untimed) starts each
step on all ranks together. samples/s = batch / median step time on rank 0.

After the timed steps rank 0 compares the gathered output with one forward of the whole batch
by its own module, bit for bit; a difference is an error (exit 1). Rank 0 merges one record per
problem (system "torchrun", devices = N) into bench/results/scaling-<device slug>.json, the
file fusedconv_scaling writes, with efficiency = samples/s / (N x samples/s of the devices=1
torchrun record of the same shape in that file; recomputed for every N when that record
changes). The batch: --batch, or --batch-multiplier x the model's default (or --shape) batch,
capped like fusedconv_scaling's at Halide's 2 GiB per buffer to the largest multiple of
--batch-round (pass the largest GPU count of the sweep, as bench/run_scaling.sh does, so both
systems run the same batch).

Needs torch (>= 2.4) and the built fusedconv package (PYTHONPATH=build/python, python/README.md).
"""

import argparse
import datetime
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import results_io  # noqa: E402
import scaling_split  # noqa: E402

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    sys.exit("torch_scaling.py needs PyTorch (python3 -c 'import torch' failed: %s)" % e)

from torch_baseline import PROBLEMS, import_fusedconv_torch  # noqa: E402

SYSTEM = "torchrun"
P83_NOTE = "p83 in eval mode (split training-mode dropout is refused)"


class UsageError(Exception):
    pass


def log(rank, msg):
    if rank == 0:
        print(msg, flush=True)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-p", "--problems", default="p24,p25,p32,p83", help="comma-separated problems")
    ap.add_argument("--shape", action="append", default=[],
                    help="input shape of a problem instead of its default, e.g. p24=1,3,4,6,7 "
                         "(repeatable; its batch is scaled by --batch-multiplier)")
    ap.add_argument("--batch", type=int, default=0,
                    help="batch of every problem (0: --batch-multiplier x the shape's batch)")
    ap.add_argument("--batch-multiplier", type=int, default=8)
    ap.add_argument("--batch-round", type=int, default=8,
                    help="a capped batch is a multiple of this (the sweep's largest GPU count)")
    ap.add_argument("-r", "--reps", type=int, default=20, help="timed steps")
    ap.add_argument("-w", "--warmup", type=int, default=3, help="untimed steps")
    ap.add_argument("--seed", type=int, default=0, help="seed of every rank's parameters")
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--results", default=None,
                    help="results file ('-' for none; default bench/results/scaling-<device>.json)")
    ap.add_argument("--commit", default=None, help="commit to record (default: git, or $FUSEDCONV_COMMIT)")
    args = ap.parse_args(argv)
    for name in ("batch", "warmup"):
        if getattr(args, name) < 0:
            raise UsageError("--%s must be >= 0, got %d" % (name, getattr(args, name)))
    for name in ("batch_multiplier", "batch_round", "reps"):
        if getattr(args, name) < 1:
            raise UsageError("--%s must be >= 1, got %d" % (name.replace("_", "-"), getattr(args, name)))
    args.problems = [p for p in args.problems.split(",") if p]
    for p in args.problems:
        if p not in PROBLEMS:
            raise UsageError("unknown problem %r (expected %s)" % (p, ", ".join(sorted(PROBLEMS))))
    if not args.problems:
        raise UsageError("-p names no problem")
    shapes = {}
    for spec in args.shape:
        name, _, dims = spec.partition("=")
        if name not in args.problems:
            raise UsageError("--shape %s: %r is not in -p" % (spec, name))
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise UsageError("--shape %s: sizes must be integers" % spec) from None
        want = len(PROBLEMS[name]["shape"])
        if len(shape) != want or min(shape) < 1:
            raise UsageError("--shape %s: needs %d positive sizes, like %s"
                             % (spec, want, PROBLEMS[name]["shape"]))
        shapes[name] = shape
    args.shapes = shapes
    if args.backend == "nccl" and args.device == "cpu":
        raise UsageError("--backend nccl needs --device cuda (use --backend gloo on CPUs)")
    return args


def per_sample(name, shape):
    """(input, output) elements of one sample of `name` at input shape."""
    init = PROBLEMS[name]["init"]
    k, spatial = init["kernel_size"], [d - init["kernel_size"] + 1 for d in shape[2:]]
    n_in = 1
    for d in shape[1:]:
        n_in *= d
    out = {"p24": [init["out_channels"]] + spatial[1:], "p25": spatial, "p32": spatial,
           "p83": [init["out_channels"]] + spatial}[name]
    n_out = 1
    for d in out:
        n_out *= d
    if k < 1 or n_out < 1:
        raise UsageError("%s: input shape %s is smaller than the kernel" % (name, tuple(shape)))
    return n_in, n_out


def batch_for(args, name, shape):
    """(batch, note) as fusedconv_scaling chooses it."""
    if args.batch:
        return args.batch, ""
    wanted = shape[0] * args.batch_multiplier
    batch, capped = scaling_split.choose_batch(
        wanted, scaling_split.max_batch_for_buffers(*per_sample(name, shape)), args.batch_round)
    return batch, ("batch capped from %d (2^31 - 1 bytes per Halide buffer)" % wanted if capped else "")


def make_module(fct, name, seed, device):
    spec = PROBLEMS[name]
    torch.manual_seed(seed)  # the same parameters on every rank
    module = getattr(fct, spec["cls"].__name__)(**spec["init"]).to(device)
    return module.eval() if name == "p83" else module


def all_ok(ok, device):
    """True on every rank when `ok` is true on every rank."""
    flag = torch.tensor([0 if ok else 1], dtype=torch.int32, device=device)
    dist.all_reduce(flag)
    return int(flag.item()) == 0


class Step:
    """One timed step: scatter from rank 0, forward, gather to rank 0 (or the plain forward)."""

    def __init__(self, module, x, batch, shape, rank, world, device):
        self.module, self.x, self.rank, self.world, self.device = module, x, rank, world, device
        self.width, self.windows = scaling_split.windows(batch, world)
        self.start, self.begin, self.end = self.windows[rank]
        out_shape = tuple(module(torch.zeros((1,) + tuple(shape[1:]), device=device)).shape[1:])
        self.out = torch.empty((batch,) + out_shape, device=device) if rank == 0 else None
        if world == 1:
            return
        self.in_buf = torch.empty((self.width,) + tuple(shape[1:]), device=device)
        self.send_buf = torch.empty((self.width,) + out_shape, device=device)
        self.even = self.width * world == batch
        if rank == 0:
            self.scatter_list = [x.narrow(0, s, self.width) for s, _, _ in self.windows]
            # Even split: the gather writes the output itself; else a padded buffer.
            gathered = self.out if self.even else torch.empty((self.width * world,) + out_shape, device=device)
            self.gather_list = list(gathered.split(self.width))

    def __call__(self):
        if self.world == 1:
            self.out = self.module(self.x)
            return
        dist.scatter(self.in_buf, self.scatter_list if self.rank == 0 else None, src=0)
        n = self.end - self.begin
        send = self.send_buf
        if n > 0:
            y = self.module(self.in_buf.narrow(0, self.begin - self.start, n))
            if n == self.width:
                send = y
            else:
                self.send_buf.narrow(0, 0, n).copy_(y)
        dist.gather(send, self.gather_list if self.rank == 0 else None, dst=0)
        if self.rank == 0 and not self.even:
            for r, (_, b, e) in enumerate(self.windows):
                if e > b:
                    self.out.narrow(0, b, e - b).copy_(self.gather_list[r].narrow(0, 0, e - b))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step, args, device):
    with torch.no_grad():
        for _ in range(args.warmup):
            step()
        sync(device)
        times = []
        for _ in range(args.reps):
            dist.barrier()
            sync(device)
            t0 = time.perf_counter()
            step()
            sync(device)  # every rank waits for its device; rank 0's gather waited for all
            times.append(time.perf_counter() - t0)
    return times


def bit_equal(a, b):
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


def run_problem(fct, args, name, rank, world, device):
    """The problem's record (rank 0) or None; raises RuntimeError on a mismatch."""
    shape = tuple(args.shapes.get(name, PROBLEMS[name]["shape"]))
    batch, note = batch_for(args, name, shape)
    shape = (batch,) + shape[1:]
    ok, why = True, ""
    try:
        module = make_module(fct, name, args.seed, device)
        x = None
        if rank == 0:
            g = torch.Generator().manual_seed(1000 + batch)
            x = torch.rand(shape, generator=g, dtype=torch.float32).to(device)
        with torch.no_grad():
            step = Step(module, x, batch, shape, rank, world, device)
    except (RuntimeError, MemoryError) as e:  # torch.OutOfMemoryError is a RuntimeError
        ok, why = False, str(e).splitlines()[0]
    if not all_ok(ok, device):
        log(rank, "%s: skipped, input %s does not fit on every rank%s"
            % (name, shape, (": " + why) if why else " (another rank failed)"))
        if not ok and rank != 0:
            print("%s: rank %d: %s" % (name, rank, why), file=sys.stderr, flush=True)
        return None
    log(rank, "-- %s: input %s, %d process%s, window %d" % (name, shape, world, "" if world == 1 else "es", step.width))
    times = time_steps(step, args, device)
    if rank != 0:
        return None
    with torch.no_grad():
        reference = module(x)
    identical = bit_equal(step.out, reference)
    median = statistics.median(times)
    rec = {
        "problem": name, "system": SYSTEM, "devices": world, "shape": list(shape), "batch": batch,
        "median_s": median, "median_ms": median * 1e3, "min_ms": min(times) * 1e3,
        "samples_per_s": batch / median, "efficiency": None,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu-processes",
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "commit": args.commit or results_io.git_commit(),
        "reps": args.reps, "warmup": args.warmup, "bit_identical_to_1": identical,
        "data": "input on rank 0's device, scattered (NCCL/gloo) in windows of the largest shard; "
                "output gathered to rank 0" if world > 1 else "one process: plain forward, no collectives",
        "backend": args.backend,
    }
    notes = [n for n in (P83_NOTE if name == "p83" else "", note) if n]
    if notes:
        rec["note"] = "; ".join(notes)
    print("%s x%d: median %.3f ms, %.1f samples/s, %s" % (
        name, world, median * 1e3, batch / median,
        "gathered output bit-identical to one forward" if identical else "MISMATCH against one forward"),
        flush=True)
    if not identical:
        diff = (step.out.view(torch.int32) != reference.view(torch.int32)).sum().item()
        print("torch_scaling.py: ERROR: %s with %d processes: the gathered output differs from one "
              "forward of the whole batch in %d of %d elements" % (name, world, diff, reference.numel()),
              file=sys.stderr, flush=True)
    return rec


def with_efficiency(records):
    """Efficiency of every torchrun record against the devices=1 torchrun record of its shape."""
    ones = {(r["problem"], tuple(r["shape"])): r["samples_per_s"] for r in records
            if r.get("system") == SYSTEM and r.get("devices") == 1}
    for r in records:
        if r.get("system") != SYSTEM:
            continue
        one = ones.get((r["problem"], tuple(r["shape"])))
        r["efficiency"] = r["samples_per_s"] / (r["devices"] * one) if one else None
    return records


def main(argv=None):
    try:
        args = parse_args(argv)
        for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            if var not in os.environ:
                raise UsageError("$%s is not set: launch with torchrun --standalone "
                                 "--nproc_per_node=N bench/torch_scaling.py ..." % var)
        rank, world, local = (int(os.environ[v]) for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
        if args.device == "cuda":
            if not torch.cuda.is_available():
                raise UsageError("--device cuda: torch sees no CUDA device (--device cpu --backend gloo runs on CPUs)")
            if local >= torch.cuda.device_count():
                raise UsageError("local rank %d needs cuda:%d, but %d GPU%s visible"
                                 % (local, local, torch.cuda.device_count(),
                                    " is" if torch.cuda.device_count() == 1 else "s are"))
            device = torch.device("cuda", local)
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
    except UsageError as e:
        print("torch_scaling.py: %s" % e, file=sys.stderr)
        return 2
    fct = import_fusedconv_torch()
    dist.init_process_group(args.backend)
    failed = False
    try:
        records = []
        for name in args.problems:
            rec = run_problem(fct, args, name, rank, world, device)
            if rec is not None:
                records.append(rec)
                failed |= not rec["bit_identical_to_1"]
        if rank == 0 and args.results != "-" and records:
            name = records[0]["device"]
            path = args.results or os.path.join(results_io.RESULTS_DIR, "scaling-%s.json" % results_io.slug(name))
            merged = with_efficiency(results_io.merge(results_io.load(path), records))
            results_io.merge_into(path, merged, required=results_io.SCALING_KEYS)
            print("merged %d records into %s" % (len(records), path), flush=True)
            for r in merged:
                if r["system"] == SYSTEM and any(r["problem"] == n["problem"] for n in records):
                    eff = r["efficiency"]
                    print("%s torchrun x%d: %.1f samples/s, efficiency %s" % (
                        r["problem"], r["devices"], r["samples_per_s"],
                        "%.3f" % eff if eff is not None else "n/a (no 1-process record yet)"))
    finally:
        dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
