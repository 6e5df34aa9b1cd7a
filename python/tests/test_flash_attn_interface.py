"""flashgen.flash_attn_interface against FlashAttention-2's documented calls.

Signatures: the parameter names, order and defaults of flash_attn 2.6+'s flash_attn_func,
flash_attn_kvpacked_func and flash_attn_qkvpacked_func (its docstrings), so that code written
for flash_attn runs unchanged. Results: against standard attention in float64 (test_torch's
reference), forward and gradients, on the CPU backend (the CUDA tensors too where a GPU is).
"""
import inspect
import math
import unittest

try:
    import torch
except ImportError:
    torch = None
    print("flashgen-test: skipping: torch is not installed")

if torch is not None:
    from flashgen import flash_attn_interface as fai
    from flashgen.torch_op import kv_cache_forward
    from test_torch import standard_attention

# flash_attn 2.6+ (flash_attn_interface.py): names, order, defaults.
FA2_TAIL = [
    ("dropout_p", 0.0),
    ("softmax_scale", None),
    ("causal", False),
    ("window_size", (-1, -1)),
    ("softcap", 0.0),
    ("alibi_slopes", None),
    ("deterministic", False),
    ("return_attn_probs", False),
]
# flash_attn 2.6+'s flash_attn_with_kvcache: names, order, defaults.
FA2_KVCACHE = [
    ("q", inspect.Parameter.empty), ("k_cache", inspect.Parameter.empty), ("v_cache", inspect.Parameter.empty),
    ("k", None), ("v", None), ("rotary_cos", None), ("rotary_sin", None), ("cache_seqlens", None),
    ("cache_batch_idx", None), ("cache_leftpad", None), ("block_table", None), ("softmax_scale", None),
    ("causal", False), ("window_size", (-1, -1)), ("softcap", 0.0), ("rotary_interleaved", True),
    ("alibi_slopes", None), ("num_splits", 0), ("return_softmax_lse", False),
]
FA2_SIGNATURES = {
    "flash_attn_func": ["q", "k", "v"],
    "flash_attn_kvpacked_func": ["q", "kv"],
    "flash_attn_qkvpacked_func": ["qkv"],
}


def rotate(x, cos, sin, interleaved):
    """flash_attn's apply_rotary_emb on x (seqlen, heads, head_dim) with cos, sin (seqlen, rotary_dim / 2)."""
    half = cos.shape[-1]
    out = x.clone()
    if interleaved:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = a * cos[:, None] - b * sin[:, None]
        out[..., 1:2 * half:2] = a * sin[:, None] + b * cos[:, None]
    else:
        a, b = x[..., :half], x[..., half:2 * half]
        out[..., :half] = a * cos[:, None] - b * sin[:, None]
        out[..., half:2 * half] = a * sin[:, None] + b * cos[:, None]
    return out


@unittest.skipIf(torch is None, "torch is not installed")
class FlashAttnInterfaceTest(unittest.TestCase):
    def setUp(self):
        self.gen = torch.Generator().manual_seed(torch.seed() % 2**31)
        self.devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    def randn(self, *shape, device="cpu", dtype=None):  # no torch default here: the module imports without torch
        return torch.randn(*shape, generator=self.gen).to(device=device, dtype=dtype or torch.float32)

    def test_signatures_are_flash_attn_2s(self):
        for name, positional in FA2_SIGNATURES.items():
            params = list(inspect.signature(getattr(fai, name)).parameters.values())
            self.assertEqual([p.name for p in params], positional + [n for n, _ in FA2_TAIL], name)
            for p in params[: len(positional)]:
                self.assertIs(p.default, inspect.Parameter.empty, f"{name}: {p.name}")
            for p, (_, default) in zip(params[len(positional):], FA2_TAIL):
                self.assertEqual(p.default, default, f"{name}: {p.name}")

    def test_kvcache_signature_is_flash_attn_2s(self):
        params = list(inspect.signature(fai.flash_attn_with_kvcache).parameters.values())
        self.assertEqual([(p.name, p.default) for p in params], FA2_KVCACHE)

    def test_kvcache_appends_in_place_and_attends_to_the_cache_prefix(self):
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.bfloat16
            with self.subTest(device=device):
                # Speculative decoding: 3 new tokens appended at position 25 of a 40-position cache.
                k_cache, v_cache = (self.randn(2, 40, 2, 64, device=device, dtype=dtype) for _ in range(2))
                before_k, before_v = k_cache.clone(), v_cache.clone()
                q = self.randn(2, 3, 8, 64, device=device, dtype=dtype)
                k_new, v_new = (self.randn(2, 3, 2, 64, device=device, dtype=dtype) for _ in range(2))
                o, lse = fai.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=25, causal=True,
                                                     return_softmax_lse=True)
                self.assertTrue(torch.equal(k_cache[:, 25:28], k_new) and torch.equal(v_cache[:, 25:28], v_new))
                for cache, before in ((k_cache, before_k), (v_cache, before_v)):
                    self.assertTrue(torch.equal(cache[:, :25], before[:, :25]) and torch.equal(cache[:, 28:], before[:, 28:]))
                self.check(o, q, k_cache[:, :28], v_cache[:, :28], causal=True)
                self.assertEqual(tuple(lse.shape), (2, 8, 3))
                # No append, the whole cache, a window.
                o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, window_size=(10, 0))
                self.check(o, q, k_cache, v_cache, window_size=(10, 0))

    def test_kvcache_num_splits_forces_the_split_count(self):
        """FlashAttention-2's num_splits: 1 unsplit, n > 1 at most n key splits; every count gives standard
        attention (on the CPU the very same result), whole cache or per-sequence lengths."""
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.bfloat16
            k_cache, v_cache = (self.randn(3, 700, 2, 64, device=device, dtype=dtype) for _ in range(2))
            q = self.randn(3, 2, 8, 64, device=device, dtype=dtype)
            lengths = torch.tensor([700, 1, 333], dtype=torch.int32, device=device)
            auto = fai.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths)
            for n in (1, 3, 128):
                with self.subTest(device=device, num_splits=n):
                    o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, num_splits=n)
                    self.check(o, q, k_cache, v_cache)
                    o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, num_splits=n)
                    for b, length in enumerate(lengths.tolist()):
                        self.check(o[b:b + 1], q[b:b + 1], k_cache[b:b + 1, :length], v_cache[b:b + 1, :length])
                    if device == "cpu":
                        self.assertTrue(torch.equal(o, auto))
            # Without lse: none computed or returned, the same o.
            with_lse = kv_cache_forward(q, k_cache, v_cache, seqused_k=lengths)
            o, lse = kv_cache_forward(q, k_cache, v_cache, seqused_k=lengths, return_lse=False)
            self.assertIsNone(lse)
            self.assertTrue(torch.equal(o, with_lse[0]))

    def test_kvcache_paged_and_per_sequence_lengths(self):
        """A paged cache (pages shuffled, page sizes 1, 5 and 16) and per-sequence lengths: the new rows
        land at each sequence's position, in its pages, and q attends to its first lengths + new keys."""
        g = torch.Generator().manual_seed(11)
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.bfloat16
            for page in (1, 5, 16):
                with self.subTest(device=device, page=page):
                    batch, capacity, new = 3, 40, 2
                    lengths = torch.tensor([0, 17, 38], dtype=torch.int32)
                    dense_k, dense_v = (self.randn(batch, capacity, 2, 32, device=device, dtype=dtype) for _ in range(2))
                    k_new, v_new = (self.randn(batch, new, 2, 32, device=device, dtype=dtype) for _ in range(2))
                    q = self.randn(batch, new, 4, 32, device=device, dtype=dtype)
                    pages = -(-capacity // page)
                    order = torch.randperm(batch * pages + 2, generator=g)
                    table = order[:batch * pages].view(batch, pages).to(torch.int32)
                    k_cache = torch.full((batch * pages + 2, page, 2, 32), float("nan"), device=device, dtype=dtype)
                    v_cache = k_cache.clone()
                    for b in range(batch):
                        for j in range(capacity):
                            k_cache[table[b, j // page], j % page] = dense_k[b, j]
                            v_cache[table[b, j // page], j % page] = dense_v[b, j]
                    o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new,
                                                    cache_seqlens=lengths.to(device), block_table=table.to(device),
                                                    causal=True)
                    for b in range(batch):
                        n = int(lengths[b])
                        keys = torch.cat([dense_k[b, :n], k_new[b]])[None]
                        values = torch.cat([dense_v[b, :n], v_new[b]])[None]
                        for j in range(new):  # the appended rows, in the sequence's pages
                            self.assertTrue(torch.equal(k_cache[table[b, (n + j) // page], (n + j) % page], k_new[b, j]))
                        self.check(o[b:b + 1], q[b:b + 1], keys, values, causal=True)
                    # Dense cache, per-sequence lengths, nothing appended: the first lengths[b] keys.
                    used = torch.tensor([1, 17, 40], dtype=torch.int32)
                    o = fai.flash_attn_with_kvcache(q, dense_k, dense_v, cache_seqlens=used.to(device))
                    for b in range(batch):
                        n = int(used[b])
                        self.check(o[b:b + 1], q[b:b + 1], dense_k[b:b + 1, :n], dense_v[b:b + 1, :n])

    def test_kvcache_cache_batch_idx_picks_each_sequences_cache_row(self):
        """cache_batch_idx: sequence b appends to and attends to row cache_batch_idx[b] of a cache with more
        rows than the batch (per-sequence lengths, then one int length); the other rows stay untouched; an
        index outside the cache is refused on the CPU."""
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.bfloat16
            with self.subTest(device=device):
                k_cache, v_cache = (self.randn(5, 24, 2, 32, device=device, dtype=dtype) for _ in range(2))
                before_k, before_v = k_cache.clone(), v_cache.clone()
                idx = torch.tensor([3, 0, 4], dtype=torch.int32, device=device)
                q = self.randn(3, 2, 4, 32, device=device, dtype=dtype)
                k_new, v_new = (self.randn(3, 2, 2, 32, device=device, dtype=dtype) for _ in range(2))
                lengths = torch.tensor([5, 0, 22], dtype=torch.int32, device=device)
                o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=lengths,
                                                cache_batch_idx=idx, causal=True)
                for b in range(3):
                    row, n = int(idx[b]), int(lengths[b])
                    self.assertTrue(torch.equal(k_cache[row, n:n + 2], k_new[b]))
                    self.assertTrue(torch.equal(v_cache[row, n:n + 2], v_new[b]))
                    self.assertTrue(torch.equal(k_cache[row, :n], before_k[row, :n]))
                    self.check(o[b:b + 1], q[b:b + 1], k_cache[row:row + 1, :n + 2], v_cache[row:row + 1, :n + 2],
                               causal=True)
                for row in (1, 2):  # no sequence's
                    self.assertTrue(torch.equal(k_cache[row], before_k[row]) and torch.equal(v_cache[row], before_v[row]))
                o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=9, cache_batch_idx=idx)
                for b in range(3):
                    row = int(idx[b])
                    self.check(o[b:b + 1], q[b:b + 1], k_cache[row:row + 1, :9], v_cache[row:row + 1, :9])
                if device == "cpu":
                    with self.assertRaisesRegex(ValueError, r"cache_batch_idx: element 1 is 5, expected a row of "
                                                            r"k_cache in 0..4"):
                        fai.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=9,
                                                    cache_batch_idx=torch.tensor([3, 5, 0], dtype=torch.int32))

    def test_kvcache_rotary_embedding_of_the_new_keys_and_q(self):
        """rotary_cos/sin: the appended keys rotated at their positions, q at cache_seqlens + i (causal)
        or all at cache_seqlens (neither causal nor local), both layouts, dense and paged, against
        flash_attn's apply_rotary_emb written out here (float64)."""
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.bfloat16
            for interleaved, causal, page in ((True, True, 0), (False, False, 0), (False, True, 16), (True, False, 7)):
                with self.subTest(device=device, interleaved=interleaved, causal=causal, page=page):
                    batch, capacity, new, d, rotary_dim = 2, 48, 3, 64, 32
                    lengths = torch.tensor([5, 30], dtype=torch.int32)
                    # A row for every position of the cache: whole pages (flash_attn asks the same).
                    positions = -(-capacity // page) * page if page else capacity
                    t = torch.arange(positions, dtype=torch.float64)[:, None]
                    freq = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
                    cos, sin = (f(t * freq).to(device=device, dtype=dtype) for f in (torch.cos, torch.sin))
                    dense_k, dense_v = (self.randn(batch, capacity, 2, d, device=device, dtype=dtype) for _ in range(2))
                    k_new, v_new = (self.randn(batch, new, 2, d, device=device, dtype=dtype) for _ in range(2))
                    q = self.randn(batch, new, 4, d, device=device, dtype=dtype)
                    if page:
                        pages = -(-capacity // page)
                        table = torch.randperm(batch * pages).view(batch, pages).to(torch.int32)
                        k_cache = torch.empty((batch * pages, page, 2, d), device=device, dtype=dtype)
                        v_cache = torch.empty_like(k_cache)
                        for b in range(batch):
                            for j in range(capacity):
                                k_cache[table[b, j // page], j % page] = dense_k[b, j]
                                v_cache[table[b, j // page], j % page] = dense_v[b, j]
                        o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cos, sin,
                                                        cache_seqlens=lengths.to(device), block_table=table.to(device),
                                                        causal=causal, rotary_interleaved=interleaved)
                        row = lambda cache, b, j: cache[table[b, j // page], j % page]
                    else:
                        k_cache, v_cache = dense_k.clone(), dense_v.clone()
                        o = fai.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cos, sin,
                                                        cache_seqlens=lengths.to(device), causal=causal,
                                                        rotary_interleaved=interleaved)
                        row = lambda cache, b, j: cache[b, j]
                    tol = 1e-5 if dtype == torch.float32 else 2e-2
                    for b in range(batch):
                        n = int(lengths[b])
                        pos = torch.arange(n, n + new)
                        k_rot = rotate(k_new[b].double(), cos.double()[pos], sin.double()[pos], interleaved)
                        for j in range(new):
                            self.assertLess((row(k_cache, b, n + j).double() - k_rot[j]).abs().max().item(), tol)
                            self.assertTrue(torch.equal(row(v_cache, b, n + j), v_new[b, j]))
                        q_pos = pos if causal else torch.full((new,), n)
                        q_rot = rotate(q[b].double(), cos.double()[q_pos], sin.double()[q_pos], interleaved)
                        keys = torch.cat([dense_k[b, :n].double(), k_rot])[None]
                        values = torch.cat([dense_v[b, :n], v_new[b]])[None].double()
                        ref, _ = standard_attention(q_rot[None], keys, values, causal=causal)
                        self.assertLess((o[b:b + 1].double() - ref).abs().max().item(), 1e-4 if dtype == torch.float32
                                        else 3e-2)

    def test_kv_append_packed_prompts_in_one_call(self):
        """flashgen.torch_op.kv_append with cu_seqlens: packed prompts (one of them empty) into a paged
        cache from each sequence's position, keys rotated, q rotated and returned packed."""
        from flashgen.torch_op import kv_append
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.float16
            with self.subTest(device=device):
                lengths, page, d = [7, 0, 12], 8, 32
                cu = torch.tensor([0, 7, 7, 19], dtype=torch.int32)
                start = torch.tensor([3, 0, 20], dtype=torch.int32)
                pages_per_seq = 4
                table = torch.randperm(3 * pages_per_seq).view(3, pages_per_seq).to(torch.int32)
                k_cache = self.randn(3 * pages_per_seq, page, 1, d, device=device, dtype=dtype)
                v_cache, before = k_cache.clone(), k_cache.clone()
                k, v = (self.randn(19, 1, d, device=device, dtype=dtype) for _ in range(2))
                q = self.randn(19, 2, d, device=device, dtype=dtype)
                t = torch.arange(page * pages_per_seq, dtype=torch.float64)[:, None]
                angles = t * 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
                cos, sin = (f(angles).to(device=device, dtype=dtype) for f in (torch.cos, torch.sin))
                q_rot = kv_append(k, v, k_cache, v_cache, start.to(device), block_table=table.to(device),
                                  rotary_cos=cos, rotary_sin=sin, q=q, cu_seqlens=cu.to(device))
                tol = 1e-5 if dtype == torch.float32 else 2e-3
                written = set()
                for b, n in enumerate(lengths):
                    pos = torch.arange(int(start[b]), int(start[b]) + n)
                    rows = slice(int(cu[b]), int(cu[b + 1]))
                    want_k = rotate(k[rows].double(), cos.double()[pos], sin.double()[pos], False)
                    want_q = rotate(q[rows].double(), cos.double()[pos], sin.double()[pos], False)
                    self.assertLess((q_rot[rows].double() - want_q).abs().max().item() if n else 0.0, tol)
                    for j in range(n):
                        p_, r_ = int(table[b, int(pos[j]) // page]), int(pos[j]) % page
                        written.add((p_, r_))
                        self.assertLess((k_cache[p_, r_].double() - want_k[j]).abs().max().item(), tol)
                        self.assertTrue(torch.equal(v_cache[p_, r_], v[int(cu[b]) + j]))
                for p_ in range(k_cache.size(0)):  # nothing else changed
                    for r_ in range(page):
                        if (p_, r_) not in written:
                            self.assertTrue(torch.equal(k_cache[p_, r_], before[p_, r_]))

    def test_kvcache_refuses_what_flashgen_does_not_do(self):
        q, kc = self.randn(1, 1, 2, 32), self.randn(1, 16, 1, 32)
        cases = [
            ({"cache_seqlens": torch.tensor([4], dtype=torch.int64)}, r"cache_seqlens: is torch.int64 of shape \(1,\), expected int32"),
            ({"cache_seqlens": 2.0}, r"cache_seqlens: is a float, expected None, an int or an int32 tensor"),
            ({"block_table": torch.zeros(1, 1, dtype=torch.int64)}, r"block_table: is torch.int64 of shape \(1, 1\), expected int32"),
            ({"rotary_cos": torch.ones(16, 8), "rotary_sin": torch.ones(16, 8)}, r"rotary_cos: is set without k, v"),
            ({"rotary_cos": torch.ones(16, 8)}, r"rotary_cos, rotary_sin: one is set"),
            ({"cache_batch_idx": torch.zeros(1, dtype=torch.int64)},
             r"cache_batch_idx: is torch.int64 of shape \(1,\), expected int32 \(1,\)"),
            ({"cache_batch_idx": torch.zeros(2, dtype=torch.int32)}, r"cache_batch_idx: is torch.int32 of shape \(2,\)"),
            ({"cache_batch_idx": [0]}, r"cache_batch_idx: is a list, expected int32 \(1,\)"),
            ({"cache_batch_idx": torch.zeros(1, dtype=torch.int32), "block_table": torch.zeros(1, 1, dtype=torch.int32)},
             r"cache_batch_idx: is set with block_table"),
            ({"cache_leftpad": torch.zeros(1, dtype=torch.int32)}, r"cache_leftpad: is set, expected None"),
            ({"num_splits": -1}, r"num_splits: is -1, expected 0 \(automatic\), 1 \(unsplit\) or 2..128"),
            ({"num_splits": 129}, r"num_splits: is 129, expected 0 \(automatic\), 1 \(unsplit\) or 2..128"),
            ({"k": self.randn(1, 1, 1, 32), "cache_seqlens": 3}, r"k, v: one is set, expected both or neither"),
            ({"k": self.randn(1, 1, 1, 32), "v": self.randn(1, 1, 1, 32)}, r"cache_seqlens: is None with k, v given"),
            ({"k": self.randn(1, 2, 1, 32), "v": self.randn(1, 2, 1, 32), "cache_seqlens": 15},
             r"cache_seqlens: is 15, expected 0..14"),
            ({"cache_seqlens": 0}, r"cache_seqlens: 0 with nothing appended"),
        ]
        for kwargs, message in cases:
            with self.subTest(message=message), self.assertRaisesRegex(ValueError, message):
                fai.flash_attn_with_kvcache(q, kc, kc.clone(), **kwargs)

    def check(self, got, q, k, v, **options):
        """got (o) against float64 standard attention; gradients through autograd."""
        ref, _ = standard_attention(q.double(), k.double(), v.double(), **options)
        self.assertLess((got.double() - ref).abs().max().item(), 1e-4 if q.dtype == torch.float32 else 2e-2)

    def test_flash_attn_func_matches_standard_attention(self):
        for device in self.devices:
            dtype = torch.float32 if device == "cpu" else torch.bfloat16
            q = self.randn(2, 37, 4, 64, device=device, dtype=dtype)
            k, v = self.randn(2, 53, 2, 64, device=device, dtype=dtype), self.randn(2, 53, 2, 64, device=device, dtype=dtype)
            for options in ({}, {"causal": True}, {"window_size": (9, 3), "softcap": 5.0, "softmax_scale": 0.2}):
                with self.subTest(device=device, **{k_: str(v_) for k_, v_ in options.items()}):
                    self.check(fai.flash_attn_func(q, k, v, 0.0, **options), q, k, v, **options)

    def test_packed_calls_equal_the_unpacked_one_and_differentiate(self):
        qkv = self.randn(1, 29, 3, 2, 32).requires_grad_()
        o = fai.flash_attn_qkvpacked_func(qkv, causal=True)
        q, k, v = (qkv[:, :, i].detach() for i in range(3))
        self.assertTrue(torch.equal(o, fai.flash_attn_func(q, k, v, causal=True)))
        kv = torch.stack([k, v], dim=2)
        self.assertTrue(torch.equal(fai.flash_attn_kvpacked_func(q, kv, causal=True), o.detach()))
        dout = self.randn(*o.shape)
        o.backward(dout)
        qr, kr, vr = (qkv[:, :, i].detach().double().requires_grad_() for i in range(3))
        ref, _ = standard_attention(qr, kr, vr, causal=True)
        ref.backward(dout.double())
        for i, t in enumerate((qr, kr, vr)):
            self.assertLess((qkv.grad[:, :, i].double() - t.grad).abs().max().item(), 1e-4, "qkv"[i])

    def test_what_flashgen_does_not_do_is_refused(self):
        q = k = v = self.randn(1, 8, 2, 32)
        with self.assertRaisesRegex(ValueError, r"dropout_p: is 0.1, expected 0.0"):
            fai.flash_attn_func(q, k, v, 0.1)
        with self.assertRaisesRegex(ValueError, r"alibi_slopes: is set, expected None"):
            fai.flash_attn_func(q, k, v, alibi_slopes=torch.ones(2))
        with self.assertRaisesRegex(ValueError, r"return_attn_probs: is True, expected False"):
            fai.flash_attn_func(q, k, v, return_attn_probs=True)
        with self.assertRaisesRegex(ValueError, r"kv: shape is \(1, 8, 2, 32\), expected"):
            fai.flash_attn_kvpacked_func(q, k)
        with self.assertRaisesRegex(ValueError, r"qkv: shape is \(1, 8, 2, 32\), expected"):
            fai.flash_attn_qkvpacked_func(q)
        self.assertTrue(math.isfinite(fai.flash_attn_func(q, k, v).sum().item()))


if __name__ == "__main__":
    unittest.main()
