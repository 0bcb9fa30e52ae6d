"""Float64 NumPy references of the four models (PyTorch semantics, PROBLEMS.md).

NaN propagates as in PyTorch: np.min / np.minimum / np.maximum propagate it, a NaN in a
softmax row makes the row NaN, a NaN in a GroupNorm group makes the group NaN. Dropout is
not modelled (its mask is the library's); the references stop before it.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def conv(x, weight, bias):
    """PyTorch's default Conv2d/Conv3d (stride 1, no padding) in float64."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    spatial = w.ndim - 2
    win = sliding_window_view(x, w.shape[2:], axis=tuple(range(2, 2 + spatial)))
    letters = "dhw"[3 - spatial:]
    taps = "ijk"[:spatial]
    spec = "nc%s%s,oc%s->no%s" % (letters, taps, taps, letters)
    y = np.einsum(spec, win, w, optimize=True)
    return y + np.asarray(bias, dtype=np.float64).reshape((1, -1) + (1,) * spatial)


def p24(x, weight, bias):
    m = conv(x, weight, bias).min(axis=2)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def p25(x, weight, bias):
    return np.tanh(np.tanh(conv(x, weight, bias).min(axis=1, keepdims=True)))


def p32(x, weight, bias, scale_factor):
    return (conv(x, weight, bias) * scale_factor).min(axis=1, keepdims=True)


def group_norm(y, groups, gamma, beta, eps):
    n, c = y.shape[:2]
    g = y.reshape(n, groups, -1)
    mean = g.mean(axis=2, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=2, keepdims=True)
    normed = ((g - mean) / np.sqrt(var + eps)).reshape(y.shape)
    shape = (1, c) + (1,) * (y.ndim - 2)
    return normed * np.asarray(gamma, np.float64).reshape(shape) + np.asarray(beta, np.float64).reshape(shape)


def torch_clamp(y, lo, hi):
    """torch.clamp: NaN stays NaN; lo > hi gives hi everywhere."""
    return np.minimum(np.maximum(y, lo), hi)


def p83_before_dropout(x, weight, bias, norm_weight, norm_bias, groups, eps, min_value, max_value,
                       clamp_min=None):
    y = group_norm(conv(x, weight, bias), groups, norm_weight, norm_bias, eps)
    y = np.minimum(y, min_value)
    return torch_clamp(y, min_value if clamp_min is None else clamp_min, max_value)


def max_err(got, ref):
    """max |got - ref| / max(1, |ref|) (the project's metric); NaN must sit where the
    reference has NaN (elsewhere it counts as infinite)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        raise AssertionError("shape %s differs from the reference's %s" % (got.shape, ref.shape))
    gn, rn = np.isnan(got), np.isnan(ref)
    if (gn != rn).any():
        return float("inf")
    ok = ~rn
    if not ok.any():
        return 0.0
    return float((np.abs(got[ok] - ref[ok]) / np.maximum(1.0, np.abs(ref[ok]))).max())
