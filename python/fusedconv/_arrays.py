"""What the C library sees of an array: its data pointer, shape and device, read in place.

Three kinds are accepted, each through its own attributes so that nothing is copied and
neither torch nor CuPy is imported here (they are looked up in sys.modules: an array of a
kind can only exist once its library is imported):
  numpy.ndarray  (host memory)
  torch.Tensor   (CPU or CUDA; strided layout)
  cupy.ndarray   (CUDA)
Each must be float32 and C-contiguous; anything else is a TypeError (kind, dtype) or a
ValueError (layout, device) naming the argument and what it got.
"""

import sys

import numpy as np

from ._library import FC_DEVICE_CPU


class ArrayView:
    """One argument as the library sees it. `obj` is kept so the memory stays alive."""

    __slots__ = ("name", "kind", "obj", "ptr", "shape", "device")

    def __init__(self, name, kind, obj, ptr, shape, device):
        self.name = name
        self.kind = kind
        self.obj = obj
        self.ptr = ptr
        self.shape = tuple(int(d) for d in shape)
        self.device = device

    def device_str(self):
        return "cpu" if self.device == FC_DEVICE_CPU else "cuda:%d" % self.device


def _torch():
    return sys.modules.get("torch")


def _cupy():
    return sys.modules.get("cupy")


def _not_contiguous(where, name, shape, strides, unit):
    return ValueError("%s: %s must be C-contiguous; got shape %s with strides %s (%s)"
                      % (where, name, tuple(shape), tuple(strides), unit))


def view(where, name, obj, writable=False):
    """An ArrayView of obj, or TypeError/ValueError naming `name` and what is wrong with it."""
    if isinstance(obj, np.ndarray):
        if obj.dtype != np.float32:
            raise TypeError("%s: %s must be float32, got NumPy dtype %s" % (where, name, obj.dtype))
        if not obj.flags.c_contiguous:
            raise _not_contiguous(where, name, obj.shape, obj.strides, "bytes")
        if not obj.flags.aligned:
            raise ValueError("%s: %s is not aligned to 4 bytes" % (where, name))
        if writable and not obj.flags.writeable:
            raise ValueError("%s: %s is read-only" % (where, name))
        return ArrayView(name, "numpy", obj, obj.__array_interface__["data"][0], obj.shape,
                         FC_DEVICE_CPU)
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            raise TypeError("%s: %s must be a strided (dense) tensor, got layout %s"
                            % (where, name, obj.layout))
        if obj.dtype != torch.float32:
            raise TypeError("%s: %s must be torch.float32, got %s" % (where, name, obj.dtype))
        if obj.device.type == "cpu":
            device = FC_DEVICE_CPU
        elif obj.device.type == "cuda":
            device = obj.device.index if obj.device.index is not None else torch.cuda.current_device()
        else:
            raise ValueError("%s: %s is on device %s; fusedconv runs on cpu and cuda tensors"
                             % (where, name, obj.device))
        if not obj.is_contiguous():
            raise _not_contiguous(where, name, obj.shape, obj.stride(), "elements")
        return ArrayView(name, "torch", obj, obj.data_ptr(), obj.shape, device)
    cupy = _cupy()
    if cupy is not None and isinstance(obj, cupy.ndarray):
        if obj.dtype != np.float32:
            raise TypeError("%s: %s must be float32, got CuPy dtype %s" % (where, name, obj.dtype))
        if not obj.flags.c_contiguous:
            raise _not_contiguous(where, name, obj.shape, obj.strides, "bytes")
        return ArrayView(name, "cupy", obj, obj.data.ptr, obj.shape, obj.device.id)
    raise TypeError("%s: %s must be a NumPy array, torch.Tensor or CuPy array, got %s"
                    % (where, name, type(obj).__module__ + "." + type(obj).__qualname__))


def empty_like_kind(v, shape):
    """A new uninitialized float32 array of v's kind on v's device."""
    if v.kind == "numpy":
        return np.empty(shape, dtype=np.float32)
    if v.kind == "torch":
        torch = _torch()
        return torch.empty(shape, dtype=torch.float32, device=v.obj.device)
    cupy = _cupy()
    with cupy.cuda.Device(v.device):
        return cupy.empty(shape, dtype=cupy.float32)


def current_stream(v):
    """The stream the caller's library would run on now for v's device (0 on the CPU)."""
    if v.device == FC_DEVICE_CPU:
        return 0
    if v.kind == "torch":
        return _torch().cuda.current_stream(v.obj.device).cuda_stream
    if v.kind == "cupy":
        cupy = _cupy()
        with cupy.cuda.Device(v.device):
            return cupy.cuda.get_current_stream().ptr
    return 0


def stream_pointer(where, stream):
    """A user-given stream as an integer: a torch.cuda.Stream, a CuPy Stream or a raw pointer."""
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if isinstance(stream, int) and stream >= 0:
        return stream
    raise TypeError("%s: stream must be a torch.cuda.Stream, a cupy.cuda.Stream or a "
                    "non-negative integer pointer, got %r" % (where, stream))
