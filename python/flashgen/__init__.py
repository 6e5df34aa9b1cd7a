"""flashgen: exact attention (FlashAttention forward and backward) through kernels
generated at run time, or flashgen's CPU backend.

    flashgen.attention(q, k, v, ...)            PyTorch tensors (imports torch on first use)
    flashgen.varlen_attention(q, k, v, ...)     the same on packed variable-length sequences
    flashgen.numpy.attention_forward(q, k, v)   numpy arrays on the CPU backend, no torch needed

The runtime library (libflashgen.so) is found through $FLASHGEN_LIBRARY, next to
this package, or in the repository's build directories; see _library.py.
"""
from ._library import configure, path as library_path, version as library_version
from .errors import (
    CompileError,
    CudaError,
    Error,
    InvalidArgumentError,
    NoDeviceError,
    OutOfMemoryError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "attention",
    "varlen_attention",
    "configure",
    "library_path",
    "library_version",
    "numpy",
    "Error",
    "InvalidArgumentError",
    "UnsupportedError",
    "CompileError",
    "CudaError",
    "OutOfMemoryError",
    "NoDeviceError",
]


def __getattr__(name):
    # torch is imported only when the PyTorch API is first touched, so the numpy API
    # and the library work where torch is not installed.
    if name in ("attention", "varlen_attention"):
        from . import torch_op

        value = globals()[name] = getattr(torch_op, name)  # later lookups skip this hook (~1 us a call)
        return value
    if name == "numpy":
        from . import numpy

        return numpy
    raise AttributeError(f"module 'flashgen' has no attribute '{name}'")
