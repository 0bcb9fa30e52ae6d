"""fusedconv: the project's fused Halide models called in-process, with zero copies.

    import fusedconv
    y = fusedconv.p25(x, conv_weight, conv_bias)      # NumPy, torch (CPU/CUDA) or CuPy

The functions pass the arrays' data pointers to libfusedconv_c.so through ctypes (see
python/README.md for where the library is looked for). `fusedconv.torch` (imported on its
own; it needs PyTorch) adds torch.library custom ops and drop-in nn.Modules.
"""

from ._library import ENV_VAR, LIBRARY_NAME
from ._state import lib as _lib
from .functional import FusedConvError, output_shape, p24, p25, p32, p83, synchronize

__all__ = ["FusedConvError", "p24", "p25", "p32", "p83", "output_shape", "synchronize",
           "has_gpu_kernels", "cuda_device_count", "gpu_unavailable_reason", "library_path"]

library_path = _lib.path


def has_gpu_kernels():
    """True when the loaded library holds the CUDA kernels."""
    return bool(_lib.fc_has_gpu_kernels())


def cuda_device_count():
    """Usable CUDA devices as the library sees them (0 without a GPU or driver)."""
    return int(_lib.fc_cuda_device_count())


def gpu_unavailable_reason():
    """Why no GPU is usable ("" when one is)."""
    msg = _lib.fc_gpu_unavailable_reason()
    return msg.decode("utf-8", "replace") if msg else ""
