"""flashgen.attention for PyTorch: custom operators with fake (shape) and autograd rules.

With torch >= 2.4, the operators flashgen::forward and flashgen::backward (and
flashgen::varlen_forward and flashgen::varlen_backward for packed sequences) are
registered through torch.library.custom_op so torch.compile(fullgraph=True) traces
them as opaque nodes. Older torch (>= 1.13) has no custom_op: there attention runs
through AttentionFunction (VarlenAttentionFunction), a torch.autograd.Function with
the same forward and the same gradients (eager mode only). CPU tensors run on the CPU backend; CUDA tensors
run generated kernels on torch.cuda.current_stream(), with no synchronisation.
"""
import ctypes
import math
import threading

import torch

from . import _capi, _library

_DTYPES = {torch.float32: _capi.DType.F32, torch.float16: _capi.DType.F16, torch.bfloat16: _capi.DType.BF16}


def _readable(t):
    """`t`, or a copy when its last dimension is not contiguous (flashgen requires stride 1 there)."""
    if t.dim() and t.stride(-1) != 1 and t.size(-1) > 1:
        return t.contiguous()
    return t


def _dtype_code(name, t):
    code = _DTYPES.get(t.dtype)
    if code is None:
        raise TypeError(f"{name}: dtype is {t.dtype}, expected torch.float16 or torch.bfloat16 (or torch.float32 on the CPU)")
    return code


def _view(name, t):
    """A flashgen_tensor borrowing `t`'s memory (the caller keeps `t` alive)."""
    code = _DTYPES.get(t.dtype)
    if code is None:
        _dtype_code(name, t)  # raises, naming the argument
    strides = t.stride()
    if strides and t.size(-1) == 1:
        strides = strides[:-1] + (1,)  # a size-1 dimension's stride is irrelevant; flashgen wants 1 here
    if t.is_cuda:
        device = t.get_device()
    elif t.device.type == "cpu":
        device = _capi.CPU
    else:
        raise ValueError(f"{name}: device is {t.device}, expected a CPU or CUDA tensor")
    return _capi.tensor(name, t.data_ptr(), code, device, t.shape, strides)


def _index_view(name, t, like, like_name="q"):
    """A flashgen_tensor borrowing int32 index tensor `t` (block_table, seqused_k) on the device of `like`
    (the argument `like_name`)."""
    if t.dtype != torch.int32:
        raise TypeError(f"{name}: dtype is {t.dtype}, expected torch.int32")
    if t.device != like.device:
        raise ValueError(f"{name}: device is {t.device}, expected {like.device} like {like_name}")
    strides = [s if n > 1 else 1 for n, s in zip(t.shape, t.stride())]  # size-1 dims: any stride is fine
    device = _capi.CPU if t.device.type == "cpu" else t.device.index
    return _capi.tensor(name, t.data_ptr(), _capi.DType.I32, device, t.shape, strides)


# The int32 index tensors of flashgen's argument structs.
_INDEX_TENSORS = ("block_table", "seqused_k", "cu_seqlens_q", "cu_seqlens_k", "cache_seqlens", "cu_seqlens")


def _views(like, names=None, like_name="q"):
    """The view function _capi's argument builders take: index tensors as int32 views on the device of
    `like` (the argument `like_name`), the others through _view, named in messages as `names` (flashgen's
    name -> the caller's) says."""
    names = names or {}

    def view(name, t):
        if name in _INDEX_TENSORS:
            return _index_view(name, t, like, like_name)
        return _view(names.get(name, name), t)

    return view


# Argument structs per call signature: everything but the data pointers (field names, dtypes,
# devices, shapes, strides, options, bounds), built once (view by view a struct costs ~4 us a
# tensor, most of a small call's Python time). Each thread keeps its own struct per signature and
# writes a call's pointers into it through views made once: the library reads the struct only
# during the call, which releases the GIL, so one struct per thread is never read by two calls at
# once. The library validates every call all the same.
_ARG_STRUCTS_MAX = 256
_threads = threading.local()


class _ArgStruct:
    """A signature's argument struct on this thread: `struct`, the `ref` the C calls take, and a
    writable view of each present tensor's data pointer (`pointers`, in the call's order)."""

    __slots__ = ("struct", "ref", "pointers")

    def __init__(self, template, names):
        self.struct = template
        self.ref = ctypes.byref(template)
        # Views into the struct's memory (they keep `template` alive): tensor `name`'s data field.
        data = _capi.Tensor.data.offset
        self.pointers = tuple(ctypes.c_void_p.from_buffer(template, getattr(type(template), name).offset + data)
                              for name in names)


def _arg_structs():
    """This thread's signature -> _ArgStruct map."""
    structs = getattr(_threads, "structs", None)
    if structs is None:
        structs = _threads.structs = {}
    return structs


def _cached_args(kind, extra, inputs, build, outputs=None):
    """The _capi args struct of this thread for a call over `inputs` and `outputs` (field name ->
    tensor, or None for an absent one), holding their data pointers: build() makes it the first time
    a signature is seen. The signature is kind, extra and the inputs' layouts; outputs are the call's
    fresh tensors, whose presence and layouts follow from the signature. The struct is valid until
    this thread's next call of the same signature. Returns the _ArgStruct."""
    key = (kind, extra)
    pointers = []
    for name, t in inputs.items():  # a loop of concatenations: half a generator's time here
        if t is not None:
            key += (name, t.dtype, t.get_device(), t.shape, t.stride())
            pointers.append(t.data_ptr())
    if outputs:
        for t in outputs.values():
            if t is not None:
                pointers.append(t.data_ptr())
    structs = _arg_structs()
    entry = structs.get(key)
    if entry is None:
        names = [n for n, t in inputs.items() if t is not None]
        if outputs:
            names += [n for n, t in outputs.items() if t is not None]
        entry = _ArgStruct(build(), names)
        if len(structs) >= _ARG_STRUCTS_MAX:
            structs.clear()
        structs[key] = entry
    for view, pointer in zip(entry.pointers, pointers):
        view.value = pointer
    return entry


def _packed_fields(varlen):
    """Packed sequences' offsets as argument-struct fields (name -> tensor) and their bounds
    (max_seqlen_q, max_seqlen_k); nothing for a dense batch (varlen None)."""
    if varlen is None:
        return {}, ()
    return {"cu_seqlens_q": varlen[0], "cu_seqlens_k": varlen[1]}, tuple(varlen[2:])


def _check_dtypes(**tensors):
    """Each dtype is one flashgen takes, and all are the first one's."""
    names = list(tensors)
    for name in names:
        _dtype_code(name, tensors[name])
    first = tensors[names[0]]
    for name in names[1:]:
        if tensors[name].dtype != first.dtype:
            raise TypeError(f"{name}: dtype is {tensors[name].dtype}, expected {first.dtype} like {names[0]}")


def _scale(softmax_scale):
    """The operators' softmax_scale: 0 for None (1/sqrt(head_dim)); anything but a finite value > 0 is refused."""
    if softmax_scale is None:
        return 0.0
    if not (math.isfinite(softmax_scale) and softmax_scale > 0):
        raise ValueError(f"softmax_scale: is {softmax_scale}, expected a finite value > 0 (or None for 1/sqrt(head_dim))")
    return float(softmax_scale)


def _outputs(q, packed=False, with_lse=True):
    """Fresh o (like q, contiguous) and lse (float32 (batch, heads_q, seqlen_q), packed (heads_q, total_q);
    None without with_lse) for a forward of q: their layouts follow from q's alone (_cached_args relies
    on it). flashgen never writes packed rows outside every sequence: they hold o = 0 and lse = -inf."""
    if packed:
        lse = torch.full(_lse_shape(q), -math.inf, dtype=torch.float32, device=q.device) if with_lse else None
        return torch.zeros(q.shape, dtype=q.dtype, device=q.device), lse
    # empty_like and new_empty: half the host time of torch.empty(shape, dtype=, device=) on CUDA
    # (1.7 and 2.5 against 4.3 us on the H200 machine).
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    return o, q.new_empty(_lse_shape(q), dtype=torch.float32) if with_lse else None


# The current stream's raw handle without a torch.cuda.Stream object per call (what Triton's
# launcher reads too); torch.cuda.current_stream where this torch lacks it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(t):
    """The stream flashgen launches on: PyTorch's current stream of t's device (None on the CPU)."""
    if not t.is_cuda:
        return None
    if _raw_stream is not None:
        return _raw_stream(t.get_device())  # an int: ctypes passes it as the c_void_p argument
    return torch.cuda.current_stream(t.device).cuda_stream


def _options(softmax_scale, causal, window_left, window_right, softcap, deterministic):
    # softmax_scale 0 is the operators' "default" (1/sqrt(head_dim)); NaN would not survive graph capture.
    scale = None if softmax_scale == 0.0 else softmax_scale
    return _capi.options(scale, causal, (window_left, window_right), softcap, deterministic)


def _lse_shape(q):
    """(batch, heads_q, seqlen_q) of a dense q, (heads_q, total_q) of a packed one; other ranks are flashgen's
    to refuse."""
    if q.dim() == 4:
        return (q.size(0), q.size(2), q.size(1))
    return (q.size(1), q.size(0)) if q.dim() == 3 else (1, 1, 1)


# torch.library.custom_op arrived in torch 2.4.
HAS_CUSTOM_OP = hasattr(torch.library, "custom_op")


def _forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
    return_lse: bool,
    prepare_backward: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (o, lse). softmax_scale 0 means 1/sqrt(head_dim); return_lse only matters to autograd;
    prepare_backward: a backward follows (inputs require grad), so the first forward of a variant
    starts compiling the backward's kernels beside its own."""
    return _run_forward(q, k, v, (softmax_scale, causal, window_left, window_right, softcap, deterministic),
                        prepare_backward)


def _varlen_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
    return_lse: bool,
    prepare_backward: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """_forward of packed sequences: q (total_q, heads_q, head_dim), k, v (total_k, heads_kv, head_dim);
    returns (o, lse (heads_q, total_q))."""
    return _run_forward(q, k, v, (softmax_scale, causal, window_left, window_right, softcap, deterministic),
                        prepare_backward, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))


def _run_forward(q, k, v, options, prepare_backward, varlen=None, with_lse=True):
    """The forward operators' body; options: _options' arguments; varlen: (cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k) of packed sequences, None for a dense batch; lse None without with_lse."""
    q, k, v = _readable(q), _readable(k), _readable(v)
    o, lse = _outputs(q, packed=varlen is not None, with_lse=with_lse)
    offsets, bounds = _packed_fields(varlen)

    def build():
        _check_dtypes(q=q, k=k, v=v)
        return _capi.forward_args(_views(q), _options(*options), q=q, k=k, v=v, o=o, lse=lse, varlen=varlen)

    args = _cached_args("forward", (options, with_lse, *bounds), {"q": q, "k": k, "v": v, **offsets}, build,
                        {"o": o, "lse": lse})
    lib = _library.library()
    if prepare_backward and q.is_cuda:
        _prepare_once(lib, args, (q.shape, k.shape, q.dtype, q.device, options, bounds or None))
    _library.check(lib.flashgen_forward(_library.runtime(), args.ref, _stream(q)))
    return o, lse


# The variants whose kernels flashgen_prepare was asked for (once each: after that the
# runtime finds them in memory, and skipping the call keeps the per-call cost down).
_prepared = set()


def _prepare_once(lib, args, variant):
    """Starts the compiles of the forward's and the backward's kernels of `variant` (hashable) once."""
    if variant not in _prepared:
        _library.check(lib.flashgen_prepare(_library.runtime(), args.ref, _capi.PASS_BOTH))
        _prepared.add(variant)


def _forward_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic, return_lse,
                  prepare_backward):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32)


def _varlen_forward_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                         window_left, window_right, softcap, deterministic, return_lse, prepare_backward):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32)


def _backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (dq, dk, dv) of _forward's o, in the input dtype."""
    return _run_backward(dout, q, k, v, o, lse, (softmax_scale, causal, window_left, window_right, softcap,
                                                 deterministic))


def _varlen_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (dq, dk, dv) of _varlen_forward's o, in the input dtype."""
    return _run_backward(dout, q, k, v, o, lse, (softmax_scale, causal, window_left, window_right, softcap,
                                                 deterministic), (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))


def _run_backward(dout, q, k, v, o, lse, options, varlen=None):
    """The backward operators' body (options and varlen as _run_forward has them)."""
    dout, q, k, v, o = (_readable(t) for t in (dout, q, k, v, o))
    lse = lse.contiguous()
    # flashgen never writes packed rows outside every sequence: their gradients are zero.
    new = torch.empty if varlen is None else torch.zeros
    dq = new(q.shape, dtype=q.dtype, device=q.device)
    dk = new(k.shape, dtype=k.dtype, device=k.device)
    dv = new(v.shape, dtype=v.dtype, device=v.device)
    offsets, bounds = _packed_fields(varlen)

    def build():
        _check_dtypes(q=q, k=k, v=v, o=o, dout=dout)
        return _capi.backward_args(_views(q), _options(*options), q=q, k=k, v=v, o=o, lse=lse, dout=dout, dq=dq,
                                   dk=dk, dv=dv, varlen=varlen)

    tensors = {"q": q, "k": k, "v": v, "o": o, "lse": lse, "dout": dout, **offsets}
    args = _cached_args("backward", (options, *bounds), tensors, build, {"dq": dq, "dk": dk, "dv": dv})
    lib = _library.library()
    runtime = _library.runtime()
    workspace = _workspace(lib, runtime, args, q.device)
    _library.check(lib.flashgen_backward(runtime, args.ref, _stream(q)))
    del workspace  # freed in stream order by PyTorch's caching allocator
    return dq, dk, dv


def _workspace(lib, runtime, args, device):
    """Backward's device workspace from PyTorch's allocator (not flashgen's own stream-ordered pool), set in
    args (an _ArgStruct: set on every call, since the struct is reused by the signature's next call)."""
    args.struct.workspace = None
    args.struct.workspace_bytes = 0
    if device.type != "cuda":
        return None
    size = ctypes.c_size_t(0)
    _library.check(lib.flashgen_backward_workspace_bytes(runtime, args.ref, ctypes.byref(size)))
    if size.value == 0:
        return None
    buffer = torch.empty(size.value, dtype=torch.uint8, device=device)
    args.struct.workspace = buffer.data_ptr()
    args.struct.workspace_bytes = size.value
    return buffer


def _backward_fake(dout, q, k, v, o, lse, softmax_scale, causal, window_left, window_right, softcap, deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _varlen_backward_fake(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          softmax_scale, causal, window_left, window_right, softcap, deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    # inputs: q, k, v, the six options, return_lse, prepare_backward
    _save(ctx, inputs, output, options=inputs[3:-2])


def _varlen_setup_context(ctx, inputs, output):
    # inputs: q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, the six options, return_lse,
    # prepare_backward
    _save(ctx, inputs, output, options=inputs[7:-2], offsets=inputs[3:5], max_seqlens=inputs[5:7])


def _save(ctx, inputs, output, options, offsets=(), max_seqlens=None):
    """What _gradients needs of a forward; offsets and max_seqlens: those of packed sequences."""
    ctx.save_for_backward(*inputs[:3], *output, *offsets)
    ctx.max_seqlens = max_seqlens
    ctx.options = tuple(options)
    ctx.return_lse = inputs[-2]
    ctx.inputs = len(inputs)
    # An output the loss does not use gets None, not a materialised zero tensor: an unused
    # lse must not cost a second backward pass (and its q-sized temporaries).
    ctx.set_materialize_grads(False)


def _gradients(ctx, dout, dlse):
    """The autograd formula of every registration: gradients of (o, lse) -> gradients of the inputs."""
    q, k, v, o, lse, *offsets = ctx.saved_tensors

    def backward(dout, v, o):  # the backward operator of ctx's forward
        if ctx.max_seqlens is None:
            return backward_op(dout, q, k, v, o, lse, *ctx.options)
        return varlen_backward_op(dout, q, k, v, o, lse, *offsets, *ctx.max_seqlens, *ctx.options)

    # Grad mode is on in a backward only under create_graph=True: the gradients would have to
    # be differentiable, and flashgen's are not (no second-order formula): refuse rather
    # than return gradients whose own gradients are silently wrong.
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v, dout, dlse)):
        raise RuntimeError(
            "flashgen.attention does not support double backward: its gradients are not differentiable "
            "(backward with create_graph=True, torch.autograd.grad(..., create_graph=True) or functorch transforms "
            "over them); use torch.nn.functional.scaled_dot_product_attention for higher-order gradients"
        )
    if dout is not None:
        dq, dk, dv = backward(dout, v, o)
    else:
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if ctx.return_lse and dlse is not None:
        dq_lse, dk_lse = _lse_gradient(backward, q, v, dlse)
        dq, dk = dq + dq_lse, dk + dk_lse
    return (dq, dk, dv) + (None,) * (ctx.inputs - 3)


def _lse_gradient(backward, q, v, dlse):
    """dq, dk of sum(dlse * lse), through flashgen's backward (backward(dout, v, o) of the forward).

    d lse_i / d s_ij = P_ij, so this is the backward with dS = P * dlse. The backward
    computes dS = P * (dP - D) with dP = dout v^T and D = rowsum(dout * o); with
    v = ones, dout = (dlse, 0, ..., 0) per row and o = 0 that is dP = dlse, D = 0.
    """
    dout = torch.zeros_like(q)
    dout[..., 0] = dlse.transpose(-1, -2).to(q.dtype)  # (.., heads_q, rows) -> q's (.., rows, heads_q)
    dq, dk, _ = backward(dout, torch.ones_like(v), torch.zeros_like(q))
    return dq, dk


def _autograd_function(forward, setup_context):
    """forward and _gradients as a torch.autograd.Function: what flashgen's calls use where torch has
    no custom_op (torch < 2.4). torch.compile does not trace into it."""

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            output = forward(*inputs)
            setup_context(ctx, inputs, output)
            return output

        @staticmethod
        def backward(ctx, dout, dlse):
            return _gradients(ctx, dout, dlse)

    return Function


AttentionFunction = _autograd_function(_forward, _setup_context)
VarlenAttentionFunction = _autograd_function(_varlen_forward, _varlen_setup_context)

if HAS_CUSTOM_OP:
    forward_op = torch.library.custom_op("flashgen::forward", mutates_args=())(_forward)
    backward_op = torch.library.custom_op("flashgen::backward", mutates_args=())(_backward)
    varlen_forward_op = torch.library.custom_op("flashgen::varlen_forward", mutates_args=())(_varlen_forward)
    varlen_backward_op = torch.library.custom_op("flashgen::varlen_backward", mutates_args=())(_varlen_backward)
    forward_op.register_fake(_forward_fake)
    backward_op.register_fake(_backward_fake)
    varlen_forward_op.register_fake(_varlen_forward_fake)
    varlen_backward_op.register_fake(_varlen_backward_fake)
    forward_op.register_autograd(_gradients, setup_context=_setup_context)
    varlen_forward_op.register_autograd(_gradients, setup_context=_varlen_setup_context)
    _attention, _varlen_attention = forward_op, varlen_forward_op
else:  # plain functions: eager calls into the library
    forward_op, backward_op = _forward, _backward
    varlen_forward_op, varlen_backward_op = _varlen_forward, _varlen_backward
    _attention, _varlen_attention = AttentionFunction.apply, VarlenAttentionFunction.apply


def kv_cache_forward(q, k_cache, v_cache, block_table=None, seqused_k=None, softmax_scale=None, causal=False,
                     window_size=(-1, -1), softcap=0.0, cu_seqlens_q=None, max_seqlen_q=None, num_splits=0,
                     return_lse=True):
    """Attention of q over a KV cache, forward only (inference): returns (o, lse).

    q: (batch, seqlen_q, heads_q, head_dim). Dense cache: k_cache, v_cache (batch, seqlen_k,
    heads_kv, head_dim). Paged cache: k_cache, v_cache (num_pages, page_size, heads_kv, head_dim),
    any page_size >= 1, and block_table int32 (batch, max_pages_per_seq) naming each sequence's
    pages in order. seqused_k: int32 (batch,), sequence b attends to its first seqused_k[b] keys
    (default: all), with causal and window aligned bottom-right to that count. Read on the GPU:
    no synchronisation, CUDA-graph safe.

    Packed queries (prefill chunks and decode steps of many sequences in one call):
    cu_seqlens_q int32 (batch + 1,) and max_seqlen_q (int >= 1) make q (total_q, heads_q,
    head_dim), sequence b's queries rows cu_seqlens_q[b]:cu_seqlens_q[b + 1]; o is packed like
    q and lse is (heads_q, total_q), rows outside every sequence o = 0 and lse = -inf. A KV
    cache (block_table or seqused_k) is required then.

    num_splits: the split-KV decode's key splits (0 automatic, 1 unsplit, 2..128); the CPU
    backend's result does not depend on it. return_lse False: lse is None (not computed, not
    allocated: a decode step's host time).
    """
    scale = _scale(softmax_scale)
    q, k_cache, v_cache = _readable(q), _readable(k_cache), _readable(v_cache)
    packed = cu_seqlens_q is not None
    if packed and max_seqlen_q is None:
        raise ValueError("max_seqlen_q: is None with cu_seqlens_q, expected a bound (int >= 1) on every sequence's "
                         "queries")
    o, lse = _outputs(q, packed=packed, with_lse=return_lse)
    window_left, window_right = window_size
    varlen = (cu_seqlens_q, None, int(max_seqlen_q), 0) if packed else None

    def build():
        _check_dtypes(q=q, k_cache=k_cache, v_cache=v_cache)
        options = _options(scale, causal, window_left, window_right, softcap, False)
        view = _views(q, {"k": "k_cache", "v": "v_cache"})
        return _capi.forward_args(view, options, q=q, k=k_cache, v=v_cache, o=o, lse=lse, block_table=block_table,
                                  seqused_k=seqused_k, varlen=varlen, num_splits=num_splits)

    tensors = {"q": q, "k": k_cache, "v": v_cache, "block_table": block_table, "seqused_k": seqused_k,
               "cu_seqlens_q": cu_seqlens_q}
    args = _cached_args("kv_cache_forward", (scale, causal, window_left, window_right, softcap,
                                             varlen and varlen[2], num_splits, bool(return_lse)), tensors, build,
                        {"o": o, "lse": lse})
    _library.check(_library.library().flashgen_forward(_library.runtime(), args.ref, _stream(q)))
    return o, lse


def kv_append(k, v, k_cache, v_cache, cache_seqlens, block_table=None, rotary_cos=None, rotary_sin=None,
              rotary_interleaved=False, q=None, q_at_consecutive_positions=True, cu_seqlens=None):
    """Writes new keys and values into a KV cache, in place (inference): row i of sequence b of k
    and v (batch, seqlen_new, heads_kv, head_dim) goes to position cache_seqlens[b] + i (int32
    (batch,)) of k_cache and v_cache, dense (batch, capacity, heads_kv, head_dim) or, with
    block_table, pages (num_pages, page_size, heads_kv, head_dim). With rotary_cos and rotary_sin
    ((positions >= capacity, rotary_dim / 2), dtype of k) the new keys are rotated at their
    positions (rotary_interleaved: pairs (2j, 2j + 1), else (j, j + rotary_dim / 2)), and q, when
    given, is returned rotated at positions cache_seqlens[b] + i (q_at_consecutive_positions) or
    cache_seqlens[b]; otherwise returns None. cu_seqlens (int32 (batch + 1,)): packed new rows,
    k, v (and q) (total, heads, head_dim), sequence b's being rows cu_seqlens[b]..cu_seqlens[b + 1]
    (a prefill's prompts in one call). On CUDA tensors the positions are read on the GPU: no
    synchronisation, CUDA-graph safe; rows whose position falls outside the cache are not written.
    """
    k, v = _readable(k), _readable(v)  # the caches are written in place: the library checks their layout
    tables = {"rotary_cos": rotary_cos, "rotary_sin": rotary_sin}
    tables = {name: _readable(t) for name, t in tables.items() if t is not None}
    _check_dtypes(k=k, v=v, k_cache=k_cache, v_cache=v_cache, **tables)
    q_rotated = None
    if q is not None:
        q = _readable(q)
        _check_dtypes(k=k, q=q)
        q_rotated = torch.empty_like(q, memory_format=torch.contiguous_format)
    tensors = {"k": k, "v": v, "k_cache": k_cache, "v_cache": v_cache, "cache_seqlens": cache_seqlens,
               "block_table": block_table, "rotary_cos": tables.get("rotary_cos"), "rotary_sin": tables.get("rotary_sin"),
               "q": q, "q_rotated": q_rotated, "cu_seqlens": cu_seqlens}

    def build():
        return _capi.kv_append_args(_views(k, like_name="k"), **tensors, rotary_interleaved=rotary_interleaved,
                                    q_at_consecutive_positions=q_at_consecutive_positions)

    args = _cached_args("kv_append", (bool(rotary_interleaved), bool(q_at_consecutive_positions)), tensors, build)
    _library.check(_library.library().flashgen_append_kv(_library.runtime(), args.ref, _stream(k)))
    return q_rotated


def attention(
    q,
    k,
    v,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    deterministic=False,
    return_lse=False,
):
    """Exact attention (FlashAttention-2's call) on (batch, seqlen, heads, head_dim) tensors.

    q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim)
    with heads_q % heads_kv == 0 (GQA/MQA). softmax_scale defaults to
    1/sqrt(head_dim); causal with seqlen_q != seqlen_k is aligned bottom-right;
    window_size (left, right), -1 unbounded; softcap 0 is off; deterministic makes
    the backward bitwise reproducible. Returns o, or (o, lse) with lse float32
    (batch, heads_q, seqlen_q). Differentiable in q, k, v (and through lse).
    torch >= 2.4: a custom operator, traceable by torch.compile(fullgraph=True);
    torch 1.13 to 2.3: a torch.autograd.Function with the same results (eager only).
    """
    options = _op_options(q, k, v, softmax_scale, causal, window_size, softcap, deterministic, return_lse)
    o, lse = _forward_call(q, k, v, options)
    return (o, lse) if return_lse else o


def varlen_attention(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    deterministic=False,
    return_lse=False,
):
    """attention of packed variable-length sequences (FlashAttention-2's varlen call).

    q: (total_q, heads_q, head_dim); k, v: (total_k, heads_kv, head_dim). cu_seqlens_q and
    cu_seqlens_k: int32 (batch + 1,) on q's device, non-decreasing: sequence b is rows
    cu_seqlens_q[b]:cu_seqlens_q[b + 1] of q and cu_seqlens_k[b]:cu_seqlens_k[b + 1] of k, v.
    max_seqlen_q, max_seqlen_k (ints >= 1) bound the lengths. Every option applies per sequence
    (causal and window aligned bottom-right to its own lengths). Returns o (total_q, heads_q,
    head_dim), or (o, lse) with lse float32 (heads_q, total_q); rows outside every sequence get
    o = 0, lse = -inf and zero gradients. Differentiable in q, k, v (and through lse).
    """
    options = _op_options(q, k, v, softmax_scale, causal, window_size, softcap, deterministic, return_lse)
    o, lse = _forward_call(q, k, v, options, (cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k)))
    return (o, lse) if return_lse else o


# torch.compiler.is_compiling: torch >= 2.3 (older torch has no custom_op to trace either).
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def _forward_call(q, k, v, options, varlen=None):
    """(o, lse) of a public forward call; options: _op_options' tuple (its last two entries are
    return_lse and prepare_backward); varlen as _run_forward takes it. A call that wants no
    gradient, is not traced (torch.compile) and has plain tensors (no FakeTensor or other subclass
    that needs dispatch) runs the operator's body directly: it skips torch.library's dispatch
    (~20 us a call on torch 2.11: forward_op 49 against _forward 26 us on the H200 machine) and
    allocates lse only when the caller wants it (lse None otherwise)."""
    body_options, return_lse, prepare_backward = options[:6], options[6], options[7]
    if not prepare_backward and not _is_compiling() and _plain(q, k, v):
        return _run_forward(q, k, v, body_options, False, varlen, with_lse=return_lse)
    if varlen is None:
        return _attention(q, k, v, *options)
    return _varlen_attention(q, k, v, *varlen, *options)


def _plain(*tensors):
    """Every tensor a torch.Tensor itself (a loop: no generator on the per-call path)."""
    for t in tensors:
        if type(t) is not torch.Tensor:
            return False
    return True


def _op_options(q, k, v, softmax_scale, causal, window_size, softcap, deterministic, return_lse):
    """The forward operators' trailing arguments, from the public calls' ones."""
    window_left, window_right = window_size
    prepare_backward = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    return (float(_scale(softmax_scale)), bool(causal), int(window_left), int(window_right), float(softcap),
            bool(deterministic), bool(return_lse), bool(prepare_backward))
