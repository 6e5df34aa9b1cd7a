"""Standard attention in numpy, independent of flashgen: materialises S and P.

`standard_attention` computes in `compute` precision (float64 for the oracle);
with `round_to` it rounds P, dS and the outputs to that dtype, which is the
"standard attention in the input precision" of FlashAttention's error rule.
"""
import numpy as np


def allowed_keys(seqlen_q, seqlen_k, causal, window_size):
    """Boolean (seqlen_q, seqlen_k) mask; windows and causal are aligned bottom-right."""
    left, right = window_size
    if causal:
        right = 0
    i = np.arange(seqlen_q)[:, None] + (seqlen_k - seqlen_q)  # the diagonal key of each query
    j = np.arange(seqlen_k)[None, :]
    mask = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if left >= 0:
        mask &= j >= i - left
    if right >= 0:
        mask &= j <= i + right
    return mask


def standard_attention(
    q, k, v, dout=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
    compute=np.float64, round_to=None,
):
    """Returns dict o, lse (and dq, dk, dv when dout is given), in `compute` precision.

    Layout: q (b, sq, hq, d), k/v (b, sk, hkv, d); lse (b, hq, sq). Rows without keys
    give o = 0, lse = -inf and zero gradients.
    """
    def rnd(x):
        return x if round_to is None else x.astype(round_to).astype(compute)

    batch, seqlen_q, heads_q, head_dim = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    group = heads_q // heads_kv
    scale = 1.0 / np.sqrt(head_dim) if softmax_scale is None else softmax_scale
    # (b, h, n, d), kv heads repeated so query head h reads kv head h // group.
    qh = q.astype(compute).transpose(0, 2, 1, 3)
    kh = np.repeat(k.astype(compute), group, axis=2).transpose(0, 2, 1, 3)
    vh = np.repeat(v.astype(compute), group, axis=2).transpose(0, 2, 1, 3)

    raw = np.einsum("bhid,bhjd->bhij", qh, kh) * compute(scale)
    scores = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    mask = allowed_keys(seqlen_q, seqlen_k, causal, window_size)
    scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(row_max)
    row_max = np.where(empty, 0, row_max)
    exp = np.exp(scores - row_max)
    row_sum = exp.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = np.where(empty, -np.inf, row_max + np.log(np.where(empty, 1, row_sum)))
    p = np.where(empty, 0, exp / np.where(empty, 1, row_sum))
    o = np.einsum("bhij,bhjd->bhid", rnd(p), vh)
    out = {"o": rnd(o.transpose(0, 2, 1, 3)), "lse": lse[..., 0].astype(compute)}
    if dout is None:
        return out

    do = dout.astype(compute).transpose(0, 2, 1, 3)
    dv = np.einsum("bhij,bhid->bhjd", rnd(p), do)
    dp = np.einsum("bhid,bhjd->bhij", do, vh)
    delta = (do * rnd(o)).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta)
    if softcap > 0:
        ds = ds * (1 - np.tanh(raw / softcap) ** 2)
    ds = rnd(ds)
    dq = np.einsum("bhij,bhjd->bhid", ds, kh) * compute(scale)
    dk = np.einsum("bhij,bhid->bhjd", ds, qh) * compute(scale)

    def per_kv_head(g):  # (b, hq, sk, d) -> (b, sk, hkv, d), summed over each group
        g = g.transpose(0, 2, 1, 3)
        return g.reshape(batch, seqlen_k, heads_kv, group, head_dim).sum(axis=3)

    out.update(dq=rnd(dq.transpose(0, 2, 1, 3)), dk=rnd(per_kv_head(dk)), dv=rnd(per_kv_head(dv)))
    return out
