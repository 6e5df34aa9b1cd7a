"""Finds, loads and holds the flashgen runtime library (libflashgen.so).

Lookup order: $FLASHGEN_LIBRARY; a libflashgen.so installed next to this
package; the repository's build directories (build/ first, then build-*/ newest
first), for use straight from a checkout; the system's library path. The library
is loaded on first use, so `import flashgen` works where it is absent.

Once loaded, the library is told where pip puts NVRTC for this interpreter
(nvidia-cuda-nvrtc for CUDA 13, nvidia-cuda-nvrtc-cu12): it loads NVRTC itself, on the
first CUDA compile, from $FLASHGEN_NVRTC, these files, $CUDA_HOME, /usr/local/cuda or
the system library path (runtime/nvrtc_library.h).
"""
import ctypes
import ctypes.util
import os
import pathlib
import site
import sys
import threading

from . import _capi
from .errors import error_for

_LIBRARY_NAME = "libflashgen.so"
# The kernels the wheel ships (one warmed directory per NVRTC release that compiled them):
# served before anything is compiled, without NVRTC (docs/cache.md).
PACKAGED_KERNELS = pathlib.Path(__file__).resolve().parent / "kernels"
# Where each pip wheel puts libnvrtc under site-packages, newest CUDA first.
_PIP_NVRTC = (
    ("nvidia/cu13/lib/libnvrtc.so.13", "pip nvidia-cuda-nvrtc (CUDA 13)"),
    ("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "pip nvidia-cuda-nvrtc-cu12"),
)
_lock = threading.RLock()  # runtime() reports errors through library()
_lib = None
_runtime = None
_runtime_settings = {}  # configure()'s overrides of flashgen_runtime_options_init's defaults


def candidates(environ=os.environ, package_dir=pathlib.Path(__file__).resolve().parent):
    """Paths to try, in order; the first that exists wins."""
    if environ.get("FLASHGEN_LIBRARY"):
        return [pathlib.Path(environ["FLASHGEN_LIBRARY"])]
    paths = [package_dir / _LIBRARY_NAME]
    repo = package_dir.parent.parent
    builds = sorted(repo.glob("build-*/runtime/" + _LIBRARY_NAME), key=_mtime, reverse=True)
    paths += [repo / "build" / "runtime" / _LIBRARY_NAME, *builds]
    return paths


def _mtime(path):
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def locate(environ=os.environ, package_dir=pathlib.Path(__file__).resolve().parent):
    """The path (or system name) of the library to load; raises OSError naming what was tried."""
    tried = candidates(environ, package_dir)
    if environ.get("FLASHGEN_LIBRARY"):
        if not tried[0].is_file():
            raise OSError(f"FLASHGEN_LIBRARY is '{tried[0]}', which is not a file; expected the path of {_LIBRARY_NAME}")
        return str(tried[0])
    for path in tried:
        if path.is_file():
            return str(path)
    system = ctypes.util.find_library("flashgen")
    if system:
        return system
    listing = ", ".join(str(p) for p in tried)
    raise OSError(
        f"flashgen: cannot find {_LIBRARY_NAME} (tried {listing} and the system library path); "
        "build it (scripts/build.sh) or set FLASHGEN_LIBRARY to its path"
    )


def site_directories():
    """This interpreter's site-packages directories (a virtual environment's first), then any
    other sys.path entry holding the `nvidia` namespace package of pip's CUDA wheels."""
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs += [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]
    unique = []
    for d in dirs:
        d = os.path.abspath(d)
        if d not in unique:
            unique.append(d)
    return unique


def nvrtc_candidates(dirs=None):
    """(path, origin) of every pip NVRTC the runtime may load, in the order it tries them:
    each wheel's file in every site directory, whether present or not (the runtime's
    error lists them all when none loads)."""
    dirs = site_directories() if dirs is None else dirs
    return [(os.path.join(d, relative), origin) for relative, origin in _PIP_NVRTC for d in dirs]


# Where pip's CUDA wheels put the disassembler `flashgen dump --emit sass` runs
# (nvidia-cuda-nvdisasm for CUDA 13).
_PIP_TOOL_DIRS = ("nvidia/cu13/bin",)


def pip_tool_directories(dirs=None):
    """The bin directories of pip's CUDA wheels that hold nvdisasm, in site order."""
    dirs = site_directories() if dirs is None else dirs
    found = [os.path.join(d, relative) for relative in _PIP_TOOL_DIRS for d in dirs]
    return [d for d in found if os.access(os.path.join(d, "nvdisasm"), os.X_OK)]


def library():
    """The loaded library with every C API function declared, told where pip's NVRTC is."""
    global _lib
    if _lib is not None:  # set once, never reset: no lock on every call's path
        return _lib
    with _lock:
        if _lib is None:
            lib = _capi.declare(ctypes.CDLL(locate()))
            for path, origin in nvrtc_candidates():
                # Fails only once the library has looked for NVRTC (another user of it in
                # this process compiled first): it then keeps what it found.
                lib.flashgen_add_nvrtc_candidate(os.fsencode(path), origin.encode())
            _lib = lib
        return _lib


def configure(cache_dir=None, autotune=None, cpu_threads=None, substitute_while_compiling=None):
    """Options of the process-wide runtime; call before the first attention call.

    None keeps the library's default. cache_dir: kernel cache directory.
    autotune: 0 off, 1 cached, 2 startup, 3 full. cpu_threads: CPU backend threads (0: all cores).
    substitute_while_compiling: True (the default) runs a new head dim's first calls on the next
    class's kernels (64, 128, 256) while its own compile; False waits for the compile.
    """
    with _lock:
        if _runtime is not None:
            raise RuntimeError("flashgen.configure: the runtime already exists; call configure before the first attention call")
        settings = {"cache_dir": None if cache_dir is None else os.fsencode(cache_dir),
                    "autotune": autotune, "cpu_threads": cpu_threads,
                    "substitute_while_compiling": None if substitute_while_compiling is None
                    else int(bool(substitute_while_compiling))}
        _runtime_settings.clear()
        _runtime_settings.update({k: v for k, v in settings.items() if v is not None})


def runtime():
    """The process-wide flashgen_runtime handle, created on first use.

    It lives until the process exits: destroying it from an atexit hook could run
    after the CUDA driver has been torn down.
    """
    global _runtime
    if _runtime is not None:  # set once, never reset
        return _runtime
    lib = library()
    with _lock:
        if _runtime is None:
            options = _capi.RuntimeOptions()
            lib.flashgen_runtime_options_init(ctypes.byref(options))
            for name, value in _runtime_settings.items():
                setattr(options, name, value)
            if PACKAGED_KERNELS.is_dir() and not os.environ.get("FLASHGEN_PACKAGED_KERNELS"):
                options.packaged_kernels = os.fsencode(PACKAGED_KERNELS)
            handle = _capi.RuntimeHandle()
            check(lib.flashgen_runtime_create(ctypes.byref(options), ctypes.byref(handle)))
            _runtime = handle
        return _runtime


def check(status):
    """Raises the matching flashgen error for a non-zero status, with flashgen_last_error()."""
    if status != _capi.Status.OK:
        message = library().flashgen_last_error()
        raise error_for(status, message.decode(errors="replace") if message else "(no message)")


def version():
    """The runtime library's version, "MAJOR.MINOR.PATCH"."""
    return library().flashgen_version().decode()


def path():
    """The file the runtime library was loaded from."""
    return library()._name
