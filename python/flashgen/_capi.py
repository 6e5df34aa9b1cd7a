"""ctypes mirror of the C API in include/flashgen/flashgen.h.

Every structure here matches its C counterpart field by field (tests/test_abi.py
compiles the header and compares sizes and offsets), so a change to the header
must be mirrored here.
"""
import ctypes
import enum

CPU = -1  # FLASHGEN_CPU: the device ordinal of host memory
PASS_FORWARD, PASS_BACKWARD = 1, 2  # FLASHGEN_PASS_*: flashgen_prepare's passes bits
PASS_BOTH = PASS_FORWARD | PASS_BACKWARD


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    COMPILE = 3
    CUDA = 4
    OUT_OF_MEMORY = 5
    NO_DEVICE = 6
    INTERNAL = 7


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    I32 = 3  # index tensors only (block_table, seqused_k, cu_seqlens_q, cu_seqlens_k)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),  # a C enum: int-sized
        ("device", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * 4),
        ("stride", ctypes.c_int64 * 4),
    ]


class AttentionOptions(ctypes.Structure):
    _fields_ = [
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("window_right", ctypes.c_int32),
        ("softcap", ctypes.c_float),
        ("deterministic", ctypes.c_int32),
    ]


class _Versioned(ctypes.Structure):
    """A versioned C struct (flashgen.h, "Versioned structs"): struct_size, its first field, is
    this layout's sizeof, set at construction."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(self)


class ForwardArgs(_Versioned):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", Tensor),
        ("k", Tensor),
        ("v", Tensor),
        ("o", Tensor),
        ("lse", Tensor),
        ("options", AttentionOptions),
        ("block_table", Tensor),  # KV cache (data NULL: absent)
        ("seqused_k", Tensor),
        ("cu_seqlens_q", Tensor),  # packed sequences (data NULL: a dense batch)
        ("cu_seqlens_k", Tensor),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
        ("num_splits", ctypes.c_int32),  # split-KV decode: 0 automatic, 1 unsplit, 2..128
    ]


class BackwardArgs(_Versioned):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", Tensor),
        ("k", Tensor),
        ("v", Tensor),
        ("o", Tensor),
        ("lse", Tensor),
        ("dout", Tensor),
        ("dq", Tensor),
        ("dk", Tensor),
        ("dv", Tensor),
        ("options", AttentionOptions),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("cu_seqlens_q", Tensor),  # packed sequences (data NULL: a dense batch)
        ("cu_seqlens_k", Tensor),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
    ]


class KvAppendArgs(_Versioned):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("k", Tensor),
        ("v", Tensor),
        ("k_cache", Tensor),
        ("v_cache", Tensor),
        ("block_table", Tensor),  # data NULL: a dense cache
        ("cache_seqlens", Tensor),
        ("rotary_cos", Tensor),  # data NULL: no rotary
        ("rotary_sin", Tensor),
        ("rotary_interleaved", ctypes.c_int32),
        ("q_at_consecutive_positions", ctypes.c_int32),
        ("q", Tensor),  # data NULL: q not rotated
        ("q_rotated", Tensor),
        ("cu_seqlens", Tensor),  # packed new rows (data NULL: dense)
    ]


class TuneShape(_Versioned):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("head_dim", ctypes.c_int32),
        ("dtype", ctypes.c_int),  # a C enum: int-sized
        ("seqlen_q", ctypes.c_int64),
        ("seqlen_k", ctypes.c_int64),
        ("options", AttentionOptions),
        ("forward", ctypes.c_int32),
        ("backward", ctypes.c_int32),
        ("device", ctypes.c_int32),
    ]


# void (*)(int32_t level, const char* message, void* user_data)
LogFn = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)


class RuntimeOptions(_Versioned):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("cache_dir", ctypes.c_char_p),
        ("autotune", ctypes.c_int32),
        ("cpu_threads", ctypes.c_int32),
        ("log", LogFn),
        ("log_user_data", ctypes.c_void_p),
        ("packaged_kernels", ctypes.c_char_p),
        ("substitute_while_compiling", ctypes.c_int32),
    ]


RuntimeHandle = ctypes.c_void_p  # flashgen_runtime*, opaque


def declare(lib):
    """Sets argument and result types of every C API function on a loaded library."""
    p = ctypes.POINTER
    signatures = {
        "flashgen_version": ([], ctypes.c_char_p),
        "flashgen_status_string": ([ctypes.c_int], ctypes.c_char_p),
        "flashgen_last_error": ([], ctypes.c_char_p),
        "flashgen_add_nvrtc_candidate": ([ctypes.c_char_p, ctypes.c_char_p], ctypes.c_int),
        "flashgen_attention_options_init": ([p(AttentionOptions)], None),
        "flashgen_runtime_options_init": ([p(RuntimeOptions)], None),
        "flashgen_forward_args_init": ([p(ForwardArgs)], None),
        "flashgen_backward_args_init": ([p(BackwardArgs)], None),
        "flashgen_tune_shape_init": ([p(TuneShape)], None),
        "flashgen_kv_append_args_init": ([p(KvAppendArgs)], None),
        "flashgen_tensor_contiguous": (
            [p(Tensor), ctypes.c_void_p, ctypes.c_int, ctypes.c_int32, ctypes.c_int32, p(ctypes.c_int64)],
            None,
        ),
        "flashgen_runtime_create": ([p(RuntimeOptions), p(RuntimeHandle)], ctypes.c_int),
        "flashgen_runtime_destroy": ([RuntimeHandle], None),
        "flashgen_forward": ([RuntimeHandle, p(ForwardArgs), ctypes.c_void_p], ctypes.c_int),
        "flashgen_backward": ([RuntimeHandle, p(BackwardArgs), ctypes.c_void_p], ctypes.c_int),
        "flashgen_prepare": ([RuntimeHandle, p(ForwardArgs), ctypes.c_uint], ctypes.c_int),
        "flashgen_append_kv": ([RuntimeHandle, p(KvAppendArgs), ctypes.c_void_p], ctypes.c_int),
        "flashgen_backward_workspace_bytes": (
            [RuntimeHandle, p(BackwardArgs), p(ctypes.c_size_t)],
            ctypes.c_int,
        ),
        "flashgen_tune": ([RuntimeHandle, p(TuneShape), ctypes.c_size_t, ctypes.c_int32], ctypes.c_int),
    }
    for name, (argtypes, restype) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return lib


_Dims = ctypes.c_int64 * 4
_PAD = ((0, 0, 0, 0), (0, 0, 0), (0, 0), (0,), ())  # zeros after `rank` dimensions


def tensor(name, data_ptr, dtype, device, shape, strides):
    """A borrowed flashgen_tensor view of argument `name`; strides in elements (ints). Built in one
    constructor call: it is on every call's path (field by field took ~4 us per tensor)."""
    rank = len(shape)
    if rank > 4:
        raise ValueError(f"{name}: rank is {rank}, expected 4 (batch, seqlen, heads, head_dim) or 3 for lse")
    pad = _PAD[rank]
    return Tensor(data_ptr, int(dtype), int(device), rank, _Dims(*shape, *pad), _Dims(*strides, *pad))


def forward_args(view, options, *, q, k, v, o, lse, block_table=None, seqused_k=None, varlen=None, num_splits=0):
    """flashgen_forward_args over caller-owned arrays; view(name, array) makes each flashgen_tensor
    (lse, block_table, seqused_k and varlen: None for absent; num_splits 0: automatic)."""
    if not -(2**31) <= int(num_splits) < 2**31:
        raise ValueError(f"num_splits: is {num_splits}, expected 0 (automatic), 1 (unsplit) or 2..128")
    args = ForwardArgs(q=view("q", q), k=view("k", k), v=view("v", v), o=view("o", o), options=options,
                       num_splits=int(num_splits))
    if lse is not None:
        args.lse = view("lse", lse)
    if block_table is not None:
        args.block_table = view("block_table", block_table)
    if seqused_k is not None:
        args.seqused_k = view("seqused_k", seqused_k)
    _set_varlen(args, view, varlen)
    return args


def backward_args(view, options, *, q, k, v, o, lse, dout, dq, dk, dv, varlen=None):
    """flashgen_backward_args over caller-owned arrays, without a workspace (the library allocates
    stream-ordered memory unless the caller sets one); view(name, array) makes each flashgen_tensor."""
    tensors = {"q": q, "k": k, "v": v, "o": o, "lse": lse, "dout": dout, "dq": dq, "dk": dk, "dv": dv}
    args = BackwardArgs(**{name: view(name, t) for name, t in tensors.items()}, options=options,
                        workspace=None, workspace_bytes=0)
    _set_varlen(args, view, varlen)
    return args


def kv_append_args(view, *, k, v, k_cache, v_cache, cache_seqlens, block_table=None, rotary_cos=None,
                   rotary_sin=None, rotary_interleaved=False, q=None, q_rotated=None, q_at_consecutive_positions=True,
                   cu_seqlens=None):
    """flashgen_kv_append_args over caller-owned arrays (None for absent ones); view(name, array)
    makes each flashgen_tensor."""
    args = KvAppendArgs(k=view("k", k), v=view("v", v), k_cache=view("k_cache", k_cache),
                        v_cache=view("v_cache", v_cache), cache_seqlens=view("cache_seqlens", cache_seqlens),
                        rotary_interleaved=int(bool(rotary_interleaved)),
                        q_at_consecutive_positions=int(bool(q_at_consecutive_positions)))
    for name, t in (("block_table", block_table), ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin), ("q", q),
                    ("q_rotated", q_rotated), ("cu_seqlens", cu_seqlens)):
        if t is not None:
            setattr(args, name, view(name, t))
    return args


def _set_varlen(args, view, varlen):
    """Packed sequences, varlen = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), into args
    (cu_seqlens_k None: packed queries over a KV cache)."""
    if varlen is None:
        return
    cu_seqlens_q, cu_seqlens_k, args.max_seqlen_q, args.max_seqlen_k = varlen
    args.cu_seqlens_q = view("cu_seqlens_q", cu_seqlens_q)
    if cu_seqlens_k is not None:
        args.cu_seqlens_k = view("cu_seqlens_k", cu_seqlens_k)


def options(softmax_scale, causal, window_size, softcap, deterministic):
    """flashgen_attention_options; softmax_scale None means 1/sqrt(head_dim) (NaN in C)."""
    left, right = window_size
    for name, value in (("window_left", left), ("window_right", right)):
        if not -(2**31) <= int(value) < 2**31:
            raise ValueError(f"options.{name}: is {value}, expected -1 (unbounded) or >= 0 that fits in int32")
    return AttentionOptions(
        softmax_scale=float("nan") if softmax_scale is None else float(softmax_scale),
        causal=int(bool(causal)),
        window_left=int(left),
        window_right=int(right),
        softcap=float(softcap),
        deterministic=int(bool(deterministic)),
    )
