"""FlashAttention-2's Python calls on flashgen: `from flashgen.flash_attn_interface import flash_attn_func`
in place of `from flash_attn import flash_attn_func`.

The functions take FlashAttention-2's arguments in its order and with its defaults
(flash_attn 2.6+: softcap after window_size), and return what it returns. What flashgen
does not do is refused with a clear error rather than ignored: dropout (dropout_p must be
0), ALiBi (alibi_slopes must be None) and returning the attention probabilities
(return_attn_probs must be False).

flash_attn_varlen_func takes packed variable-length sequences (cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k) and, with block_table, packed queries over a paged KV cache
(forward only, as in FlashAttention-2: sequence b's keys are its first cu_seqlens_k[b + 1] -
cu_seqlens_k[b] cache positions).

flash_attn_with_kvcache takes contiguous and paged caches (block_table, any page size) with
one length for the batch (cache_seqlens an int) or per-sequence lengths (an int32 tensor):
the new k, v are written into the cache in place (rotated by rotary_cos/sin when given) and
the split-KV kernels read the lengths and pages on the device. cache_batch_idx picks each
sequence's row of a contiguous cache (read as one page per sequence). num_splits is
FlashAttention-2's: 0 picks the split count from the GPU's SMs and the lengths, 1 does not
split, n > 1 splits the keys into at most n parts (up to 128). cache_leftpad is refused until
flashgen has it.
"""
import torch

from .torch_op import attention, kv_cache_forward, varlen_attention

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
           "flash_attn_with_kvcache"]


def _refuse(dropout_p, alibi_slopes, return_attn_probs):
    """Raises for what flashgen does not do."""
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p: is {dropout_p}, expected 0.0 (flashgen has no attention dropout)")
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: is set, expected None (flashgen has no ALiBi bias yet)")
    if return_attn_probs:
        raise ValueError("return_attn_probs: is True, expected False (flashgen never materialises the probabilities)")


def _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
               return_attn_probs):
    """The dense calls' common body: refuses what flashgen does not do, then runs flashgen.attention."""
    _refuse(dropout_p, alibi_slopes, return_attn_probs)
    return attention(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap,
                     deterministic=deterministic)


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """q: (batch, seqlen_q, heads, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim) with
    heads % heads_kv == 0. Returns out (batch, seqlen_q, heads, head_dim), like flash_attn_func."""
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                      return_attn_probs)


def flash_attn_kvpacked_func(
    q,
    kv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """q: (batch, seqlen_q, heads, head_dim); kv: (batch, seqlen_k, 2, heads_kv, head_dim)."""
    if kv.dim() != 5 or kv.size(2) != 2:
        raise ValueError(f"kv: shape is {tuple(kv.shape)}, expected (batch, seqlen_k, 2, heads_kv, head_dim)")
    return _attention(q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal, window_size, softcap,
                      alibi_slopes, deterministic, return_attn_probs)


def flash_attn_qkvpacked_func(
    qkv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """qkv: (batch, seqlen, 3, heads, head_dim)."""
    if qkv.dim() != 5 or qkv.size(2) != 3:
        raise ValueError(f"qkv: shape is {tuple(qkv.shape)}, expected (batch, seqlen, 3, heads, head_dim)")
    return _attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale, causal, window_size,
                      softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """q: (total_q, heads, head_dim); k, v: (total_k, heads_kv, head_dim) with heads % heads_kv == 0;
    cu_seqlens_q, cu_seqlens_k: int32 (batch + 1,), the sequences' row offsets; max_seqlen_q,
    max_seqlen_k: bounds on their lengths. Causal and window masks align bottom-right per sequence.
    Returns out (total_q, heads, head_dim), like flash_attn_varlen_func.

    block_table (int32 (batch, max_pages_per_seq)): k, v are a paged cache (num_pages, page_size,
    heads_kv, head_dim) and sequence b attends to its first cu_seqlens_k[b + 1] - cu_seqlens_k[b]
    positions there (computed on the device: no synchronisation). Forward only (inference)."""
    _refuse(dropout_p, alibi_slopes, return_attn_probs)
    if block_table is not None:
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            raise ValueError("block_table: is set while q, k or v requires grad, expected inference (a paged KV "
                             "cache has no backward); run it under torch.no_grad()")
        if cu_seqlens_k.dtype != torch.int32:
            raise ValueError(f"cu_seqlens_k: is {cu_seqlens_k.dtype}, expected torch.int32")
        o, _ = kv_cache_forward(q, k, v, block_table=block_table, seqused_k=torch.diff(cu_seqlens_k),
                                softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap,
                                cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q, return_lse=False)
        return o
    return varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap,
                            deterministic=deterministic)


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    block_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """q: (batch, seqlen_q, heads, head_dim). k_cache, v_cache: (batch, seqlen_cache, heads_kv,
    head_dim), or with block_table (int32 (batch, max_pages_per_seq)) pages (num_pages, page_size,
    heads_kv, head_dim) of any page_size. cache_seqlens: None (the whole cache), an int, or an
    int32 tensor (batch,) of per-sequence lengths. k, v (batch, seqlen_new, heads_kv, head_dim),
    if given, are written into the caches at positions cache_seqlens.. (in place), then q
    attends to the first cache_seqlens + seqlen_new positions of each sequence (causal aligned
    bottom-right to them). rotary_cos, rotary_sin ((seqlen_cache or more, rotary_dim / 2), dtype of
    q; rotary_dim a multiple of 16) rotate the new keys at their positions and q at positions
    cache_seqlens + i (causal or local) or cache_seqlens, pairs (2j, 2j + 1) when
    rotary_interleaved, else (j, j + rotary_dim / 2). cache_batch_idx (int32 (batch,), contiguous
    caches only): sequence b is row cache_batch_idx[b] of the caches (batch_cache, seqlen_cache, ...),
    appended to and read there; an index outside the caches is refused on the CPU and clamped to
    them on the GPU (the index is read on the device). Forward only. Returns out, or (out,
    softmax_lse) with return_softmax_lse, like flash_attn_with_kvcache."""
    import torch

    from .torch_op import kv_append, kv_cache_forward

    refused = {  # argument: (value, what flashgen does not have yet)
        "cache_leftpad": (cache_leftpad, "cache_leftpad"), "alibi_slopes": (alibi_slopes, "ALiBi bias"),
    }
    for name, (value, feature) in refused.items():
        if value is not None:
            raise ValueError(f"{name}: is set, expected None (flashgen has no {feature} in flash_attn_with_kvcache yet)")
    if (k is None) != (v is None):
        raise ValueError("k, v: one is set, expected both or neither (the new keys and values to append)")
    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("rotary_cos, rotary_sin: one is set, expected both or neither")
    if rotary_cos is not None and k is None:
        raise ValueError("rotary_cos: is set without k, v, expected the new keys and values (as in flash_attn, the "
                         "rotary embedding applies to the appended keys and to q)")
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"k_cache, v_cache: shapes are {tuple(k_cache.shape)} and {tuple(v_cache.shape)}, expected "
                         "one (batch, seqlen_cache, heads_kv, head_dim) or, paged, (num_pages, page_size, heads_kv, "
                         "head_dim)")
    if cache_batch_idx is not None:
        # Row cache_batch_idx[b] of a contiguous cache is sequence b's one page of seqlen_cache rows.
        if block_table is not None:
            raise ValueError("cache_batch_idx: is set with block_table, expected one of them (a paged cache names "
                             "each sequence's pages itself)")
        if (not isinstance(cache_batch_idx, torch.Tensor) or cache_batch_idx.dtype != torch.int32
                or cache_batch_idx.shape != (q.size(0),)):
            what = (f"{cache_batch_idx.dtype} of shape {tuple(cache_batch_idx.shape)}"
                    if isinstance(cache_batch_idx, torch.Tensor) else f"a {type(cache_batch_idx).__name__}")
            raise ValueError(f"cache_batch_idx: is {what}, expected int32 ({q.size(0)},)")
        if cache_batch_idx.device.type == "cpu":  # on the GPU the kernels read (and clamp) it on the device
            outside = ((cache_batch_idx < 0) | (cache_batch_idx >= k_cache.size(0))).nonzero()
            if len(outside):
                b = int(outside[0])
                raise ValueError(f"cache_batch_idx: element {b} is {int(cache_batch_idx[b])}, expected a row of k_cache "
                                 f"in 0..{k_cache.size(0) - 1}")
        block_table = cache_batch_idx.reshape(-1, 1).contiguous()
    paged = block_table is not None
    if paged and (block_table.dim() != 2 or block_table.dtype != torch.int32):
        raise ValueError(f"block_table: is {block_table.dtype} of shape {tuple(block_table.shape)}, expected int32 "
                         "(batch, max_pages_per_seq)")
    page_size = k_cache.size(1)
    capacity = block_table.size(1) * page_size if paged else k_cache.size(1)
    batch = q.size(0)
    new = 0 if k is None else k.size(1)
    if cache_seqlens is None and k is not None:
        raise ValueError("cache_seqlens: is None with k, v given, expected the position(s) to append them at")
    per_sequence = isinstance(cache_seqlens, torch.Tensor)
    if per_sequence:
        if cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (batch,):
            raise ValueError(f"cache_seqlens: is {cache_seqlens.dtype} of shape {tuple(cache_seqlens.shape)}, "
                             f"expected int32 ({batch},) or an int")
        length = None
    elif cache_seqlens is None:
        length = capacity
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        length = cache_seqlens
        if not 0 <= length <= capacity - new:
            raise ValueError(f"cache_seqlens: is {length}, expected 0..{capacity - new} (the cache holds {capacity} "
                             f"positions and {new} new ones are appended)")
    else:
        raise ValueError("cache_seqlens: is a " + type(cache_seqlens).__name__ + ", expected None, an int or an "
                         "int32 tensor (batch,)")
    # The dense cache with one length: views of it, through attention() (a forced split count
    # needs the split-KV call over the cache instead).
    dense_views = not paged and not per_sequence and num_splits == 0
    # Where each sequence's new rows go (and, with per-sequence lengths or pages, its length), on q's device.
    start = None
    if k is not None or not dense_views:
        start = cache_seqlens if per_sequence else torch.full((batch,), length, dtype=torch.int32, device=q.device)
    # The new rows go in by the append kernel (the keys, and q, rotated when rotary_cos is given:
    # q at positions cache_seqlens + i under a causal or local mask, all at cache_seqlens otherwise,
    # as flash_attn does). Positions are read on the device; rows past the cache are not written.
    if k is not None:
        if k.dim() != 4 or k.shape != v.shape or k.shape[0] != batch or k.shape[2:] != k_cache.shape[2:]:
            raise ValueError(f"k, v: shapes are {tuple(k.shape)} and {tuple(v.shape)}, expected ({batch}, seqlen_new, "
                             f"{k_cache.size(2)}, {k_cache.size(3)}) like the caches")
        rotated = kv_append(k, v, k_cache, v_cache, start, block_table=block_table, rotary_cos=rotary_cos,
                            rotary_sin=rotary_sin, rotary_interleaved=rotary_interleaved,
                            q=q if rotary_cos is not None else None,
                            q_at_consecutive_positions=causal or tuple(window_size) != (-1, -1))
        if rotated is not None:
            q = rotated
    if dense_views:
        end = length + new
        if end == 0:
            raise ValueError("cache_seqlens: 0 with nothing appended, expected at least one key to attend to")
        return attention(q, k_cache[:, :end], v_cache[:, :end], softmax_scale=softmax_scale, causal=causal,
                         window_size=window_size, softcap=softcap, return_lse=return_softmax_lse)
    # Per-sequence lengths or a paged cache: the kernels read the lengths (and the pages) on the device.
    seqused = (start + new).to(torch.int32) if (per_sequence or new or length != capacity) else None
    o, lse = kv_cache_forward(q, k_cache, v_cache, block_table=block_table, seqused_k=seqused,
                              softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap,
                              num_splits=num_splits, return_lse=return_softmax_lse)
    return (o, lse) if return_softmax_lse else o
