"""Packed variable-length sequences in PyTorch (flashgen.varlen_attention and FlashAttention-2's
flash_attn_varlen_func) on the CPU: outputs, lse and gradients against flash_attn_func on each
sequence's rows (the same CPU code runs: equal) and against standard attention per sequence in
plain torch (float64, autograd for the gradients); rows outside every sequence; the errors.
"""
import inspect
import math
import unittest

import support

try:
    import torch
except ImportError:
    torch = None
    print("flashgen-test: skipping: torch is not installed")

if torch is not None:
    import flashgen
    from flashgen import flash_attn_interface as fai
    from flashgen import torch_op
    from test_torch import standard_attention

# flash_attn 2.6+'s flash_attn_varlen_func: names, order, defaults.
FA2_VARLEN = [
    ("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty), ("v", inspect.Parameter.empty),
    ("cu_seqlens_q", inspect.Parameter.empty), ("cu_seqlens_k", inspect.Parameter.empty),
    ("max_seqlen_q", inspect.Parameter.empty), ("max_seqlen_k", inspect.Parameter.empty), ("dropout_p", 0.0),
    ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)), ("softcap", 0.0), ("alibi_slopes", None),
    ("deterministic", False), ("return_attn_probs", False), ("block_table", None),
]

# Odd lengths, one longer than a 64-row tile, one token, no queries, no keys; queries never
# outnumber keys (standard attention's rows without keys are NaN; flashgen's are 0).
LEN_Q = [37, 0, 1, 60, 5, 3]
LEN_K = [53, 9, 0, 65, 5, 3]
LEAD, SPARE = 2, 3  # rows before the first sequence and after the last one


def offsets(lengths):
    cu = [LEAD]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32)


def paged_cache(k, v, cu_k, page_size, generator):
    """The keys and values of each sequence (rows cu_k[b]:cu_k[b + 1] of k, v) in pages of a cache
    (num_pages, page_size, heads_kv, head_dim), the pages shuffled, NaN where no sequence is; returns
    (k_pages, v_pages, block_table int32 (batch, max_pages))."""
    lengths = [int(cu_k[b + 1] - cu_k[b]) for b in range(len(cu_k) - 1)]
    max_pages = max(1, max((n + page_size - 1) // page_size for n in lengths))
    num_pages = len(lengths) * max_pages + 2
    order = torch.randperm(num_pages, generator=generator).tolist()
    k_pages = torch.full((num_pages, page_size, *k.shape[1:]), math.nan, dtype=k.dtype)
    v_pages = k_pages.clone()
    table = torch.zeros(len(lengths), max_pages, dtype=torch.int32)
    for b, n in enumerate(lengths):
        for slot in range((n + page_size - 1) // page_size):
            page = order[b * max_pages + slot]
            table[b, slot] = page
            rows = slice(int(cu_k[b]) + slot * page_size, int(cu_k[b]) + min(n, (slot + 1) * page_size))
            count = rows.stop - rows.start
            k_pages[page, :count], v_pages[page, :count] = k[rows], v[rows]
    return k_pages, v_pages, table


@unittest.skipIf(torch is None, "torch is not installed")
class VarlenTest(support.SeededTestCase):
    def setUp(self):
        super().setUp()
        self.generator = torch.Generator().manual_seed(self.seed)

    def randn(self, *shape, dtype=torch.float32):
        return torch.randn(*shape, generator=self.generator, dtype=torch.float64).to(dtype)

    def packed(self, heads_q=4, heads_kv=2, head_dim=32, dtype=torch.float32):
        """q, k, v, dout, lse weights and the offsets of LEN_Q / LEN_K with LEAD and SPARE rows."""
        cu_q, cu_k = offsets(LEN_Q), offsets(LEN_K)
        total_q, total_k = int(cu_q[-1]) + SPARE, int(cu_k[-1]) + SPARE
        q = self.randn(total_q, heads_q, head_dim, dtype=dtype)
        k, v = (self.randn(total_k, heads_kv, head_dim, dtype=dtype) for _ in range(2))
        return q, k, v, self.randn(*q.shape, dtype=dtype), self.randn(heads_q, total_q), cu_q, cu_k

    def test_signature_is_flash_attn_2s(self):
        params = inspect.signature(fai.flash_attn_varlen_func).parameters.values()
        self.assertEqual([(p.name, p.default) for p in params], FA2_VARLEN)

    def run_packed(self, q, k, v, dout, weights, cu_q, cu_k, **options):
        """o, lse and the gradients of sum(o * dout) + sum(lse * weights) of one packed call."""
        q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
        o, lse = flashgen.varlen_attention(q, k, v, cu_q, cu_k, max(LEN_Q), max(LEN_K), return_lse=True, **options)
        ((o.float() * dout.float()).sum() + (lse * weights).sum()).backward()
        return o.detach(), lse.detach(), q.grad, k.grad, v.grad

    def test_matches_per_sequence_calls_and_standard_attention(self):
        cases = {
            "plain": (torch.float32, {}),
            "causal": (torch.float32, {"causal": True}),
            "window_softcap_scale": (torch.float32, {"window_size": (7, 3), "softcap": 5.0, "softmax_scale": 0.3}),
            "bf16_causal": (torch.bfloat16, {"causal": True}),
            "fp16_window": (torch.float16, {"window_size": (4, 0)}),
        }
        for case, (dtype, options) in cases.items():
            with self.subTest(case=case):
                q, k, v, dout, weights, cu_q, cu_k = self.packed(dtype=dtype)
                o, lse, dq, dk, dv = self.run_packed(q, k, v, dout, weights, cu_q, cu_k, **options)
                for name, t in (("o", o), ("dq", dq)):
                    self.assertTrue(torch.equal(t[:LEAD], torch.zeros_like(t[:LEAD])), f"{case} {name} lead rows")
                    self.assertTrue(torch.equal(t[-SPARE:], torch.zeros_like(t[-SPARE:])), f"{case} {name} spare rows")
                for name, t in (("dk", dk), ("dv", dv)):
                    self.assertTrue(torch.equal(t[-SPARE:], torch.zeros_like(t[-SPARE:])), f"{case} {name} spare rows")
                self.assertTrue(torch.isneginf(lse[:, -SPARE:]).all(), f"{case} lse spare columns")
                for b in range(len(LEN_Q)):
                    q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
                    rows, keys = slice(q0, q1), slice(k0, k1)
                    where = f"{case} sequence {b} {self.where()}"
                    if q1 == q0 or k1 == k0:  # o = 0, lse = -inf, zero gradients
                        self.assertTrue(torch.equal(o[rows], torch.zeros_like(o[rows])), where)
                        self.assertTrue(torch.isneginf(lse[:, rows]).all(), where)
                        for t, r in ((dq, rows), (dk, keys), (dv, keys)):
                            self.assertTrue(torch.equal(t[r], torch.zeros_like(t[r])), where)
                        continue
                    # The same sequence as a dense batch of one.
                    one = [t[None, r].clone().requires_grad_() for t, r in ((q, rows), (k, keys), (v, keys))]
                    o1, lse1 = flashgen.attention(*one, return_lse=True, **options)
                    ((o1.float() * dout[None, rows].float()).sum() + (lse1[0] * weights[:, rows]).sum()).backward()
                    for name, got, want in (("o", o[rows], o1[0]), ("lse", lse[:, rows], lse1[0]),
                                            ("dq", dq[rows], one[0].grad[0]), ("dk", dk[keys], one[1].grad[0]),
                                            ("dv", dv[keys], one[2].grad[0])):
                        self.assertTrue(torch.equal(got, want.detach()), f"{name}: {where}")
                    # Standard attention in float64.
                    ref = [t.detach().double().requires_grad_() for t in one]
                    ro, rlse = standard_attention(*ref, **options)
                    ((ro * dout[None, rows].double()).sum() + (rlse[0] * weights[:, rows].double()).sum()).backward()
                    tolerance = 2e-5 if dtype == torch.float32 else 3e-2
                    for name, got, want in (("o", o[rows], ro[0]), ("lse", lse[:, rows], rlse[0]),
                                            ("dq", dq[rows], ref[0].grad[0]), ("dk", dk[keys], ref[1].grad[0]),
                                            ("dv", dv[keys], ref[2].grad[0])):
                        error = (got.double() - want.detach()).abs().max().item()
                        scale = max(1.0, want.abs().max().item())
                        self.assertLessEqual(error, tolerance * scale, f"{name}: {where}")

    def test_paged_cache_matches_packed_keys(self):
        """flash_attn_varlen_func with block_table: the keys of each sequence in shuffled pages of a
        cache, the same result as the packed keys (the CPU backend runs both)."""
        for dtype, options in ((torch.float32, {"causal": True}), (torch.bfloat16, {"window_size": (6, 0)})):
            with self.subTest(dtype=dtype, options=options):
                q, k, v, _, _, cu_q, cu_k = self.packed(dtype=dtype)
                k_pages, v_pages, table = paged_cache(k, v, cu_k, page_size=4, generator=self.generator)
                o = fai.flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k - LEAD, max(LEN_Q), max(LEN_K),
                                               block_table=table, **options)
                want = flashgen.varlen_attention(q, k, v, cu_q, cu_k, max(LEN_Q), max(LEN_K), **options)
                self.assertTrue(torch.allclose(o.float(), want.float(), atol=1e-6, rtol=0), self.where())

    def test_flash_attn_varlen_func_is_varlen_attention(self):
        q, k, v, _, _, cu_q, cu_k = self.packed(heads_kv=4)
        o = fai.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LEN_Q), max(LEN_K), causal=True, window_size=(5, 0))
        self.assertEqual(tuple(o.shape), tuple(q.shape))
        want = flashgen.varlen_attention(q, k, v, cu_q, cu_k, max(LEN_Q), max(LEN_K), causal=True, window_size=(5, 0))
        self.assertTrue(torch.equal(o, want))

    @unittest.skipUnless(torch is not None and torch_op.HAS_CUSTOM_OP, "torch < 2.4: no custom_op to compare with")
    def test_autograd_function_matches_the_custom_op(self):
        q, k, v, dout, _, cu_q, cu_k = self.packed()
        results = []
        for fn in (torch_op.VarlenAttentionFunction.apply, torch_op.varlen_forward_op):
            qkv = [t.clone().requires_grad_() for t in (q, k, v)]
            o, _ = fn(*qkv, cu_q, cu_k, max(LEN_Q), max(LEN_K), 0.0, True, -1, -1, 0.0, False, False, True)
            o.backward(dout)
            results.append([o.detach()] + [t.grad for t in qkv])
        for got, want in zip(*results):
            self.assertTrue(torch.equal(got, want))

    @unittest.skipUnless(torch is not None and torch_op.HAS_CUSTOM_OP, "torch < 2.4 has no torch.library.opcheck")
    def test_opcheck(self):
        q, k, v, dout, _, cu_q, cu_k = self.packed()
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        lengths = (max(LEN_Q), max(LEN_K))
        args = (q, k, v, cu_q, cu_k, *lengths, 0.0, True, -1, -1, 0.0, False, True, True)
        torch.library.opcheck(torch.ops.flashgen.varlen_forward.default, args)
        o, lse = torch.ops.flashgen.varlen_forward(*(a.detach() if torch.is_tensor(a) else a for a in args))
        torch.library.opcheck(torch.ops.flashgen.varlen_backward.default,
                              (dout, q.detach(), k.detach(), v.detach(), o, lse, cu_q, cu_k, *lengths, 0.0, True, -1,
                               -1, 0.0, False))

    def test_errors(self):
        q, k, v, _, _, cu_q, cu_k = self.packed()
        call = (q, k, v, cu_q, cu_k, max(LEN_Q), max(LEN_K))
        refused = [
            ({"dropout_p": 0.1}, r"dropout_p: is 0.1, expected 0.0"),
            ({"alibi_slopes": torch.ones(4)}, r"alibi_slopes: is set, expected None"),
            ({"return_attn_probs": True}, r"return_attn_probs: is True, expected False"),
        ]
        for kwargs, message in refused:
            with self.subTest(message=message), self.assertRaisesRegex(ValueError, message):
                fai.flash_attn_varlen_func(*call, **kwargs)
        table = torch.zeros(len(LEN_Q), 1, dtype=torch.int32)
        with self.assertRaisesRegex(ValueError, r"block_table: is set while q, k or v requires grad"):
            fai.flash_attn_varlen_func(q.requires_grad_(), *call[1:], block_table=table)
        q.requires_grad_(False)
        with self.assertRaisesRegex(ValueError, r"cu_seqlens_k: is torch.int64, expected torch.int32"):
            fai.flash_attn_varlen_func(q, k, v, cu_q, cu_k.long(), max(LEN_Q), max(LEN_K), block_table=table)
        with self.assertRaisesRegex(TypeError, r"cu_seqlens_q: dtype is torch.int64, expected torch.int32"):
            fai.flash_attn_varlen_func(q, k, v, cu_q.long(), cu_k, max(LEN_Q), max(LEN_K))
        decreasing = cu_q.clone()
        decreasing[2] = decreasing[1] - 1
        invalid = [
            ((q, k, v, decreasing, cu_k, max(LEN_Q), max(LEN_K)), r"varlen.cu_seqlens_q: \[2\] = \d+ is below \[1\]"),
            ((q, k, v, cu_q, cu_k, 0, max(LEN_K)), r"varlen.max_seqlen_q: is 0, expected >= 1"),
            ((q, k, v, cu_q, cu_k, 10, max(LEN_K)), r"varlen.cu_seqlens_q: sequence 0 has 37 rows, expected at most "
                                                    r"varlen.max_seqlen_q = 10"),
            ((q[None], k, v, cu_q, cu_k, max(LEN_Q), max(LEN_K)), r"q: rank is 4, expected 3 \(total_q, heads_q"),
            ((q, k, v, cu_q, cu_k[:-1], max(LEN_Q), max(LEN_K)), r"varlen.cu_seqlens_k: shape\[0\] \(batch \+ 1\) is 6"),
        ]
        for args, message in invalid:
            with self.subTest(message=message), self.assertRaisesRegex(flashgen.InvalidArgumentError, message):
                fai.flash_attn_varlen_func(*args)
        self.assertTrue(math.isfinite(fai.flash_attn_varlen_func(*call).sum().item()))


@unittest.skipUnless(torch is not None and torch.cuda.is_available(), "no CUDA device")
class VarlenCudaTest(support.SeededTestCase):
    """The generated kernels through the same call: packed sequences long enough to span several
    tiles (the warp-specialised kernels at head_dim 64/128, mma.sync at 40), against float64
    standard attention per sequence, gradients included; rows outside every sequence stay 0."""

    LEN = [300, 0, 1, 129, 64, 513]

    def test_matches_standard_attention(self):
        generator = torch.Generator().manual_seed(self.seed)
        cases = [(torch.bfloat16, 128, 8, 2, {"causal": True}), (torch.float16, 64, 4, 4, {"window_size": (40, 0)}),
                 (torch.bfloat16, 40, 2, 1, {"softcap": 20.0})]
        for dtype, head_dim, heads_q, heads_kv, options in cases:
            with self.subTest(dtype=dtype, head_dim=head_dim, options=options):
                cu = [LEAD]
                for n in self.LEN:
                    cu.append(cu[-1] + n)
                total = cu[-1] + SPARE
                host = [torch.randn(total, h, head_dim, generator=generator, dtype=torch.float64)
                        for h in (heads_q, heads_kv, heads_kv, heads_q)]
                q, k, v, dout = (t.to(dtype).cuda() for t in host)
                q, k, v = (t.requires_grad_() for t in (q, k, v))
                cu_t = torch.tensor(cu, dtype=torch.int32, device="cuda")
                o, lse = flashgen.varlen_attention(q, k, v, cu_t, cu_t, max(self.LEN), max(self.LEN),
                                                   return_lse=True, **options)
                o.backward(dout)
                for name, t in (("o", o), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
                    outside = torch.cat([t[:LEAD], t[-SPARE:]])
                    self.assertTrue(torch.equal(outside, torch.zeros_like(outside)), f"{name} outside {self.where()}")
                for b in range(len(self.LEN)):
                    rows = slice(cu[b], cu[b + 1])
                    if cu[b + 1] == cu[b]:
                        continue
                    ref = [t.detach()[None, rows].cpu().double().requires_grad_() for t in (q, k, v)]
                    ro, rlse = standard_attention(*ref, **options)
                    ro.backward(dout[None, rows].cpu().double())
                    where = f"sequence {b} {self.where()}"
                    for name, got, want in (("o", o[rows], ro[0]), ("lse", lse[:, rows], rlse[0]),
                                            ("dq", q.grad[rows], ref[0].grad[0]), ("dk", k.grad[rows], ref[1].grad[0]),
                                            ("dv", v.grad[rows], ref[2].grad[0])):
                        error = (got.detach().cpu().double() - want.detach()).abs().max().item()
                        scale = max(1.0, want.abs().max().item())
                        self.assertLessEqual(error, 2e-2 * scale, f"{name}: {where}")

    def test_paged_cache(self):
        """flash_attn_varlen_func with block_table on the GPU (the split-KV kernels over packed
        queries) against float64 standard attention per sequence."""
        generator = torch.Generator().manual_seed(self.seed)
        len_q, len_k = [70, 0, 1, 3, 16, 1], [700, 9, 0, 65, 300, 1]
        cu_q = [LEAD]
        cu_k = [0]
        for nq, nk in zip(len_q, len_k):
            cu_q.append(cu_q[-1] + nq)
            cu_k.append(cu_k[-1] + nk)
        q = torch.randn(cu_q[-1] + SPARE, 8, 128, generator=generator).to(torch.bfloat16)
        k, v = (torch.randn(cu_k[-1], 2, 128, generator=generator).to(torch.bfloat16) for _ in range(2))
        k_pages, v_pages, table = paged_cache(k, v, torch.tensor(cu_k), page_size=16, generator=generator)
        cuda = [t.cuda() for t in (q, k_pages, v_pages, table, torch.tensor(cu_q, dtype=torch.int32),
                                   torch.tensor(cu_k, dtype=torch.int32))]
        o = fai.flash_attn_varlen_func(cuda[0], cuda[1], cuda[2], cuda[4], cuda[5], max(len_q), max(len_k),
                                       causal=True, block_table=cuda[3]).cpu()
        for name, rows in (("lead", slice(0, LEAD)), ("spare", slice(-SPARE, None))):
            self.assertTrue(torch.equal(o[rows], torch.zeros_like(o[rows])), f"{name} rows {self.where()}")
        for b in range(len(len_q)):
            rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
            if len_q[b] == 0:
                continue
            if len_k[b] == 0:
                self.assertTrue(torch.equal(o[rows], torch.zeros_like(o[rows])), f"sequence {b} {self.where()}")
                continue
            ro, _ = standard_attention(q[None, rows].double(), k[None, keys].double(), v[None, keys].double(),
                                       causal=True)
            error = (o[rows].double() - ro[0]).abs().max().item()
            self.assertLessEqual(error, 2e-2 * max(1.0, ro.abs().max().item()), f"sequence {b} {self.where()}")


if __name__ == "__main__":
    unittest.main()
