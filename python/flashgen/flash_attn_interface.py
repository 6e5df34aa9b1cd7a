"""FlashAttention-2's Python calls on flashgen: `from flashgen.flash_attn_interface import flash_attn_func`
in place of `from flash_attn import flash_attn_func`.

The functions take FlashAttention-2's arguments in its order and with its defaults
(flash_attn 2.6+: softcap after window_size), and return what it returns. What flashgen
does not do is refused with a clear error rather than ignored: dropout (dropout_p must be
0), ALiBi (alibi_slopes must be None) and returning the attention probabilities
(return_attn_probs must be False).
"""
from .torch_op import attention

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func"]


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
