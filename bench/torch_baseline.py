#!/usr/bin/env python3
"""PyTorch baselines of the four fusedconv models, and a round trip through the fusedconv CLI.

The four models are written exactly as KernelBench level 2 defines them (problems 24, 25,
32 and 83), with KernelBench's default init arguments and input shapes (../shared/PROBLEMS.md).
Each is a fresh module, so in training mode (p83's dropout is active), called under
torch.no_grad() on torch.rand inputs (uniform [0, 1)) from a fixed seed.

Systems (each one record per problem in bench/results/<slug>.json):
  torch-eager                  eager, TF32 allowed (cuDNN's and cuBLAS's allow_tf32 True)
  torch-eager-fp32             eager, strict FP32 (both allow_tf32 False)
  torch-compile                torch.compile(model), default mode, TF32 allowed
  torch-compile-max-autotune   torch.compile(model, mode="max-autotune"), TF32 allowed
  halide-torch                 the project's module in-process: fusedconv.torch's drop-in module
                               (a custom op over libfusedconv_c.so, on the current stream) with
                               this module's state_dict; from PYTHONPATH or build/python
  halide-cli-roundtrip         (--roundtrip CLI) the module's parameters and input are saved
                               with safetensors, run through the fusedconv CLI on the GPU, and
                               its output compared with PyTorch's strict-FP32 and float64 outputs

Errors: max |output - float64 output| where the float64 output is the same module run in
float64 (module.double(), input.double()) on the GPU. p83's dropout draws a different mask
every call, so p83's errors are computed in eval mode (both sides); p83 is timed in training
mode.

Needs torch (CUDA), for --roundtrip safetensors, for halide-torch the built fusedconv package
(cmake target fusedconv_python). Run from anywhere:
  python3 bench/torch_baseline.py [--problems p24,p32] [--systems torch-eager,torch-compile]
                                  [--reps 50] [--warmup 5] [--quick] [--roundtrip build/runtime/fusedconv]
"""

import argparse
import contextlib
import copy
import datetime
import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # say what is missing instead of a traceback
    sys.exit(f"torch_baseline.py needs PyTorch with CUDA (python3 -c 'import torch' failed: {e})")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io  # noqa: E402


# ---------------------------------------------------------------------------
# The four models, as KernelBench level 2 writes them.
# ---------------------------------------------------------------------------


class Conv3dMinSoftmax(nn.Module):
    """KernelBench level 2, problem 24: Conv3d -> min over `dim` -> softmax over channels."""

    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, dim=self.dim)[0]
        x = torch.softmax(x, dim=1)
        return x


class Conv2dMinTanhTanh(nn.Module):
    """KernelBench level 2, problem 25: Conv2d -> min over channels (keepdim) -> tanh -> tanh."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, dim=1, keepdim=True)[0]
        x = torch.tanh(x)
        x = torch.tanh(x)
        return x


class Conv2dScaleMin(nn.Module):
    """KernelBench level 2, problem 32: Conv2d -> * scale_factor -> min over channels (keepdim)."""

    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = self.conv(x)
        x = x * self.scale_factor
        x = torch.min(x, dim=1, keepdim=True)[0]
        return x


class Conv3dGroupNormMinClampDropout(nn.Module):
    """KernelBench level 2, problem 83: Conv3d -> GroupNorm -> min(x, min_value) -> clamp -> Dropout."""

    def __init__(self, in_channels, out_channels, kernel_size, groups, min_value, max_value, dropout_p):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.dropout = nn.Dropout(dropout_p)
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x):
        x = self.conv(x)
        x = self.norm(x)
        # KernelBench: torch.min(x, torch.tensor(min_value)) -- a 0-dim CPU tensor.
        x = torch.min(x, torch.tensor(self.min_value))
        x = torch.clamp(x, min=self.min_value, max=self.max_value)
        x = self.dropout(x)
        return x


PROBLEMS = {
    "p24": dict(
        cls=Conv3dMinSoftmax,
        init=dict(in_channels=3, out_channels=24, kernel_size=3, dim=2),
        shape=(128, 3, 24, 32, 32),
        conv_dims=3,
    ),
    "p25": dict(
        cls=Conv2dMinTanhTanh,
        init=dict(in_channels=16, out_channels=64, kernel_size=3),
        shape=(128, 16, 256, 256),
        conv_dims=2,
    ),
    "p32": dict(
        cls=Conv2dScaleMin,
        init=dict(in_channels=64, out_channels=128, kernel_size=3, scale_factor=2.0),
        shape=(64, 64, 256, 256),
        conv_dims=2,
    ),
    "p83": dict(
        cls=Conv3dGroupNormMinClampDropout,
        init=dict(in_channels=3, out_channels=16, kernel_size=3, groups=8, min_value=0.0,
                  max_value=1.0, dropout_p=0.2),
        shape=(128, 3, 16, 64, 64),
        conv_dims=3,
    ),
}

# p83 is the only model with randomness (dropout): its errors are taken in eval mode.
EVAL_FOR_ERRORS = {"p83"}
P83_NOTE = ("timed in training mode (dropout active); errors computed in eval mode, since the "
            "dropout masks differ between runs")

HALIDE_TORCH_SYSTEM = "halide-torch"
SYSTEMS = ["torch-eager", "torch-eager-fp32", "torch-compile", "torch-compile-max-autotune",
           HALIDE_TORCH_SYSTEM]
ROUNDTRIP_SYSTEM = "halide-cli-roundtrip"


def conv_flops(name, shape):
    """2 * multiply-adds of the convolution at input shape."""
    spec = PROBLEMS[name]
    init = spec["init"]
    k, d = init["kernel_size"], spec["conv_dims"]
    n, cin = shape[0], shape[1]
    out_spatial = 1
    for s in shape[2:]:
        out_spatial *= s - k + 1
    return 2.0 * n * init["out_channels"] * out_spatial * cin * k ** d


# ---------------------------------------------------------------------------
# TF32 flags. Only the legacy setters are used: they keep the legacy and the
# new (fp32_precision) views consistent, so nothing later (eager, Inductor)
# trips PyTorch's "mix of the legacy and new APIs" check.
# ---------------------------------------------------------------------------


def _get_tf32():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)


def _set_tf32(matmul, cudnn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = bool(matmul)
        torch.backends.cudnn.allow_tf32 = bool(cudnn)


@contextlib.contextmanager
def tf32(enabled):
    old = _get_tf32()
    _set_tf32(enabled, enabled)
    try:
        yield
    finally:
        _set_tf32(*old)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

_step_begin = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)


def call(fn, x, mark_step=False):
    # max-autotune runs under CUDA graphs (cudagraph trees); marking a new step before each
    # call tells them the previous call's outputs are dead.
    if mark_step and _step_begin is not None:
        _step_begin()
    return fn(x)


def free_memory():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def finite_or_none(v):
    v = float(v)
    return v if math.isfinite(v) else None


def max_abs_err(y, ref):
    """max |y - ref| computed in float64 on y's device; None when it is not finite."""
    if tuple(y.shape) != tuple(ref.shape):
        raise RuntimeError("output shape %s differs from the reference's %s"
                           % (tuple(y.shape), tuple(ref.shape)))
    r = ref.to(device=y.device, dtype=torch.float64)
    e = (y.to(torch.float64) - r).abs().max().item()
    del r
    return finite_or_none(e)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


COMMON_FIRST = ("device", "date", "commit")


def base_record(name, system, shape, common):
    """The required keys in their documented order (timings and errors None), then common's extras."""
    rec = {
        "problem": name,
        "system": system,
        "shape": [int(d) for d in shape],
        "median_ms": None,
        "min_ms": None,
        "max_abs_err_vs_fp64": None,
        "peak_device_mem_mb": None,
    }
    for k in COMMON_FIRST:
        rec[k] = common[k]
    for k, v in common.items():
        rec.setdefault(k, v)
    return rec


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------


def time_fn(fn, x, warmup, reps, mark_step=False):
    """Returns (median_ms, min_ms, warmup_s). Each rep is timed between a pair of CUDA events."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        y = call(fn, x, mark_step)
        del y
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        if mark_step and _step_begin is not None:
            _step_begin()  # outside the timed region
        start.record()
        y = fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
        del y
    return statistics.median(times), min(times), warmup_s


def peak_memory(fn, x, mark_step=False):
    """One forward: (peak allocated MB, peak allocated minus what was resident before (input,
    parameters) MB, peak reserved MB, output); MB = 1e6 bytes."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    resident = torch.cuda.memory_allocated()
    y = call(fn, x, mark_step)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    reserved = torch.cuda.max_memory_reserved()
    return peak / 1e6, (peak - resident) / 1e6, reserved / 1e6, y


def float64_reference(model, x, eval_mode):
    """The module's output in float64 on the GPU, returned on the CPU."""
    ref_model = copy.deepcopy(model).double()
    ref_model.train(not eval_mode)
    x64 = x.double()
    y = ref_model(x64)
    torch.cuda.synchronize()
    out = y.cpu()
    del y, x64, ref_model
    free_memory()
    return out


def make_model(name, seed):
    spec = PROBLEMS[name]
    torch.manual_seed(seed)
    model = spec["cls"](**spec["init"])
    return model.cuda()  # a fresh module is in training mode


def make_input(shape, seed):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.rand(tuple(shape), generator=g, dtype=torch.float32)


def import_fusedconv_torch():
    """fusedconv.torch from PYTHONPATH, else from the build tree's package (build/python)."""
    try:
        import fusedconv.torch as fct
    except ImportError:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sys.path.insert(0, os.path.join(root, "build", "python"))
        import fusedconv.torch as fct
    return fct


def halide_torch_module(name, model):
    """fusedconv.torch's drop-in module of `name` holding `model`'s parameters, on its device."""
    fct = import_fusedconv_torch()
    ours = getattr(fct, PROBLEMS[name]["cls"].__name__)(**PROBLEMS[name]["init"])
    ours.load_state_dict(model.state_dict())
    return ours.to(next(model.parameters()).device).train(model.training)


# ---------------------------------------------------------------------------
# One (problem, system)
# ---------------------------------------------------------------------------


def run_system(name, system, model, x, ref64, args, common):
    eval_for_errors = name in EVAL_FOR_ERRORS
    tf32_on = system not in ("torch-eager-fp32", HALIDE_TORCH_SYSTEM)
    mark_step = system.startswith("torch-compile")
    fn = None
    try:
        with tf32(tf32_on):
            if system == HALIDE_TORCH_SYSTEM:  # from here on `model` is the fusedconv module
                model = halide_torch_module(name, model)
                fn = model
            elif system == "torch-compile":
                torch.compiler.reset()
                fn = torch.compile(model)
            elif system == "torch-compile-max-autotune":
                torch.compiler.reset()
                fn = torch.compile(model, mode="max-autotune")
            elif system in ("torch-eager", "torch-eager-fp32"):
                fn = model
            else:
                raise ValueError("unknown system " + system)

            model.train()
            log("[%s] %-28s warm-up %d%s, %d reps ..." % (
                name, system, args.warmup,
                " (compiles here)" if system.startswith("torch-compile") else "", args.reps))
            median_ms, min_ms, warmup_s = time_fn(fn, x, args.warmup, args.reps, mark_step)

            peak_mb, peak_over_mb, reserved_mb, y = peak_memory(fn, x, mark_step)
            if eval_for_errors:
                del y
                model.eval()
                y = call(fn, x, mark_step)
                torch.cuda.synchronize()
            err = max_abs_err(y, ref64)
            del y
            model.train()
    finally:
        model.train()
        del fn
        if system.startswith("torch-compile"):
            torch.compiler.reset()
        free_memory()

    shape = list(x.shape)
    flops = conv_flops(name, shape)
    rec = base_record(name, system, shape, common)
    rec.update({
        "median_ms": median_ms,
        "min_ms": min_ms,
        "max_abs_err_vs_fp64": err,
        "peak_device_mem_mb": peak_mb,
        "peak_over_resident_mb": peak_over_mb,
        "peak_reserved_mb": reserved_mb,
        "tflops": flops / (median_ms * 1e-3) / 1e12,
        "gbps": common_bytes(name, model, x) / (median_ms * 1e-3) / 1e9,
        "tf32": tf32_on,
        "reps": args.reps,
        "warmup": args.warmup,
        "warmup_s": round(warmup_s, 3),
    })
    notes = []
    if eval_for_errors:
        notes.append(P83_NOTE)
    if system == HALIDE_TORCH_SYSTEM:
        notes.append("fusedconv.torch module: libfusedconv_c.so in-process on torch's current stream")
    if system == "torch-compile-max-autotune":
        notes.append("max-autotune replays CUDA graphs; max_memory_allocated may not count the "
                     "graphs' private memory pool, which peak_reserved_mb includes")
    if notes:
        rec["note"] = "; ".join(notes)
    log("[%s] %-28s median %9.3f ms  min %9.3f ms  err_vs_fp64 %9s  peak %9.1f MB  (warm-up %.1f s)" % (
        name, system, median_ms, min_ms, fmt(err, ".2e"), peak_mb, warmup_s))
    return rec


_output_numel_cache = {}


def common_bytes(name, model, x):
    """Compulsory traffic: input + parameters + output, float32."""
    key = (name, tuple(x.shape))
    if key not in _output_numel_cache:
        spec = PROBLEMS[name]
        k = spec["init"]["kernel_size"]
        n = x.shape[0]
        spatial = [s - k + 1 for s in x.shape[2:]]
        cout = spec["init"]["out_channels"]
        if name == "p24":  # min over depth removes it; softmax keeps channels
            out = n * cout * spatial[1] * spatial[2]
        elif name in ("p25", "p32"):  # min over channels, keepdim
            out = n * spatial[0] * spatial[1]
        else:  # p83 keeps the conv's shape
            out = n * cout
            for s in spatial:
                out *= s
        _output_numel_cache[key] = out
    params = sum(p.numel() for p in model.parameters())
    return 4.0 * (x.numel() + params + _output_numel_cache[key])


# ---------------------------------------------------------------------------
# Round trip through the fusedconv CLI
# ---------------------------------------------------------------------------


def run_roundtrip(name, model, x, ref64, args, common):
    from safetensors.torch import load_file, save_file

    eval_for_errors = name in EVAL_FOR_ERRORS
    model.train(not eval_for_errors)
    with tf32(False):
        y32 = model(x)
        torch.cuda.synchronize()
    model.train()

    rec = base_record(name, ROUNDTRIP_SYSTEM, list(x.shape), common)
    rec["max_abs_err_vs_torch_fp32"] = None
    notes = []
    if eval_for_errors:
        notes.append("eval mode (--eval): dropout is the identity on both sides")

    with tempfile.TemporaryDirectory(prefix="fusedconv-roundtrip-") as tmp:
        w_path = os.path.join(tmp, name + "_weights.safetensors")
        i_path = os.path.join(tmp, name + "_input.safetensors")
        o_path = os.path.join(tmp, name + "_output.safetensors")
        state = {k: v.detach().to(device="cpu", dtype=torch.float32).contiguous()
                 for k, v in model.state_dict().items()}
        save_file(state, w_path)
        save_file({"input": x.detach().cpu().contiguous()}, i_path)
        del state

        cmd = [args.roundtrip, "-m", name, "-d", "gpu", "--weights", w_path, "--input", i_path,
               "--output", o_path, "-r", "3"]
        if eval_for_errors:
            cmd.append("--eval")
        log("[%s] %-28s %s" % (name, ROUNDTRIP_SYSTEM, " ".join(cmd)))
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=args.cli_timeout)
        for line in proc.stdout.splitlines():
            log("    | " + line)
        rec["cli_returncode"] = proc.returncode
        if proc.returncode != 0:
            notes.append("CLI exited with code %d" % proc.returncode)
        if not os.path.exists(o_path):
            raise RuntimeError("%s exited with code %d and wrote no %s"
                               % (args.roundtrip, proc.returncode, o_path))
        tensors = load_file(o_path)
        if "output" not in tensors:
            raise RuntimeError("%s has no tensor 'output' (keys: %s)" % (o_path, sorted(tensors)))
        out = tensors["output"].to(device=x.device, dtype=torch.float32)
        del tensors

    rec["max_abs_err_vs_torch_fp32"] = max_abs_err(out, y32)
    rec["max_abs_err_vs_fp64"] = max_abs_err(out, ref64)
    del out, y32
    free_memory()
    if notes:
        rec["note"] = "; ".join(notes)
    log("[%s] %-28s err_vs_fp64 %9s  err_vs_torch_fp32 %9s%s" % (
        name, ROUNDTRIP_SYSTEM, fmt(rec["max_abs_err_vs_fp64"], ".2e"),
        fmt(rec["max_abs_err_vs_torch_fp32"], ".2e"),
        "" if proc.returncode == 0 else "  (CLI exit code %d)" % proc.returncode))
    failure = None
    if proc.returncode != 0:  # recorded (the errors may say why), then reported as a failure
        failure = RuntimeError("%s exited with code %d" % (args.roundtrip, proc.returncode))
    return rec, failure


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_list(text, allowed, what):
    if text.strip().lower() in ("", "none"):
        return []
    if text.strip().lower() == "all":
        return list(allowed)
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad:
        raise SystemExit("unknown %s: %s (expected some of %s, 'all' or 'none')"
                         % (what, ", ".join(bad), ", ".join(allowed)))
    return items


def print_table(records):
    if not records:
        return
    log("")
    log("%-4s %-28s %-22s %10s %10s %11s %11s %10s" % (
        "id", "system", "shape", "median_ms", "min_ms", "err_fp64", "err_torch32", "peak_MB"))
    for r in records:
        log("%-4s %-28s %-22s %10s %10s %11s %11s %10s" % (
            r["problem"], r["system"], "x".join(str(d) for d in r["shape"]),
            fmt(r["median_ms"], ".3f"), fmt(r["min_ms"], ".3f"),
            fmt(r["max_abs_err_vs_fp64"], ".2e"), fmt(r.get("max_abs_err_vs_torch_fp32"), ".2e"),
            fmt(r["peak_device_mem_mb"], ".1f")))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Time the four KernelBench models in PyTorch (eager, strict FP32, torch.compile, "
                    "max-autotune), and optionally round-trip them through the fusedconv CLI. "
                    "Results are merged into bench/results/<device-slug>.json.")
    ap.add_argument("--problems", default="all",
                    help="comma-separated subset of %s, or 'all' (default)" % ",".join(PROBLEMS))
    ap.add_argument("--systems", default="all",
                    help="comma-separated subset of %s, 'all' (default) or 'none' "
                         "(e.g. only --roundtrip)" % ",".join(SYSTEMS))
    ap.add_argument("--reps", type=int, default=None, help="timed runs (default 50; 10 with --quick)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed runs first; torch.compile compiles in the first (default 5; 3 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer runs: 10 timed, 3 warm-up")
    ap.add_argument("--batch", type=int, default=0, help="batch size (0: each problem's default)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the parameters and the input (default 0)")
    ap.add_argument("--roundtrip", metavar="CLI_PATH", default=None,
                    help="path of the compiled fusedconv CLI (e.g. build/runtime/fusedconv): run each "
                         "problem through it with this module's parameters and input")
    ap.add_argument("--cli-timeout", type=float, default=1800.0,
                    help="seconds allowed to one CLI run (default 1800)")
    ap.add_argument("--results", default=None,
                    help="results JSON to merge into (default bench/results/<device-slug>.json)")
    args = ap.parse_args(argv)

    problems = parse_list(args.problems, list(PROBLEMS), "problems")
    systems = parse_list(args.systems, SYSTEMS, "systems")
    if args.reps is None:
        args.reps = 10 if args.quick else 50
    if args.warmup is None:
        args.warmup = 3 if args.quick else 5
    if args.reps < 1 or args.warmup < 0:
        raise SystemExit("--reps must be >= 1 and --warmup >= 0")
    if args.roundtrip is not None:
        args.roundtrip = os.path.abspath(args.roundtrip)
        if not os.access(args.roundtrip, os.X_OK):
            raise SystemExit("--roundtrip: %s is not an executable file" % args.roundtrip)
        import safetensors.torch  # noqa: F401  (fail now, not after an hour of timing)
    if HALIDE_TORCH_SYSTEM in systems:  # fail now too, unless it only came with 'all'
        try:
            import_fusedconv_torch()
        except ImportError as e:
            if args.systems.strip().lower() != "all":
                raise SystemExit("%s: %s" % (HALIDE_TORCH_SYSTEM, e))
            log("%s left out: %s" % (HALIDE_TORCH_SYSTEM, e))
            systems.remove(HALIDE_TORCH_SYSTEM)
    if not torch.cuda.is_available():
        raise SystemExit("CUDA is not available to torch %s" % torch.__version__)

    device_name = torch.cuda.get_device_name(0)
    results_path = args.results or results_io.default_results_path(device_name)
    common = {
        "device": device_name,
        "date": datetime.date.today().isoformat(),
        "commit": results_io.git_commit(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
        "seed": args.seed,
    }
    log("device %s, torch %s (CUDA %s, cuDNN %s), commit %s; results -> %s" % (
        device_name, torch.__version__, torch.version.cuda, common["cudnn_version"], common["commit"],
        results_path))
    log("problems %s; systems %s%s; %d warm-up, %d timed runs" % (
        ",".join(problems), ",".join(systems) or "(none)",
        "; round trip through " + args.roundtrip if args.roundtrip else "", args.warmup, args.reps))

    records, failures = [], []
    with torch.no_grad():
        for name in problems:
            shape = list(PROBLEMS[name]["shape"])
            if args.batch > 0:
                shape[0] = args.batch
            model = make_model(name, args.seed)
            x = make_input(shape, args.seed).cuda()
            eval_for_errors = name in EVAL_FOR_ERRORS
            log("[%s] input %s; float64 reference%s ..." % (
                name, tuple(shape), " (eval mode)" if eval_for_errors else ""))
            try:
                ref64 = float64_reference(model, x, eval_for_errors)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                failures.append((name, "float64 reference", repr(e)))
                del model, x
                free_memory()
                continue

            todo = list(systems) + ([ROUNDTRIP_SYSTEM] if args.roundtrip else [])
            for system in todo:
                try:
                    if system == ROUNDTRIP_SYSTEM:
                        rec, failure = run_roundtrip(name, model, x, ref64, args, common)
                    else:
                        rec, failure = run_system(name, system, model, x, ref64, args, common), None
                    records.append(rec)
                    results_io.merge_into(results_path, [rec])  # keep what is done if a later step dies
                    if failure is not None:
                        raise failure
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    log("[%s] %-28s FAILED: %r" % (name, system, e))
                    failures.append((name, system, repr(e)))
                    free_memory()
            del model, x, ref64
            free_memory()

    print_table(records)
    log("")
    log("%d record(s) merged into %s" % (len(records), results_path))
    if failures:
        log("%d failure(s):" % len(failures))
        for name, system, msg in failures:
            log("  %s %s: %s" % (name, system, msg))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
