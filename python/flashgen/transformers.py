"""flashgen.attention inside Hugging Face transformers models.

    import flashgen.transformers
    name = flashgen.transformers.register()   # the attention implementation "fgen"
    model = AutoModelForCausalLM.from_config(config, attn_implementation=name)

Registers an attention function (AttentionInterface) and, as the mask function,
transformers' own FlashAttention-2 one (AttentionMaskInterface): no mask is built
for unpadded batches, and causal/sliding-window masking happens inside flashgen.
flashgen's bottom-right causal alignment is what decoding with a KV cache needs.
A padded batch gets that mask function's 2-D padding mask and runs, as with
FlashAttention-2, through packed sequences: its tokens are unpadded into varlen rows
and the output padded back (0 at padding). Attention dropout is not supported.
"""
import flashgen

# Not "flashgen": transformers treats any implementation name containing "flash" as FlashAttention
# and tries to import its kernels.
NAME = "fgen"


def attention_forward(
    module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None, softcap=None,
    is_causal=None, **kwargs,
):
    """transformers' attention-function signature: query/key/value (batch, heads, seqlen, head_dim);
    returns (output (batch, seqlen, heads, head_dim), None)."""
    if attention_mask is not None and attention_mask.dim() != 2:
        raise NotImplementedError(
            f"flashgen attention: attention_mask has {attention_mask.dim()} dimensions, expected None or a 2-D "
            "padding mask (batch, kv_len) (flashgen does causal and sliding-window masking itself)"
        )
    if dropout:
        raise NotImplementedError(f"flashgen attention: dropout is {dropout}, expected 0 (flashgen has no dropout)")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = (-1, -1)
    if sliding_window:  # transformers' window: query i sees keys i - sliding_window < j <= i
        window = (sliding_window - 1, 0 if causal else sliding_window - 1)
    options = {"softmax_scale": scaling, "causal": bool(causal), "window_size": window, "softcap": float(softcap or 0.0)}
    query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    if attention_mask is not None:
        return padded_attention(query, key, value, attention_mask, **options), None
    return flashgen.attention(query, key, value, **options), None


def padded_attention(query, key, value, mask, **options):
    """flashgen.attention of a padded batch through packed sequences, as FlashAttention-2 runs one.

    query (batch, q_len, heads, head_dim), key and value (batch, kv_len, heads_kv, head_dim); mask
    (batch, n) of 1/True per real token: its columns are the keys (key and value are cut to n, a static
    cache may be longer), its last q_len columns the queries (left padding where q_len < n, as when
    decoding). Each sequence's real tokens, in order, are one packed sequence, with causal and window
    aligned bottom-right to its own lengths. Returns (batch, q_len, heads, head_dim), 0 at padding.
    """
    import torch

    mask = mask.bool()
    key, value = key[:, :mask.size(1)], value[:, :mask.size(1)]
    batch, q_len = query.shape[:2]
    out = query.new_zeros(query.shape).flatten(0, 1)

    def unpad(x, m):  # the rows m keeps, their indices in x.flatten(0, 1), and the sequences' offsets
        lengths = m.sum(dim=1, dtype=torch.int32)
        rows = m.flatten().nonzero().flatten()
        cu = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        return x.flatten(0, 1).index_select(0, rows), rows, cu, max(1, int(lengths.max()))

    q, rows, cu_q, max_q = unpad(query, mask[:, -q_len:])
    if rows.numel() == 0:  # every query is padding
        return out.view(query.shape)
    k, key_rows, cu_k, max_k = unpad(key, mask)
    v = value.flatten(0, 1).index_select(0, key_rows)
    o = flashgen.varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, **options)
    return out.index_copy(0, rows, o).view(batch, q_len, *query.shape[2:])


def register(name=NAME):
    """Registers flashgen as the attention implementation `name`; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, flash_attention_mask)
    return name
