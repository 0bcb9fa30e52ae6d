"""Finds and loads libfusedconv_c.so, and declares its C ABI (fusedconv/fusedconv_c.h) to ctypes.

ctypes needs no Python ABI: the shared library built once on the development machine
(Python 3.11) loads unchanged under any other Python 3 (the GPU machine's 3.12).

Search order (the first that exists wins):
  1. $FUSEDCONV_LIBRARY: the path of the .so itself (an error if set but missing);
  2. next to this file (the build tree's build/python/fusedconv/ and an installed package
     both keep the library there);
  3. <checkout>/build/python/fusedconv/ when the package is imported from the source tree
     (PYTHONPATH=python after a build into build/).
"""

import ctypes
import os

LIBRARY_NAME = "libfusedconv_c.so"
ENV_VAR = "FUSEDCONV_LIBRARY"
ABI_VERSION = 1
FC_DEVICE_CPU = -1
FC_MAX_DIMS = 8


class FcTensor(ctypes.Structure):
    """fc_tensor: a float32, C-contiguous view; nothing is copied."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * FC_MAX_DIMS),
        ("device", ctypes.c_int32),
    ]


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.dirname(os.path.dirname(here))
    return [
        os.path.join(here, LIBRARY_NAME),
        os.path.join(checkout, "build", "python", "fusedconv", LIBRARY_NAME),
    ]


def find_library():
    """The path of libfusedconv_c.so; ImportError saying where it looked when there is none."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        if not os.path.isfile(explicit):
            raise ImportError("fusedconv: %s=%r is not a file (it must name %s itself)"
                              % (ENV_VAR, explicit, LIBRARY_NAME))
        return explicit
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path):
            return path
    raise ImportError(
        "fusedconv: cannot find %s (looked in: %s). Build it with "
        "`cmake --build build --target fusedconv_python` (which puts it in build/python/fusedconv/) "
        "or set %s to its path." % (LIBRARY_NAME, ", ".join(tried), ENV_VAR))


_P = ctypes.POINTER(FcTensor)

# (name, restype, argtypes) of every fc_* function the package calls.
_SIGNATURES = [
    ("fc_last_error", ctypes.c_char_p, []),
    ("fc_abi_version", ctypes.c_int, []),
    ("fc_cuda_device_count", ctypes.c_int, []),
    ("fc_gpu_unavailable_reason", ctypes.c_char_p, []),
    ("fc_has_gpu_kernels", ctypes.c_int, []),
    ("fc_p24_forward", ctypes.c_int, [_P, _P, _P, ctypes.c_int32, _P, ctypes.c_void_p]),
    ("fc_p25_forward", ctypes.c_int, [_P, _P, _P, _P, ctypes.c_void_p]),
    ("fc_p32_forward", ctypes.c_int, [_P, _P, _P, ctypes.c_float, _P, ctypes.c_void_p]),
    ("fc_p83_forward", ctypes.c_int,
     [_P, _P, _P, _P, _P, ctypes.c_int32, ctypes.c_float, ctypes.c_float, ctypes.c_float,
      ctypes.c_float, ctypes.c_float, ctypes.c_int32, ctypes.c_uint32, _P, ctypes.c_void_p]),
    ("fc_output_shape", ctypes.c_int, [ctypes.c_char_p, _P, _P, ctypes.c_int32, _P]),
    ("fc_synchronize", ctypes.c_int, [ctypes.c_int32]),
]


def load():
    """Loads the library (ctypes.CDLL: each call releases the GIL) and checks its ABI version."""
    path = find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("fusedconv: cannot load %s: %s" % (path, e)) from e
    missing = [name for name, _, _ in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise ImportError("fusedconv: %s lacks %s (not a fusedconv C library?)"
                          % (path, ", ".join(missing)))
    for name, restype, argtypes in _SIGNATURES:
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    version = lib.fc_abi_version()
    if version != ABI_VERSION:
        raise ImportError("fusedconv: %s has C ABI version %d; this package needs %d"
                          % (path, version, ABI_VERSION))
    lib.path = path
    return lib


def last_error(lib):
    msg = lib.fc_last_error()
    return msg.decode("utf-8", "replace") if msg else "(no message)"
