"""FlashAttention-2's Python calls on flashgen: `from flashgen.flash_attn_interface import flash_attn_func`
in place of `from flash_attn import flash_attn_func`.

The functions take FlashAttention-2's arguments in its order and with its defaults
(flash_attn 2.6+: softcap after window_size), and return what it returns. What flashgen
does not do is refused with a clear error rather than ignored: dropout (dropout_p must be
0), ALiBi (alibi_slopes must be None) and returning the attention probabilities
(return_attn_probs must be False).

flash_attn_with_kvcache runs on a contiguous cache with one length for the whole batch
(cache_seqlens None or an int): the new k, v are written into the cache in place and the
attention reads its first cache_seqlens + seqlen_new positions through views, so a decode
step (seqlen_q 1..16) takes flashgen's split-KV kernels. Per-sequence lengths (a tensor),
paged caches (block_table), rotary embedding, cache_batch_idx, cache_leftpad and a forced
num_splits are refused until flashgen has them.
"""
from .torch_op import attention

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_with_kvcache"]


def _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
               return_attn_probs):
    """The calls' common body: refuses what flashgen does not do, then runs flashgen.attention."""
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p: is {dropout_p}, expected 0.0 (flashgen has no attention dropout)")
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: is set, expected None (flashgen has no ALiBi bias yet)")
    if return_attn_probs:
        raise ValueError("return_attn_probs: is True, expected False (flashgen never materialises the probabilities)")
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
    """q: (batch, seqlen_q, heads, head_dim); k_cache, v_cache: (batch, seqlen_cache, heads_kv,
    head_dim). k, v (batch, seqlen_new, heads_kv, head_dim), if given, are written into the
    caches at positions cache_seqlens.. (in place), then q attends to the first
    cache_seqlens + seqlen_new positions (causal aligned bottom-right to them). cache_seqlens:
    None (the whole cache) or an int. Returns out, or (out, softmax_lse) with
    return_softmax_lse, like flash_attn_with_kvcache."""
    refused = {  # argument: (value, what flashgen does not have yet)
        "rotary_cos": (rotary_cos, "rotary embedding"), "rotary_sin": (rotary_sin, "rotary embedding"),
        "cache_batch_idx": (cache_batch_idx, "cache_batch_idx"), "cache_leftpad": (cache_leftpad, "cache_leftpad"),
        "block_table": (block_table, "paged KV cache"), "alibi_slopes": (alibi_slopes, "ALiBi bias"),
    }
    for name, (value, feature) in refused.items():
        if value is not None:
            raise ValueError(f"{name}: is set, expected None (flashgen has no {feature} in flash_attn_with_kvcache yet)")
    if num_splits != 0:
        raise ValueError(f"num_splits: is {num_splits}, expected 0 (flashgen picks the split count from the GPU's SMs "
                         "and the lengths)")
    if (k is None) != (v is None):
        raise ValueError("k, v: one is set, expected both or neither (the new keys and values to append)")
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"k_cache, v_cache: shapes are {tuple(k_cache.shape)} and {tuple(v_cache.shape)}, expected "
                         "one (batch, seqlen_cache, heads_kv, head_dim)")
    capacity = k_cache.size(1)
    if cache_seqlens is None and k is not None:
        raise ValueError("cache_seqlens: is None with k, v given, expected the int position to append them at")
    if cache_seqlens is None:
        length = capacity
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        length = cache_seqlens
    else:
        raise ValueError("cache_seqlens: is a " + type(cache_seqlens).__name__ + ", expected None or an int (one "
                         "length for the batch; per-sequence lengths are not supported yet)")
    new = 0 if k is None else k.size(1)
    if not 0 <= length <= capacity - new:
        raise ValueError(f"cache_seqlens: is {length}, expected 0..{capacity - new} (the cache holds {capacity} "
                         f"positions and {new} new ones are appended)")
    if k is not None:
        if k.dim() != 4 or k.shape != v.shape or k.shape[0] != k_cache.shape[0] or k.shape[2:] != k_cache.shape[2:]:
            raise ValueError(f"k, v: shapes are {tuple(k.shape)} and {tuple(v.shape)}, expected (batch, seqlen_new, "
                             f"{k_cache.size(2)}, {k_cache.size(3)}) like the caches")
        k_cache[:, length:length + new].copy_(k)
        v_cache[:, length:length + new].copy_(v)
    end = length + new
    if end == 0:
        raise ValueError("cache_seqlens: 0 with nothing appended, expected at least one key to attend to")
    return attention(q, k_cache[:, :end], v_cache[:, :end], softmax_scale=softmax_scale, causal=causal,
                     window_size=window_size, softcap=softcap, return_lse=return_softmax_lse)
