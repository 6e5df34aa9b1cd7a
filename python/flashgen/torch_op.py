"""flashgen.attention for PyTorch: custom operators with fake (shape) and autograd rules.

With torch >= 2.4, two operators, flashgen::forward and flashgen::backward, are
registered through torch.library.custom_op so torch.compile(fullgraph=True) traces
them as opaque nodes. Older torch (>= 1.13) has no custom_op: there attention runs
through AttentionFunction, a torch.autograd.Function with the same forward and the
same gradients (eager mode only). CPU tensors run on the CPU backend; CUDA tensors
run generated kernels on torch.cuda.current_stream(), with no synchronisation.
"""
import ctypes
import math

import torch

from . import _capi, _library

_DTYPES = {torch.float32: _capi.DType.F32, torch.float16: _capi.DType.F16, torch.bfloat16: _capi.DType.BF16}


def _readable(t):
    """`t`, or a copy when its last dimension is not contiguous (flashgen requires stride 1 there)."""
    return t if t.dim() == 0 or t.size(-1) <= 1 or t.stride(-1) == 1 else t.contiguous()


def _dtype_code(name, t):
    code = _DTYPES.get(t.dtype)
    if code is None:
        raise TypeError(f"{name}: dtype is {t.dtype}, expected torch.float16 or torch.bfloat16 (or torch.float32 on the CPU)")
    return code


def _view(name, t):
    """A flashgen_tensor borrowing `t`'s memory (the caller keeps `t` alive)."""
    code = _dtype_code(name, t)
    strides = list(t.stride())
    if t.dim() and t.size(-1) == 1:
        strides[-1] = 1  # a size-1 dimension's stride is irrelevant; flashgen wants 1 here
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name}: device is {t.device}, expected a CPU or CUDA tensor")
    device = _capi.CPU if t.device.type == "cpu" else t.device.index
    return _capi.tensor(name, t.data_ptr(), code, device, t.shape, strides)


def _index_view(name, t, like):
    """A flashgen_tensor borrowing int32 index tensor `t` (block_table, seqused_k) on `like`'s device."""
    if t.dtype != torch.int32:
        raise TypeError(f"{name}: dtype is {t.dtype}, expected torch.int32")
    if t.device != like.device:
        raise ValueError(f"{name}: device is {t.device}, expected {like.device} like q")
    strides = [s if n > 1 else 1 for n, s in zip(t.shape, t.stride())]  # size-1 dims: any stride is fine
    device = _capi.CPU if t.device.type == "cpu" else t.device.index
    return _capi.tensor(name, t.data_ptr(), _capi.DType.I32, device, t.shape, strides)


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


def _outputs(q):
    """Fresh o (like q) and lse (float32 (batch, heads_q, seqlen_q)) for a forward of q."""
    return torch.empty(q.shape, dtype=q.dtype, device=q.device), torch.empty(_lse_shape(q), dtype=torch.float32,
                                                                              device=q.device)


def _stream(t):
    """The stream flashgen launches on: PyTorch's current stream of t's device (None on the CPU)."""
    if t.device.type != "cuda":
        return None
    return ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


def _options(softmax_scale, causal, window_left, window_right, softcap, deterministic):
    # softmax_scale 0 is the operators' "default" (1/sqrt(head_dim)); NaN would not survive graph capture.
    scale = None if softmax_scale == 0.0 else softmax_scale
    return _capi.options(scale, causal, (window_left, window_right), softcap, deterministic)


def _lse_shape(q):
    return (q.size(0), q.size(2), q.size(1)) if q.dim() == 4 else (1, 1, 1)


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
    q, k, v = _readable(q), _readable(k), _readable(v)
    _check_dtypes(q=q, k=k, v=v)
    o, lse = _outputs(q)
    options = _options(softmax_scale, causal, window_left, window_right, softcap, deterministic)
    args = _capi.forward_args(_view, options, q=q, k=k, v=v, o=o, lse=lse)
    lib = _library.library()
    if prepare_backward and q.is_cuda:
        _prepare_once(lib, args, (q.shape, k.shape, q.dtype, q.device, softmax_scale, causal, window_left,
                                  window_right, softcap, deterministic))
    _library.check(lib.flashgen_forward(_library.runtime(), ctypes.byref(args), _stream(q)))
    return o, lse


# The variants whose kernels flashgen_prepare was asked for (once each: after that the
# runtime finds them in memory, and skipping the call keeps the per-call cost down).
_prepared = set()


def _prepare_once(lib, args, variant):
    """Starts the compiles of the forward's and the backward's kernels of `variant` (hashable) once."""
    if variant not in _prepared:
        _library.check(lib.flashgen_prepare(_library.runtime(), ctypes.byref(args), _capi.PASS_BOTH))
        _prepared.add(variant)


def _forward_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic, return_lse,
                  prepare_backward):
    o = q.new_empty(q.shape)
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    return o, lse


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
    dout, q, k, v, o = (_readable(t) for t in (dout, q, k, v, o))
    lse = lse.contiguous()
    _check_dtypes(q=q, k=k, v=v, o=o, dout=dout)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    options = _options(softmax_scale, causal, window_left, window_right, softcap, deterministic)
    args = _capi.backward_args(_view, options, q=q, k=k, v=v, o=o, lse=lse, dout=dout, dq=dq, dk=dk, dv=dv)
    lib = _library.library()
    runtime = _library.runtime()
    workspace = _workspace(lib, runtime, args, q.device)
    _library.check(lib.flashgen_backward(runtime, ctypes.byref(args), _stream(q)))
    del workspace  # freed in stream order by PyTorch's caching allocator
    return dq, dk, dv


def _workspace(lib, runtime, args, device):
    """Backward's device workspace from PyTorch's allocator (not flashgen's own stream-ordered pool)."""
    if device.type != "cuda":
        return None
    size = ctypes.c_size_t(0)
    _library.check(lib.flashgen_backward_workspace_bytes(runtime, ctypes.byref(args), ctypes.byref(size)))
    if size.value == 0:
        return None
    buffer = torch.empty(size.value, dtype=torch.uint8, device=device)
    args.workspace = buffer.data_ptr()
    args.workspace_bytes = size.value
    return buffer


def _backward_fake(dout, q, k, v, o, lse, softmax_scale, causal, window_left, window_right, softcap, deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic, return_lse, _ = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.options = (softmax_scale, causal, window_left, window_right, softcap, deterministic)
    ctx.return_lse = return_lse
    # An output the loss does not use gets None, not a materialised zero tensor: an unused
    # lse must not cost a second backward pass (and its q-sized temporaries).
    ctx.set_materialize_grads(False)


def _gradients(ctx, dout, dlse):
    """The autograd formula of both registrations: gradients of (o, lse) -> gradients of the inputs."""
    q, k, v, o, lse = ctx.saved_tensors
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
        dq, dk, dv = backward_op(dout, q, k, v, o, lse, *ctx.options)
    else:
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if ctx.return_lse and dlse is not None:
        dq_lse, dk_lse = _lse_gradient(q, k, v, lse, dlse, ctx.options)
        dq, dk = dq + dq_lse, dk + dk_lse
    return dq, dk, dv, None, None, None, None, None, None, None, None


def _lse_gradient(q, k, v, lse, dlse, options):
    """dq, dk of sum(dlse * lse), through flashgen's backward.

    d lse_i / d s_ij = P_ij, so this is the backward with dS = P * dlse. The backward
    computes dS = P * (dP - D) with dP = dout v^T and D = rowsum(dout * o); with
    v = ones, dout = (dlse, 0, ..., 0) per row and o = 0 that is dP = dlse, D = 0.
    """
    ones = torch.ones_like(v)
    zeros = torch.zeros_like(q)
    dout = torch.zeros_like(q)
    dout[..., 0] = dlse.transpose(1, 2).to(q.dtype)
    dq, dk, _ = backward_op(dout, q, k, ones, zeros, lse, *options)
    return dq, dk


class AttentionFunction(torch.autograd.Function):
    """flashgen's forward and gradients as a torch.autograd.Function: what flashgen.attention
    uses where torch has no custom_op (torch < 2.4). torch.compile does not trace into it."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic, return_lse,
                prepare_backward):
        inputs = (q, k, v, softmax_scale, causal, window_left, window_right, softcap, deterministic, return_lse,
                  prepare_backward)
        output = _forward(*inputs)
        _setup_context(ctx, inputs, output)
        return output

    @staticmethod
    def backward(ctx, dout, dlse):
        return _gradients(ctx, dout, dlse)


if HAS_CUSTOM_OP:
    forward_op = torch.library.custom_op("flashgen::forward", mutates_args=())(_forward)
    backward_op = torch.library.custom_op("flashgen::backward", mutates_args=())(_backward)
    forward_op.register_fake(_forward_fake)
    backward_op.register_fake(_backward_fake)
    forward_op.register_autograd(_gradients, setup_context=_setup_context)
    _attention = forward_op
else:
    forward_op, backward_op = _forward, _backward  # plain functions: eager calls into the library
    _attention = AttentionFunction.apply


def kv_cache_forward(q, k_cache, v_cache, block_table=None, seqused_k=None, softmax_scale=None, causal=False,
                     window_size=(-1, -1), softcap=0.0):
    """Attention of q over a KV cache, forward only (inference): returns (o, lse).

    q: (batch, seqlen_q, heads_q, head_dim). Dense cache: k_cache, v_cache (batch, seqlen_k,
    heads_kv, head_dim). Paged cache: k_cache, v_cache (num_pages, page_size, heads_kv, head_dim),
    any page_size >= 1, and block_table int32 (batch, max_pages_per_seq) naming each sequence's
    pages in order. seqused_k: int32 (batch,), sequence b attends to its first seqused_k[b] keys
    (default: all), with causal and window aligned bottom-right to that count. Read on the GPU:
    no synchronisation, CUDA-graph safe.
    """
    scale = _scale(softmax_scale)
    q, k_cache, v_cache = _readable(q), _readable(k_cache), _readable(v_cache)
    _check_dtypes(q=q, k_cache=k_cache, v_cache=v_cache)
    o, lse = _outputs(q)
    window_left, window_right = window_size
    options = _options(scale, causal, window_left, window_right, softcap, False)
    names = {"k": "k_cache", "v": "v_cache"}

    def view(name, t):
        if name in ("block_table", "seqused_k"):
            return _index_view(name, t, q)
        return _view(names.get(name, name), t)

    args = _capi.forward_args(view, options, q=q, k=k_cache, v=v_cache, o=o, lse=lse, block_table=block_table,
                              seqused_k=seqused_k)
    _library.check(_library.library().flashgen_forward(_library.runtime(), ctypes.byref(args), _stream(q)))
    return o, lse


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
    softmax_scale = _scale(softmax_scale)
    window_left, window_right = window_size
    prepare_backward = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    o, lse = _attention(
        q, k, v, float(softmax_scale), bool(causal), int(window_left), int(window_right), float(softcap),
        bool(deterministic), bool(return_lse), bool(prepare_backward),
    )
    return (o, lse) if return_lse else o
