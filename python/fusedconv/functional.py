"""The four models as functions of an input and PyTorch-layout parameters, over the C ABI.

Arguments are NumPy arrays, torch tensors (CPU or CUDA) or CuPy arrays, float32 and
C-contiguous, all on one device; they are passed by pointer (nothing copied). The result is
a new array of x's kind on x's device, or `out` when given (then filled and returned).
On a GPU the work is queued on `stream` (default: the current stream of x's library, i.e.
torch.cuda.current_stream(x.device) or CuPy's current stream) and the call returns before
it finishes, as a torch or CuPy operation would (p25 and p32 wait for their stream: their
NaN check reads a count on the host).

Errors: TypeError for a wrong kind or dtype (of an array or a scalar), ValueError for a
wrong shape, rank, layout, device or value (naming it), RuntimeError for a GPU argument
when no GPU can run it, FusedConvError (a RuntimeError) for a failure reported by the
library, with its message.
"""

import ctypes
import math
import operator

from . import _arrays
from ._library import FC_DEVICE_CPU, FC_MAX_DIMS, FcTensor, last_error
from ._state import lib


class FusedConvError(RuntimeError):
    """A failure the C library reported (its fc_last_error() message)."""


# Rank of each argument, by model.
_RANKS = {
    "p24": dict(x=5, weight=5, bias=1),
    "p25": dict(x=4, weight=4, bias=1),
    "p32": dict(x=4, weight=4, bias=1),
    "p83": dict(x=5, weight=5, bias=1, norm_weight=1, norm_bias=1),
}
_LAYOUT = {4: "(N, C, H, W)", 5: "(N, C, D, H, W)", 1: "(C,)"}


def _fc_tensor(v):
    t = FcTensor()
    t.data = v.ptr
    t.ndim = len(v.shape)
    for i, d in enumerate(v.shape):
        t.shape[i] = d
    t.device = v.device
    return t


def _overlaps(a, b):
    """Whether two float32 views on one device share any byte."""
    na, nb = math.prod(a.shape), math.prod(b.shape)
    return na > 0 and nb > 0 and a.ptr < b.ptr + 4 * nb and b.ptr < a.ptr + 4 * na


def _int(where, name, value, lo, hi):
    """value as a Python int in [lo, hi]; TypeError for a non-integer, ValueError out of range."""
    try:
        i = operator.index(value)
    except TypeError:
        raise TypeError("%s: %s must be an integer, got %r" % (where, name, value)) from None
    if not lo <= i <= hi:
        raise ValueError("%s: %s=%d is outside [%d, %d]" % (where, name, i, lo, hi))
    return i


def _float(where, name, value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a real number, got %r" % (where, name, value)) from None


_usable_devices = set()  # CUDA devices found usable once (the query initializes the driver)


def _check_gpu(where, device):
    if device == FC_DEVICE_CPU or device in _usable_devices:
        return
    if not lib.fc_has_gpu_kernels():
        raise RuntimeError("%s: the arguments are on cuda:%d but %s was built without GPU "
                           "kernels (CPU arrays only)" % (where, device, lib.path))
    count = lib.fc_cuda_device_count()
    if device >= count:
        reason = (lib.fc_gpu_unavailable_reason() or b"").decode("utf-8", "replace")
        raise RuntimeError("%s: the arguments are on cuda:%d but the library sees %d usable CUDA "
                           "device(s)%s" % (where, device, count, ": " + reason if reason else ""))
    _usable_devices.add(device)


def output_shape(model, x_shape, weight_shape, dim_or_groups):
    """The output shape of a model for these shapes, as the library computes it (ValueError
    with the library's message when they are invalid). Shapes only: no data is read."""
    where = "fusedconv.output_shape"
    if model not in _RANKS:
        raise ValueError("%s: unknown model %r (expected one of %s)" % (where, model, ", ".join(_RANKS)))
    xs, ws = FcTensor(), FcTensor()
    for t, shape, name in ((xs, x_shape, "x_shape"), (ws, weight_shape, "weight_shape")):
        shape = tuple(shape)
        if len(shape) > FC_MAX_DIMS:
            raise ValueError("%s: %s %s has more than %d dimensions" % (where, name, shape, FC_MAX_DIMS))
        t.ndim = len(shape)
        for i, d in enumerate(shape):
            t.shape[i] = _int(where, name, d, 0, 2**63 - 1)
        t.device = FC_DEVICE_CPU
    out = FcTensor()
    if lib.fc_output_shape(model.encode(), ctypes.byref(xs), ctypes.byref(ws),
                           _int(where, "dim_or_groups", dim_or_groups, -2**31, 2**31 - 1),
                           ctypes.byref(out)) != 0:
        raise ValueError("%s: %s" % (where, last_error(lib)))
    return tuple(out.shape[i] for i in range(out.ndim))


def _run(model, arrays, dim_or_groups, out, stream, call):
    """Validates `arrays` (name -> array, x first), allocates or checks `out`, then runs
    call(fc_tensors..., out_tensor, stream_pointer) and returns the output array."""
    where = "fusedconv." + model
    views = [_arrays.view(where, name, a) for name, a in arrays.items()]
    for v in views:
        rank = _RANKS[model][v.name]
        if len(v.shape) != rank:
            raise ValueError("%s: %s must have %d dimensions %s, got shape %s"
                             % (where, v.name, rank, _LAYOUT[rank], v.shape))
    x, weight = views[0], views[1]
    for v in views[1:]:
        if v.device != x.device:
            raise ValueError("%s: %s is on %s but x is on %s (all arguments must be on one device)"
                             % (where, v.name, v.device_str(), x.device_str()))
    _check_gpu(where, x.device)

    xt, wt = _fc_tensor(x), _fc_tensor(weight)
    shape_only = FcTensor()
    if lib.fc_output_shape(model.encode(), ctypes.byref(xt), ctypes.byref(wt), dim_or_groups,
                           ctypes.byref(shape_only)) != 0:
        raise ValueError("%s: %s" % (where, last_error(lib)))
    expected = tuple(shape_only.shape[i] for i in range(shape_only.ndim))
    cout = weight.shape[0]
    for v in views[2:]:
        if v.shape != (cout,):
            raise ValueError("%s: %s must have shape (%d,) (weight's out_channels), got %s"
                             % (where, v.name, cout, v.shape))

    if out is None:
        out = _arrays.empty_like_kind(x, expected)
    ov = _arrays.view(where, "out", out, writable=True)
    if ov.shape != expected:
        raise ValueError("%s: out must have shape %s, got %s" % (where, expected, ov.shape))
    if ov.device != x.device:
        raise ValueError("%s: out is on %s but x is on %s" % (where, ov.device_str(), x.device_str()))

    for v in views:
        if _overlaps(v, ov):
            raise ValueError("%s: out shares memory with %s" % (where, v.name))

    if x.device == FC_DEVICE_CPU:
        s = 0
    elif stream is None:
        s = _arrays.current_stream(x)
    else:
        s = _arrays.stream_pointer(where, stream)
    tensors = [_fc_tensor(v) for v in views]
    ot = _fc_tensor(ov)
    rc = call(*[ctypes.byref(t) for t in tensors], ctypes.byref(ot), ctypes.c_void_p(s or None))
    if rc != 0:
        raise FusedConvError("%s: %s" % (where, last_error(lib)))
    return out


def p24(x, weight, bias, dim=2, out=None, stream=None):
    """Conv3d -> min over `dim` -> softmax over channels (KernelBench level 2, problem 24).

    x (N, Cin, D, H, W), weight (Cout, Cin, k, k, k), bias (Cout,) -> (N, Cout, H-k+1, W-k+1).
    Only dim=2 (depth; -3 names it too) is supported: any other dim is a ValueError."""
    where = "fusedconv.p24"
    d = _int(where, "dim", dim, -2**31, 2**31 - 1)
    if d not in (2, -3):
        raise ValueError("%s: dim=%d is not supported (only dim=2, the depth of (N, C, D, H, W), "
                         "is implemented)" % (where, d))
    return _run("p24", dict(x=x, weight=weight, bias=bias), 2, out, stream,
                lambda xt, wt, bt, ot, s: lib.fc_p24_forward(xt, wt, bt, 2, ot, s))


def p25(x, weight, bias, out=None, stream=None):
    """Conv2d -> min over channels (keepdim) -> tanh -> tanh (KernelBench level 2, problem 25).

    x (N, Cin, H, W), weight (Cout, Cin, k, k), bias (Cout,) -> (N, 1, H-k+1, W-k+1)."""
    return _run("p25", dict(x=x, weight=weight, bias=bias), 0, out, stream,
                lambda xt, wt, bt, ot, s: lib.fc_p25_forward(xt, wt, bt, ot, s))


def p32(x, weight, bias, scale_factor, out=None, stream=None):
    """Conv2d -> * scale_factor -> min over channels (keepdim) (KernelBench level 2, problem 32).

    x (N, Cin, H, W), weight (Cout, Cin, k, k), bias (Cout,) -> (N, 1, H-k+1, W-k+1)."""
    scale = _float("fusedconv.p32", "scale_factor", scale_factor)
    return _run("p32", dict(x=x, weight=weight, bias=bias), 0, out, stream,
                lambda xt, wt, bt, ot, s: lib.fc_p32_forward(xt, wt, bt, scale, ot, s))


def p83(x, weight, bias, norm_weight, norm_bias, groups, eps=1e-5, min_value=0.0, max_value=1.0,
        dropout_p=0.0, training=True, seed=0, out=None, stream=None, clamp_min=None):
    """Conv3d -> GroupNorm(groups, eps) -> min(x, min_value) -> clamp(min_value, max_value)
    -> dropout(dropout_p) (KernelBench level 2, problem 83).

    x (N, Cin, D, H, W), weight (Cout, Cin, k, k, k), bias, norm_weight, norm_bias (Cout,)
    -> (N, Cout, D-k+1, H-k+1, W-k+1). training=False makes dropout the identity (eval
    mode); in training the dropout mask is a pure function of (seed, element index), seed
    in [0, 2**32). clamp_min (default min_value) sets the clamp's lower bound on its own."""
    where = "fusedconv.p83"
    g = _int(where, "groups", groups, 1, 2**31 - 1)
    e = _float(where, "eps", eps)
    lo = _float(where, "min_value", min_value)
    hi = _float(where, "max_value", max_value)
    cmin = lo if clamp_min is None else _float(where, "clamp_min", clamp_min)
    p = _float(where, "dropout_p", dropout_p)
    if not 0.0 <= p <= 1.0:
        raise ValueError("%s: dropout_p=%r is outside [0, 1]" % (where, p))
    if not (e > 0.0 and math.isfinite(e)):
        raise ValueError("%s: eps=%r must be finite and > 0 (as the C++ API requires)" % (where, e))
    if not isinstance(training, (bool, int)) and type(training).__name__ != "bool_":
        raise TypeError("%s: training must be a bool, got %r" % (where, training))
    train = 1 if training else 0
    sd = _int(where, "seed", seed, 0, 2**32 - 1)
    return _run("p83", dict(x=x, weight=weight, bias=bias, norm_weight=norm_weight,
                            norm_bias=norm_bias), g, out, stream,
                lambda xt, wt, bt, nwt, nbt, ot, s: lib.fc_p83_forward(
                    xt, wt, bt, nwt, nbt, g, e, lo, cmin, hi, p, train, sd, ot, s))


def synchronize(device=0):
    """Waits for the library's work on a CUDA device (FusedConvError on failure)."""
    d = _int("fusedconv.synchronize", "device", device, FC_DEVICE_CPU, 2**31 - 1)
    if lib.fc_synchronize(d) != 0:
        raise FusedConvError("fusedconv.synchronize: %s" % last_error(lib))
