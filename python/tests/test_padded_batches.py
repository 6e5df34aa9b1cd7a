"""flashgen.transformers on padded batches: a 2-D padding mask (transformers' FlashAttention-2 mask
function passes one for any batch with padding) runs through packed sequences. Checked on the CPU
against float64 standard attention over the dense batch with that mask, outputs and gradients, the
way transformers calls attention_forward (query/key/value (batch, heads, seqlen, head_dim)); needs
torch, not transformers.
"""
import types
import unittest

import support
from reference import allowed_keys

try:
    import torch
except ImportError:
    torch = None
    print("flashgen-test: skipping: torch is not installed")

if torch is not None:
    from flashgen import transformers as fg_transformers


def padding_mask(lengths, columns, left):
    """(batch, columns) of 1 at each sequence's tokens, 0 at its padding (on the left or the right)."""
    mask = torch.zeros(len(lengths), columns, dtype=torch.int64)
    for b, n in enumerate(lengths):
        if left:
            mask[b, columns - n:] = 1
        else:
            mask[b, :n] = 1
    return mask


def masked_attention(query, key, value, mask, causal, window_size, softcap):
    """Standard attention of transformers' layout over the dense batch: query position i (the last q_len
    of the mask's columns) sees key j where the mask keeps j and causal/window (bottom-right) allow it.
    Padded query rows see every key (finite, never compared) and give 0."""
    batch, heads, q_len, head_dim = query.shape
    kv_len = mask.size(1)
    group = heads // key.size(1)
    key, value = key[:, :, :kv_len].repeat_interleave(group, 1), value[:, :, :kv_len].repeat_interleave(group, 1)
    scores = torch.einsum("bhid,bhjd->bhij", query, key) / head_dim ** 0.5
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    keep = mask.bool()
    allowed = torch.from_numpy(allowed_keys(q_len, kv_len, causal, window_size))[None] & keep[:, None, :]
    real_query = keep[:, -q_len:]
    allowed = allowed | ~real_query[:, :, None]
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    out = torch.einsum("bhij,bhjd->bihd", torch.softmax(scores, dim=-1), value)
    return torch.where(real_query[:, :, None, None], out, torch.zeros_like(out))


@unittest.skipIf(torch is None, "torch is not installed")
class PaddedBatchTest(support.SeededTestCase):
    def setUp(self):
        super().setUp()
        self.generator = torch.Generator().manual_seed(self.seed)

    def randn(self, *shape):
        return torch.randn(*shape, generator=self.generator, dtype=torch.float64).float()

    def check(self, name, lengths, q_len, kv_len, left, causal=True, sliding_window=None, softcap=None, cache=0):
        """cache: key/value rows past the mask (a static cache longer than the tokens seen)."""
        batch, heads, heads_kv, head_dim = len(lengths), 4, 2, 16
        mask = padding_mask(lengths, kv_len, left)
        query = self.randn(batch, heads, q_len, head_dim)
        key, value = (self.randn(batch, heads_kv, kv_len + cache, head_dim) for _ in range(2))
        dout = self.randn(batch, q_len, heads, head_dim)
        module = types.SimpleNamespace(is_causal=causal)
        window = (-1, -1) if not sliding_window else (sliding_window - 1, 0 if causal else sliding_window - 1)

        results = []
        for run in ("flashgen", "reference"):
            dtype = torch.float32 if run == "flashgen" else torch.float64
            inputs = [t.detach().to(dtype).requires_grad_() for t in (query, key, value)]
            if run == "flashgen":
                out, _ = fg_transformers.attention_forward(module, *inputs, mask, is_causal=causal,
                                                           sliding_window=sliding_window, softcap=softcap)
            else:
                out = masked_attention(*inputs, mask, causal, window, softcap or 0.0)
            (out * dout.to(dtype)).sum().backward()
            results.append([out.detach()] + [t.grad for t in inputs])
        real = mask.bool()[:, -q_len:]
        got_out = results[0][0]
        self.assertTrue(torch.equal(got_out[~real], torch.zeros_like(got_out[~real])), f"{name}: padding rows")
        for what, got, want in zip(("out", "dquery", "dkey", "dvalue"), *results):
            error = (got.double() - want).abs().max().item()
            self.assertLess(error, 2e-5 * max(1.0, want.abs().max().item()), f"{name} {what} {self.where()}")

    def test_right_padding(self):
        self.check("right", [5, 9, 1], 9, 9, left=False)

    def test_left_padding(self):
        self.check("left", [5, 9, 1], 9, 9, left=True)

    def test_left_padding_bidirectional_softcap(self):
        self.check("left bidirectional", [7, 2, 9], 9, 9, left=True, causal=False, softcap=4.0)

    def test_sliding_window(self):
        self.check("window", [12, 4, 8], 12, 12, left=True, sliding_window=3)

    def test_decoding_over_a_left_padded_cache(self):
        self.check("decode", [9, 4, 2], 2, 9, left=True)
        self.check("decode one token", [9, 4, 1], 1, 9, left=True, sliding_window=4)

    def test_static_cache_longer_than_the_mask(self):
        self.check("static cache", [6, 3], 2, 6, left=True, cache=5)

    def test_other_masks_are_refused(self):
        q = k = v = self.randn(1, 2, 4, 16)
        module = types.SimpleNamespace(is_causal=True)
        with self.assertRaisesRegex(NotImplementedError, "attention_mask has 4 dimensions, expected None or a 2-D"):
            fg_transformers.attention_forward(module, q, k, v, torch.ones(1, 1, 4, 4, dtype=torch.bool))


if __name__ == "__main__":
    unittest.main()
