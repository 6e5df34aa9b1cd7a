"""flashgen.attention inside Hugging Face transformers models.

    import flashgen.transformers
    name = flashgen.transformers.register()   # the attention implementation "fgen"
    model = AutoModelForCausalLM.from_config(config, attn_implementation=name)

Registers an attention function (AttentionInterface) and, as the mask function,
transformers' own FlashAttention-2 one (AttentionMaskInterface): no mask is built
for unpadded batches, and causal/sliding-window masking happens inside flashgen.
flashgen's bottom-right causal alignment is what decoding with a KV cache needs.
Padded batches (a real attention_mask) and attention dropout are not supported.
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
    if attention_mask is not None:
        raise NotImplementedError(
            "flashgen attention: attention_mask is set (a padded batch?); flashgen supports causal and "
            "sliding-window masking only, expected unpadded inputs"
        )
    if dropout:
        raise NotImplementedError(f"flashgen attention: dropout is {dropout}, expected 0 (flashgen has no dropout)")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = (-1, -1)
    if sliding_window:  # transformers' window: query i sees keys i - sliding_window < j <= i
        window = (sliding_window - 1, 0 if causal else sliding_window - 1)
    output = flashgen.attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), softmax_scale=scaling,
        causal=bool(causal), window_size=window, softcap=float(softcap or 0.0),
    )
    return output, None


def register(name=NAME):
    """Registers flashgen as the attention implementation `name`; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, flash_attention_mask)
    return name
