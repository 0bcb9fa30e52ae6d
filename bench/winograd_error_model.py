#!/usr/bin/env python3
"""A float32 model of the Winograd forms' rounding error, for forms the project has not built.

It computes a 3x3 convolution (stride 1, no padding, a bias) three ways in float32 with
NumPy: the direct form (sum over input channels, then rows and columns of taps), F(4x4,
3x3) with the transforms of generators/winograd.cpp, and F(6x6, 3x3) (interpolation
points 0, +-1, +-2, +-1/2 and infinity). Each result is compared with the same
convolution in float64; the error of an output is expressed as a multiple of the direct
form's worst-case bound n * eps * cond (n = 9 Cin + 1 terms, eps = 2^-24, cond = |bias| +
sum |w| |x| of that output), as tests/test_winograd_accuracy.cpp reports the built forms.
The transforms round once per matrix product here, not in the generated code's order, so
the figures are a model: for F(4x4, 3x3) they land near the C++ test's (same shapes, other
seeds), which is what the model is for: to say whether a form not yet built would pass
the project's selection rule (schedules/NOTES.md, "Accuracy of the forms").

Usage: python3 bench/winograd_error_model.py [--seeds N] [--forms direct,F4x4,F6x6]
Needs NumPy (Debian's python3-numpy).
"""

import argparse
import sys

import numpy as np

# F(4, 3): generators/winograd.cpp's BT, G and AT (points 0, -1, 1, -2, 2, infinity).
F4 = (
    np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float),
    np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], float),
    np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
              [0, 1, -1, 8, -8, 1]], float),
)
# F(6, 3): points 0, -1, 1, 1/2, -1/2, 2, -2, infinity.
F6 = (
    np.array([[1, 0, -21 / 4, 0, 21 / 4, 0, -1, 0],
              [0, 1, 1, -17 / 4, -17 / 4, 1, 1, 0],
              [0, -1, 1, 17 / 4, -17 / 4, -1, 1, 0],
              [0, 1 / 2, 1 / 4, -5 / 2, -5 / 4, 2, 1, 0],
              [0, -1 / 2, 1 / 4, 5 / 2, -5 / 4, -2, 1, 0],
              [0, 2, 4, -5 / 2, -5, 1 / 2, 1, 0],
              [0, -2, 4, 5 / 2, -5, -1 / 2, 1, 0],
              [0, -1, 0, 21 / 4, 0, -21 / 4, 0, 1]], float),
    np.array([[1, 0, 0], [-2 / 9, -2 / 9, -2 / 9], [-2 / 9, 2 / 9, -2 / 9],
              [1 / 90, 1 / 45, 2 / 45], [1 / 90, -1 / 45, 2 / 45],
              [32 / 45, 16 / 45, 8 / 45], [32 / 45, -16 / 45, 8 / 45], [0, 0, 1]], float),
    np.array([[1, 1, 1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 1 / 2, -1 / 2, 0],
              [0, 1, 1, 4, 4, 1 / 4, 1 / 4, 0], [0, 1, -1, 8, -8, 1 / 8, -1 / 8, 0],
              [0, 1, 1, 16, 16, 1 / 16, 1 / 16, 0], [0, 1, -1, 32, -32, 1 / 32, -1 / 32, 1]],
             float),
)
TRANSFORMS = {"F4x4": F4, "F6x6": F6}
FORMS = ("direct",) + tuple(TRANSFORMS)

# Shapes (N, Cin, Cout, H, W) and input ranges: tests/test_winograd_accuracy.cpp's, then
# a larger image and p83-like few channels with inputs of large magnitude.
SHAPES = (
    ((1, 16, 8, 21, 19), (0.0, 1.0)),
    ((2, 16, 8, 21, 19), (-500.0, 500.0)),
    ((1, 64, 4, 14, 15), (0.0, 1.0)),
    ((1, 64, 4, 14, 15), (-500.0, 500.0)),
    ((1, 3, 5, 7, 6), (-1.0, 1.0)),
    ((1, 16, 8, 40, 40), (-500.0, 500.0)),
    ((1, 3, 16, 20, 20), (-500.0, 500.0)),
)


def direct(x, w, b, dtype):
    """The direct form: bias, then every (input channel, tap row, tap column) term in turn."""
    n, cin, h, wd = x.shape
    ho, wo = h - 2, wd - 2
    x, w = x.astype(dtype), w.astype(dtype)
    y = np.zeros((n, w.shape[0], ho, wo), dtype) + b.astype(dtype)[None, :, None, None]
    for c in range(cin):
        for ky in range(3):
            for kx in range(3):
                term = w[None, :, c, ky, kx, None, None] * x[:, c, None, ky:ky + ho, kx:kx + wo]
                y = (y + term).astype(dtype)
    return y


def winograd(x, w, b, transform, dtype):
    """F(m x m, 3x3): v = BT d B per tile and channel, u = G g GT, the sums of u v over the
    input channels, AT m A, then the bias. Tiles past the output read edge-clamped input."""
    bt, g, at = (t.astype(dtype) for t in transform)
    m, a = at.shape
    n, cin, h, wd = x.shape
    ho, wo = h - 2, wd - 2
    ty, tx = -(-ho // m), -(-wo // m)
    xp = np.pad(x, ((0, 0), (0, 0), (0, ty * m + 2 - h), (0, tx * m + 2 - wd)), mode="edge")
    xp = xp.astype(dtype)
    u = np.einsum("ij,kcjl,ml->kcim", g, w.astype(dtype), g).astype(dtype)
    v = np.zeros((n, cin, ty, tx, a, a), dtype)
    for i in range(ty):
        for j in range(tx):
            patch = xp[:, :, i * m:i * m + a, j * m:j * m + a]
            v[:, :, i, j] = np.einsum("ij,ncjl,ml->ncim", bt, patch, bt).astype(dtype)
    sums = np.zeros((n, w.shape[0], ty, tx, a, a), dtype)
    for c in range(cin):
        sums = (sums + u[None, :, c, None, None] * v[:, c, None]).astype(dtype)
    tiles = np.einsum("ij,nkxyjl,ml->nkxyim", at, sums, at).astype(dtype)
    y = tiles.transpose(0, 1, 2, 4, 3, 5).reshape(n, w.shape[0], ty * m, tx * m)[:, :, :ho, :wo]
    return (y + b.astype(dtype)[None, :, None, None]).astype(dtype)


def compute(form, x, w, b, dtype):
    if form == "direct":
        return direct(x, w, b, dtype)
    return winograd(x, w, b, TRANSFORMS[form], dtype)


def error_in_bounds(shape, lo, hi, seed, forms):
    """{form: largest |float32 result - float64| / (n eps cond)} for one random problem
    (weights and bias uniform in +-1/sqrt(9 Cin), PyTorch's default init)."""
    n, cin, cout, h, wd = shape
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(9 * cin)
    x = rng.uniform(lo, hi, (n, cin, h, wd)).astype(np.float32).astype(float)
    w = rng.uniform(-bound, bound, (cout, cin, 3, 3)).astype(np.float32).astype(float)
    b = rng.uniform(-bound, bound, cout).astype(np.float32).astype(float)
    reference = direct(x, w, b, np.float64)
    cond = np.abs(b)[None, :, None, None] + direct(np.abs(x), np.abs(w), np.zeros(cout), np.float64)
    scale = (9 * cin + 1) * 2.0 ** -24 * cond
    return {f: float(np.max(np.abs(compute(f, x, w, b, np.float32) - reference) / scale))
            for f in forms}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=4, help="random problems per shape (default 4)")
    parser.add_argument("--forms", default=",".join(FORMS),
                        help="comma-separated forms among " + ", ".join(FORMS))
    args = parser.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    unknown = [f for f in forms if f not in FORMS]
    if unknown or not forms:
        parser.error(f"--forms: unknown form(s) {unknown or args.forms!r}; known: {', '.join(FORMS)}")
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, not {args.seeds}")
    if "direct" not in forms:
        forms.insert(0, "direct")  # the ratios are to the direct form
    print("largest error / (n eps cond), min-max over seeds; in brackets the largest ratio "
          "to the direct form's error of the same problem")
    print("| shape (N, Cin, Cout, H, W), inputs | " + " | ".join(forms) + " |")
    print("|---|" + "---:|" * len(forms))
    for shape, (lo, hi) in SHAPES:
        runs = [error_in_bounds(shape, lo, hi, seed, forms) for seed in range(1, args.seeds + 1)]
        cells = []
        for f in forms:
            lo_e, hi_e = min(r[f] for r in runs), max(r[f] for r in runs)
            cell = f"{lo_e:.3f}-{hi_e:.3f}"
            if f != "direct":
                cell += f" ({max(r[f] / r['direct'] for r in runs):.0f}x)"
            cells.append(cell)
        print(f"| {shape}, U[{lo:g}, {hi:g}) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
