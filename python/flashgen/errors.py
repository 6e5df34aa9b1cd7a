"""Exceptions raised for flashgen's error statuses.

Each carries the status and flashgen_last_error()'s message. The classes also
derive from the built-in exception a Python caller expects for that kind of
problem, so `except ValueError` catches a bad argument.
"""
from ._capi import Status


class Error(RuntimeError):
    """A failure reported by the flashgen runtime library."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = Status(status)


class InvalidArgumentError(Error, ValueError):
    """An argument has a wrong shape, stride, dtype combination or option value."""


class UnsupportedError(Error, NotImplementedError):
    """Valid arguments the selected backend cannot run (e.g. fp32 or head_dim 512 on a GPU)."""


class CompileError(Error):
    """NVRTC rejected a generated kernel."""


class CudaError(Error):
    """The CUDA driver reported an error."""


class OutOfMemoryError(Error, MemoryError):
    """Device or host memory ran out."""


class NoDeviceError(Error):
    """No CUDA device or driver where one was asked for."""


_BY_STATUS = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.UNSUPPORTED: UnsupportedError,
    Status.COMPILE: CompileError,
    Status.CUDA: CudaError,
    Status.OUT_OF_MEMORY: OutOfMemoryError,
    Status.NO_DEVICE: NoDeviceError,
}


def error_for(status, message):
    """The exception for a non-zero flashgen_status."""
    try:
        status = Status(status)
    except ValueError:
        return Error(Status.INTERNAL, f"flashgen returned unknown status {status}: {message}")
    return _BY_STATUS.get(status, Error)(status, message)
