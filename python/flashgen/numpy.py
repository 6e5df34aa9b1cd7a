"""flashgen's CPU backend on numpy arrays, without PyTorch.

Layout (DESIGN.md): q (batch, seqlen_q, heads_q, head_dim), k and v
(batch, seqlen_k, heads_kv, head_dim); o like q; lse float32 (batch, heads_q,
seqlen_q). dtypes float32 and float16, and bfloat16 where the ml_dtypes
package provides it. Any strides are passed through; an input is copied only
when flashgen cannot read it in place (last dimension not contiguous, negative
or fractional strides, or a byte order that is not the machine's, e.g. ">f4").
"""
import ctypes

import numpy as np

from . import _capi, _library

_DTYPES = {"float32": _capi.DType.F32, "float16": _capi.DType.F16, "bfloat16": _capi.DType.BF16}


def _dtype_code(name, a):
    code = _DTYPES.get(a.dtype.name)
    if code is None:
        raise TypeError(
            f"{name}: dtype is {a.dtype.name}, expected float32, float16 or bfloat16 "
            "(flashgen has no float64: cast the inputs first)"
        )
    return code


def _readable(a):
    """`a` as an array flashgen can read in place, copying only when it must."""
    a = np.asarray(a)
    if not a.dtype.isnative:  # ">f4" on a little-endian machine: flashgen reads native floats
        a = a.astype(a.dtype.newbyteorder("="))
    size = a.itemsize
    strides_ok = all(s >= 0 and s % size == 0 for s in a.strides)
    last_ok = a.ndim == 0 or a.shape[-1] <= 1 or a.strides[-1] == size
    return a if strides_ok and last_ok else np.ascontiguousarray(a)


def _view(name, a):
    """A flashgen_tensor borrowing `a`'s memory (the caller keeps `a` alive)."""
    strides = [s // a.itemsize for s in a.strides]
    if a.ndim and a.shape[-1] == 1:
        strides[-1] = 1  # a size-1 dimension's stride is irrelevant; flashgen wants 1 here
    return _capi.tensor(name, a.ctypes.data, _dtype_code(name, a), _capi.CPU, a.shape, strides)


def _check_dtypes(**arrays):
    """Each dtype is one flashgen takes, and all are the first one's."""
    names = list(arrays)
    for name in names:
        _dtype_code(name, arrays[name])
    first = arrays[names[0]]
    for name in names[1:]:
        if arrays[name].dtype != first.dtype:
            raise TypeError(f"{name}: dtype is {arrays[name].dtype.name}, expected {first.dtype.name} like {names[0]}")


def attention_forward(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0):
    """Exact attention forward on the CPU backend. Returns (o, lse).

    softmax_scale None means 1/sqrt(head_dim). causal with seqlen_q != seqlen_k is
    aligned bottom-right. window_size (left, right), -1 unbounded. softcap 0 is off.
    """
    q, k, v = _readable(q), _readable(k), _readable(v)
    _check_dtypes(q=q, k=k, v=v)
    o = np.full(q.shape, np.nan, dtype=q.dtype)
    lse = np.full(_lse_shape(q), np.nan, dtype=np.float32)
    options = _capi.options(softmax_scale, causal, window_size, softcap, False)
    args = _capi.forward_args(_view, options, q=q, k=k, v=v, o=o, lse=lse)
    lib = _library.library()
    _library.check(lib.flashgen_forward(_library.runtime(), ctypes.byref(args), None))
    return o, lse


def attention_backward(
    dout, q, k, v, o, lse, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, deterministic=False
):
    """Gradients of attention_forward's o. Returns (dq, dk, dv) in the input dtype.

    lse is attention_forward's; the options must be those of the forward call.
    dk/dv of a key/value head shared by several query heads sum over those heads.
    """
    dout, q, k, v, o = (_readable(a) for a in (dout, q, k, v, o))
    lse = np.asarray(lse)
    if lse.dtype != np.float32:
        raise TypeError(f"lse: dtype is {lse.dtype.name}, expected float32 (lse is always float32)")
    lse = _readable(lse)
    _check_dtypes(q=q, k=k, v=v, o=o, dout=dout)
    dq = np.full(q.shape, np.nan, dtype=q.dtype)
    dk = np.full(k.shape, np.nan, dtype=k.dtype)
    dv = np.full(v.shape, np.nan, dtype=v.dtype)
    options = _capi.options(softmax_scale, causal, window_size, softcap, deterministic)
    args = _capi.backward_args(_view, options, q=q, k=k, v=v, o=o, lse=lse, dout=dout, dq=dq, dk=dk, dv=dv)
    lib = _library.library()
    _library.check(lib.flashgen_backward(_library.runtime(), ctypes.byref(args), None))
    return dq, dk, dv


def _lse_shape(q):
    """(batch, heads_q, seqlen_q) for a rank-4 q; other ranks are left to flashgen to reject."""
    if q.ndim != 4:
        return (1, 1, 1)
    batch, seqlen_q, heads_q, _ = q.shape
    return (batch, heads_q, seqlen_q)
