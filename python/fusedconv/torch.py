"""The four models as PyTorch custom operators and drop-in nn.Modules (needs PyTorch >= 2.4).

    import fusedconv.torch as fct
    model = fct.Conv2dMinTanhTanh(16, 64, 3).cuda()      # KernelBench p25's init signature
    model.load_state_dict(reference.state_dict())         # same keys: conv.weight, conv.bias
    y = torch.compile(model, fullgraph=True)(x)           # no graph break

Operators (torch.ops.fusedconv.*), each registered with torch.library.custom_op and a fake
(meta) implementation that gives the output shape, so torch.compile traces through them:
  p24(x, weight, bias, dim) -> Tensor
  p25(x, weight, bias) -> Tensor
  p32(x, weight, bias, scale_factor) -> Tensor
  p83(x, weight, bias, norm_weight, norm_bias, groups, eps, min_value, clamp_min, clamp_max,
      dropout_p, training, seed) -> Tensor      seed: a 0-dim int64 CPU tensor in [0, 2**32)
                                                (None allowed when training is False)
  draw_seed(x) -> Tensor                        a dropout seed from torch's default (CPU)
                                                generator: torch.manual_seed reproduces it
They run on x's device (cpu or cuda:N) on torch.cuda.current_stream(x.device), asynchronously
like any CUDA op (p25 and p32 wait for that stream: their NaN check reads a count on the
host; so does p24 where its conv runs on wgmma, on GPUs of compute capability 9.0). Arguments must be float32, contiguous, of the model's rank and on one device:
anything else, or a CUDA tensor with a library built without GPU kernels, raises TypeError,
ValueError or RuntimeError naming it. Forward only: backward through them raises.

Modules (init signatures, submodules and state_dict keys of KernelBench's reference modules,
built in the same order, so one torch.manual_seed gives the same parameters):
  Conv3dMinSoftmax(in_channels, out_channels, kernel_size, dim)       p24 (dim 2 only)
  Conv2dMinTanhTanh(in_channels, out_channels, kernel_size)           p25
  Conv2dScaleMin(in_channels, out_channels, kernel_size, scale_factor) p32
  Conv3dGroupNormMinClampDropout(in_channels, out_channels, kernel_size, groups, min_value,
                                 max_value, dropout_p)                 p83
p83's dropout follows the module's training flag (module.eval(): identity); in training each
call draws a fresh seed from torch's RNG, so successive calls differ and torch.manual_seed
reproduces them (the masks are the library's, not PyTorch's: the same distribution).
"""

import operator
from typing import Optional

import torch
from torch import Tensor, nn

from . import functional as _f

_SEED_LIMIT = 2**32


def _spatial_out(x, weight, first):
    """Sizes of x's spatial dims from `first` on after a valid conv with weight's kernel."""
    return [x.shape[i] - weight.shape[i] + 1 for i in range(first, x.dim())]


def _require_rank(where, name, t, rank):
    if t.dim() != rank:
        raise ValueError("%s: %s must have %d dimensions, got shape %s"
                         % (where, name, rank, tuple(t.shape)))


# --------------------------------------------------------------------------- p24


@torch.library.custom_op("fusedconv::p24", mutates_args=())
def _p24(x: Tensor, weight: Tensor, bias: Tensor, dim: int) -> Tensor:
    return _f.p24(x, weight, bias, dim)


@_p24.register_fake
def _p24_fake(x, weight, bias, dim):
    _require_rank("fusedconv::p24", "x", x, 5)
    _require_rank("fusedconv::p24", "weight", weight, 5)
    if dim not in (2, -3):
        raise ValueError("fusedconv::p24: dim=%r is not supported (only dim=2)" % (dim,))
    return x.new_empty([x.shape[0], weight.shape[0]] + _spatial_out(x, weight, 3))


# --------------------------------------------------------------------------- p25, p32


@torch.library.custom_op("fusedconv::p25", mutates_args=())
def _p25(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return _f.p25(x, weight, bias)


@_p25.register_fake
def _p25_fake(x, weight, bias):
    _require_rank("fusedconv::p25", "x", x, 4)
    _require_rank("fusedconv::p25", "weight", weight, 4)
    return x.new_empty([x.shape[0], 1] + _spatial_out(x, weight, 2))


@torch.library.custom_op("fusedconv::p32", mutates_args=())
def _p32(x: Tensor, weight: Tensor, bias: Tensor, scale_factor: float) -> Tensor:
    return _f.p32(x, weight, bias, scale_factor)


@_p32.register_fake
def _p32_fake(x, weight, bias, scale_factor):
    _require_rank("fusedconv::p32", "x", x, 4)
    _require_rank("fusedconv::p32", "weight", weight, 4)
    return x.new_empty([x.shape[0], 1] + _spatial_out(x, weight, 2))


# --------------------------------------------------------------------------- p83


def _seed_value(seed):
    if not isinstance(seed, Tensor) or seed.numel() != 1 or seed.dtype.is_floating_point:
        raise TypeError("fusedconv::p83: seed must be a one-element integer tensor, got %r"
                        % (seed,))
    value = int(seed.item())
    if not 0 <= value < _SEED_LIMIT:
        raise ValueError("fusedconv::p83: seed=%d is outside [0, %d]" % (value, _SEED_LIMIT - 1))
    return value


@torch.library.custom_op("fusedconv::p83", mutates_args=())
def _p83(x: Tensor, weight: Tensor, bias: Tensor, norm_weight: Tensor, norm_bias: Tensor,
         groups: int, eps: float, min_value: float, clamp_min: float, clamp_max: float,
         dropout_p: float, training: bool, seed: Optional[Tensor]) -> Tensor:
    if training and seed is None:
        raise ValueError("fusedconv::p83: training=True needs a seed tensor (see draw_seed)")
    value = _seed_value(seed) if seed is not None else 0
    return _f.p83(x, weight, bias, norm_weight, norm_bias, groups, eps=eps, min_value=min_value,
                  max_value=clamp_max, clamp_min=clamp_min, dropout_p=dropout_p,
                  training=training, seed=value)


@_p83.register_fake
def _p83_fake(x, weight, bias, norm_weight, norm_bias, groups, eps, min_value, clamp_min,
              clamp_max, dropout_p, training, seed):
    _require_rank("fusedconv::p83", "x", x, 5)
    _require_rank("fusedconv::p83", "weight", weight, 5)
    return x.new_empty([x.shape[0], weight.shape[0]] + _spatial_out(x, weight, 2))


# The seed is drawn by an operator of its own, opaque to torch.compile: it runs at every call
# of a compiled graph (a fresh seed each time) and needs no code generated for the CPU.
@torch.library.custom_op("fusedconv::draw_seed", mutates_args=())
def _draw_seed(x: Tensor) -> Tensor:
    return torch.randint(0, _SEED_LIMIT, (), dtype=torch.int64)


@_draw_seed.register_fake
def _draw_seed_fake(x):
    return torch.empty((), dtype=torch.int64, device="cpu")


# --------------------------------------------------------------------------- functions


def p24(x, weight, bias, dim=2):
    """torch.ops.fusedconv.p24: Conv3d -> min over depth -> softmax over channels."""
    return torch.ops.fusedconv.p24(x, weight, bias, dim)


def p25(x, weight, bias):
    """torch.ops.fusedconv.p25: Conv2d -> min over channels (keepdim) -> tanh -> tanh."""
    return torch.ops.fusedconv.p25(x, weight, bias)


def p32(x, weight, bias, scale_factor):
    """torch.ops.fusedconv.p32: Conv2d -> * scale_factor -> min over channels (keepdim)."""
    return torch.ops.fusedconv.p32(x, weight, bias, float(scale_factor))


def p83(x, weight, bias, norm_weight, norm_bias, groups, eps=1e-5, min_value=0.0, max_value=1.0,
        dropout_p=0.0, training=True, seed=None, clamp_min=None):
    """torch.ops.fusedconv.p83: Conv3d -> GroupNorm -> min(x, min_value) -> clamp(min_value,
    max_value) -> dropout. seed: None (drawn from torch's RNG), an int or a 0-dim tensor."""
    if training and seed is None:
        seed = torch.ops.fusedconv.draw_seed(x)
    elif seed is not None and not isinstance(seed, Tensor):
        value = operator.index(seed)  # TypeError for a non-integer
        if not 0 <= value < _SEED_LIMIT:
            raise ValueError("fusedconv.torch.p83: seed=%d is outside [0, %d]" % (value, _SEED_LIMIT - 1))
        seed = torch.tensor(value, dtype=torch.int64)
    return torch.ops.fusedconv.p83(
        x, weight, bias, norm_weight, norm_bias, groups, float(eps), float(min_value),
        float(min_value if clamp_min is None else clamp_min), float(max_value), float(dropout_p),
        bool(training), seed)


# --------------------------------------------------------------------------- modules


class Conv3dMinSoftmax(nn.Module):
    """KernelBench level 2, problem 24: Conv3d -> min over `dim` -> softmax over channels.
    Only dim=2 (depth) is implemented: another dim is a ValueError here."""

    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        if dim not in (2, -3):
            raise ValueError("Conv3dMinSoftmax: dim=%r is not supported (fusedconv implements "
                             "only dim=2, the depth of (N, C, D, H, W))" % (dim,))
        self.dim = dim

    def forward(self, x):
        return torch.ops.fusedconv.p24(x, self.conv.weight, self.conv.bias, self.dim)


class Conv2dMinTanhTanh(nn.Module):
    """KernelBench level 2, problem 25: Conv2d -> min over channels (keepdim) -> tanh -> tanh."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.ops.fusedconv.p25(x, self.conv.weight, self.conv.bias)


class Conv2dScaleMin(nn.Module):
    """KernelBench level 2, problem 32: Conv2d -> * scale_factor -> min over channels (keepdim)."""

    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        return torch.ops.fusedconv.p32(x, self.conv.weight, self.conv.bias, float(self.scale_factor))


class Conv3dGroupNormMinClampDropout(nn.Module):
    """KernelBench level 2, problem 83: Conv3d -> GroupNorm -> min(x, min_value) -> clamp ->
    Dropout. In training mode each call draws its dropout seed from torch's RNG."""

    def __init__(self, in_channels, out_channels, kernel_size, groups, min_value, max_value,
                 dropout_p):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.dropout = nn.Dropout(dropout_p)
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x):
        training = self.dropout.training
        seed = torch.ops.fusedconv.draw_seed(x) if training else None
        return torch.ops.fusedconv.p83(
            x, self.conv.weight, self.conv.bias, self.norm.weight, self.norm.bias,
            self.norm.num_groups, float(self.norm.eps), float(self.min_value),
            float(self.min_value), float(self.max_value), float(self.dropout.p), training, seed)


__all__ = ["p24", "p25", "p32", "p83", "Conv3dMinSoftmax", "Conv2dMinTanhTanh", "Conv2dScaleMin",
           "Conv3dGroupNormMinClampDropout"]
