"""flashgen.attention (PyTorch) against standard attention.

The exact reference is standard attention written in plain torch, in float64 on the
CPU (it needs no SDPA, so these tests run with Debian's torch 1.13 in CI). The
baseline of FlashAttention's rule is standard attention in the input dtype on the
same device: F.scaled_dot_product_attention where torch has it (>= 2.0) and the case
has no softcap, the plain-torch reference in that dtype otherwise.
Skipped where torch is not installed; the CUDA tests run where a GPU is present.
"""
import math
import unittest
import warnings

import support
from reference import allowed_keys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
    print("flashgen-test: skipping: torch is not installed")

if torch is not None:
    import flashgen
    from flashgen import torch_op

    DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
    HAS_CUDA = torch.cuda.is_available()
    HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
    HAS_COMPILE = torch_op.HAS_CUSTOM_OP and hasattr(torch, "compile")
else:
    HAS_CUDA = HAS_SDPA = HAS_COMPILE = False

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim) and options; no row is left
# without keys (standard attention gives NaN there; that case has its own test).
CASES = {
    "plain": ((2, 37, 53, 4, 4, 64), {}),
    "causal_square": ((2, 65, 65, 2, 2, 64), {"causal": True}),
    "causal_more_keys": ((1, 33, 97, 4, 2, 128), {"causal": True}),
    "gqa": ((2, 41, 41, 6, 2, 64), {}),
    "mqa_causal": ((1, 77, 77, 4, 1, 32), {"causal": True}),
    "window": ((1, 90, 90, 2, 2, 64), {"window_size": (17, 5)}),
    "explicit_scale": ((1, 19, 23, 2, 2, 96), {"softmax_scale": 0.3}),
    "softcap_causal_gqa": ((2, 45, 61, 4, 2, 64), {"softcap": 3.0, "causal": True}),
    "softcap_window": ((1, 57, 57, 6, 3, 32), {"softcap": 10.0, "window_size": (8, 8)}),
}


def standard_attention(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0):
    """Standard attention in plain torch, in the inputs' dtype: materialises S and P.

    (batch, seqlen, heads, head_dim) tensors; GQA by repeating kv heads; causal and
    windows aligned bottom-right. Returns (o, lse); differentiable through autograd.
    """
    group = q.size(2) // k.size(2)
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    scale = 1.0 / math.sqrt(q.size(-1)) if softmax_scale is None else softmax_scale
    scores = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    mask = torch.from_numpy(allowed_keys(q.size(1), k.size(1), causal, window_size)).to(q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    o = torch.einsum("bhij,bjhd->bihd", torch.softmax(scores, dim=-1), v)
    return o, torch.logsumexp(scores, dim=-1)


def same_precision_attention(q, k, v, softcap=0.0, **options):
    """The rule's baseline: SDPA where it exists and can express the case, else standard_attention."""
    if not HAS_SDPA or softcap > 0:
        return standard_attention(q, k, v, softcap=softcap, **options)[0]
    group = q.size(2) // k.size(2)
    qt = q.transpose(1, 2)
    kt = k.repeat_interleave(group, dim=2).transpose(1, 2)
    vt = v.repeat_interleave(group, dim=2).transpose(1, 2)
    causal, window_size = options.get("causal", False), tuple(options.get("window_size", (-1, -1)))
    seqlen_q, seqlen_k, scale = q.size(1), k.size(1), options.get("softmax_scale")
    if window_size == (-1, -1) and (not causal or seqlen_q == seqlen_k):
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    else:  # bottom-right alignment and windows through an explicit mask
        mask = torch.from_numpy(allowed_keys(seqlen_q, seqlen_k, causal, window_size)).to(q.device)
        o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    return o.transpose(1, 2)


def to_numpy(t):
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def has_half_matmul_on_cpu():
    """torch 1.13 has no float16 matmul on the CPU, so no float16 baseline there."""
    try:
        torch.ones(2, 2, dtype=torch.float16) @ torch.ones(2, 2, dtype=torch.float16)
        return True
    except RuntimeError:
        return False


@unittest.skipIf(torch is None, "torch is not installed")
class TorchTestCase(support.SeededTestCase):
    def setUp(self):
        super().setUp()
        self.generator = torch.Generator().manual_seed(self.seed)

    def randn(self, shape, dtype=None, device="cpu"):
        values = torch.randn(shape, generator=self.generator, dtype=torch.float64)
        return values.to(device=device, dtype=dtype or torch.float32)

    def qkv(self, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype=None, device="cpu"):
        return (
            self.randn((batch, seqlen_q, heads_q, head_dim), dtype, device),
            self.randn((batch, seqlen_k, heads_kv, head_dim), dtype, device),
            self.randn((batch, seqlen_k, heads_kv, head_dim), dtype, device),
        )

    def outputs_and_gradients(self, fn, q, k, v, dout):
        q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
        o = fn(q, k, v)
        o.backward(dout)
        return o, q.grad, k.grad, v.grad

    def check_against_reference(self, case, q, k, v, options, attention=None):
        """o, dq, dk, dv of flashgen vs the float64 reference, by FlashAttention's rule."""
        attention = attention or flashgen.attention
        dout = self.randn(q.shape, q.dtype, q.device)
        got = self.outputs_and_gradients(lambda q, k, v: attention(q, k, v, **options), q, k, v, dout)
        exact = self.outputs_and_gradients(
            lambda q, k, v: standard_attention(q, k, v, **options)[0],
            *(t.detach().to("cpu", torch.float64) for t in (q, k, v, dout)),
        )
        same = self.outputs_and_gradients(lambda q, k, v: same_precision_attention(q, k, v, **options), q, k, v, dout)
        for name, g, e, s in zip(("o", "dq", "dk", "dv"), got, exact, same):
            self.assertEqual(g.dtype, q.dtype, f"{case} {name} dtype")
            self.assertEqual(tuple(g.shape), tuple(e.shape), f"{case} {name} shape")
            self.assert_by_rule(f"{case} {name}", to_numpy(g), to_numpy(e), to_numpy(s), DTYPE_NAMES[q.dtype])


class CpuTest(TorchTestCase):
    def run_cases(self, dtype):
        for case, (shape, options) in CASES.items():
            with self.subTest(case=case):
                self.check_against_reference(case, *self.qkv(*shape, dtype=dtype), options)

    def test_float32(self):
        self.run_cases(torch.float32)

    @unittest.skipUnless(torch is not None and has_half_matmul_on_cpu(), "this torch has no float16 matmul on the CPU")
    def test_float16(self):
        self.run_cases(torch.float16)

    def test_bfloat16(self):
        self.run_cases(torch.bfloat16)

    def test_strided_inputs(self):
        qkv = self.randn((2, 29, 3, 4, 32))  # a packed projection, as models produce it
        q, k, v = qkv.unbind(dim=2)
        self.check_against_reference("packed_qkv", q, k, v, {"causal": True})
        q_bhsd = self.randn((2, 4, 29, 32)).transpose(1, 2)
        self.check_against_reference("transposed_q", q_bhsd, k, v, {})

    def test_lse_and_its_gradient(self):
        q, k, v = self.qkv(1, 23, 31, 4, 2, 16)
        w_o, w_lse = self.randn(q.shape), self.randn((1, 4, 23))
        options = {"causal": True, "softcap": 4.0}

        def loss(o, lse):
            return (o * w_o).sum() + (lse * w_lse).sum()

        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        o, lse = flashgen.attention(*leaves, return_lse=True, **options)
        self.assertEqual((lse.dtype, tuple(lse.shape)), (torch.float32, (1, 4, 23)))
        loss(o, lse).backward()

        exact_leaves = [t.to(torch.float64).requires_grad_() for t in (q, k, v)]
        exact_o, exact_lse = standard_attention(*exact_leaves, **options)
        loss(exact_o, exact_lse).backward()

        self.assert_by_rule("lse", to_numpy(lse), to_numpy(exact_lse), to_numpy(exact_lse), "float32")
        for name, g, e in zip(("dq", "dk", "dv"), leaves, exact_leaves):
            self.assert_by_rule(f"{name} with lse", to_numpy(g.grad), to_numpy(e.grad), to_numpy(e.grad), "float32")

    def test_rows_without_keys(self):
        q, k, v = self.qkv(1, 20, 12, 2, 2, 16)  # causal, bottom-right: rows 0..7 see no key
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        o, lse = flashgen.attention(q, k, v, causal=True, return_lse=True)
        self.assertTrue(torch.all(o[:, :8] == 0) and torch.all(lse[:, :, :8] == float("-inf")), self.where())
        o.sum().backward()
        self.assertTrue(torch.all(q.grad[:, :8] == 0), self.where())
        for t in (q, k, v):
            self.assertTrue(torch.isfinite(t.grad).all(), self.where())

    def test_double_backward_is_refused(self):
        q, k, v = (t.requires_grad_() for t in self.qkv(1, 7, 9, 2, 1, 16))
        o = flashgen.attention(q, k, v, causal=True)
        with self.assertRaisesRegex(RuntimeError, "does not support double backward"):
            torch.autograd.grad(o.sum(), (q, k, v), create_graph=True)
        o = flashgen.attention(q, k, v, causal=True)  # a first-order backward still runs
        o.sum().backward()
        self.assertTrue(torch.isfinite(q.grad).all(), self.where())

    def test_gradcheck_float32(self):
        # flashgen has no float64 (its C API takes fp32, fp16, bf16), so finite differences run
        # in float32. Central differences with eps 3e-3 on outputs of size ~1: fp32 rounding
        # (~1e-7) / (2 eps) gives ~2e-5 per numerical derivative, truncation eps^2 |f'''| ~1e-5.
        # atol = rtol = 2e-3 leaves a 100x margin, while a wrong gradient (a missing term, a
        # wrong mask or softcap slope) is off by 1e-1 or more.
        cases = {
            "causal_softcap_mqa": ((1, 6, 7, 2, 1, 4), {"causal": True, "softcap": 2.0}),
            "window_gqa": ((1, 5, 7, 4, 2, 4), {"window_size": (2, 1), "softmax_scale": 0.7}),
        }
        for case, (shape, options) in cases.items():
            with self.subTest(case=case):
                q, k, v = (t.requires_grad_() for t in self.qkv(*shape))

                def fn(q, k, v):
                    return flashgen.attention(q, k, v, return_lse=True, **options)

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # gradcheck warns about non-float64 inputs
                    self.assertTrue(torch.autograd.gradcheck(fn, (q, k, v), eps=3e-3, atol=2e-3, rtol=2e-3))

    @unittest.skipUnless(torch is not None and torch_op.HAS_CUSTOM_OP, "torch < 2.4: no custom_op to compare with")
    def test_autograd_function_matches_the_custom_op(self):
        # Where torch has custom_op, the torch < 2.4 fallback (AttentionFunction) still runs here.
        def fallback(q, k, v, causal, window_size, softcap):
            return torch_op.AttentionFunction.apply(q, k, v, 0.0, causal, *window_size, softcap, False, False, True)[0]

        q, k, v = self.qkv(2, 31, 44, 4, 2, 32)
        options = {"causal": True, "window_size": (3, 0), "softcap": 5.0}
        self.check_against_reference("autograd_function", q, k, v, options, attention=fallback)

    @unittest.skipUnless(torch is not None and torch_op.HAS_CUSTOM_OP, "torch < 2.4 has no torch.library.opcheck")
    def test_opcheck(self):
        q, k, v = (t.requires_grad_() for t in self.qkv(1, 9, 11, 2, 1, 16))
        args = (q, k, v, 0.0, True, -1, -1, 0.0, False, True, True)
        torch.library.opcheck(torch.ops.flashgen.forward.default, args)
        o, lse = torch.ops.flashgen.forward(*(a.detach() if torch.is_tensor(a) else a for a in args))
        dout = self.randn(o.shape)
        torch.library.opcheck(torch.ops.flashgen.backward.default,
                              (dout, q.detach(), k.detach(), v.detach(), o, lse, 0.0, True, -1, -1, 0.0, False))

    def test_argument_structs_are_reused_per_layout(self):
        """A call's C argument struct is the one its signature (layouts, dtypes, options) made first on
        this thread, with the call's pointers written into it: fresh tensors, another layout of the same values and
        other options each give their own exact results, and repeating a call adds no struct."""
        q, k, v = self.qkv(2, 9, 11, 4, 2, 16)
        want = flashgen.attention(q, k, v, causal=True)
        before = len(torch_op._arg_structs())
        for _ in range(3):  # fresh tensors of other values, same signature
            q2, k2, v2 = self.qkv(2, 9, 11, 4, 2, 16)
            exact = standard_attention(*(t.double() for t in (q2, k2, v2)), causal=True)[0]
            error = (flashgen.attention(q2, k2, v2, causal=True).double() - exact).abs().max().item()
            self.assertLess(error, 1e-5)
        self.assertEqual(len(torch_op._arg_structs()), before)
        q_strided = q.transpose(1, 2).contiguous().transpose(1, 2)  # same values, (batch, heads, seqlen) order
        self.assertTrue(torch.equal(flashgen.attention(q_strided, k, v, causal=True), want))
        self.assertEqual(len(torch_op._arg_structs()), before + 1)
        self.assertFalse(torch.equal(flashgen.attention(q, k, v), want), "causal is part of the signature")
        with self.assertRaisesRegex(TypeError, "k: dtype is torch.float16"):  # checked for a new signature
            flashgen.attention(q, k.half(), v, causal=True)

    def test_threads_calling_one_signature_keep_their_own_pointers(self):
        """Each thread writes its call's pointers into its own struct: threads running the same
        signature at once (the C call releases the GIL) each get the attention of their own inputs."""
        import threading

        inputs = [self.qkv(1, 33, 47, 2, 1, 16) for _ in range(4)]
        want = [standard_attention(*(t.double() for t in qkv), causal=True)[0] for qkv in inputs]
        errors = [[] for _ in inputs]

        def worker(i):
            for _ in range(25):
                o = flashgen.attention(*inputs[i], causal=True)
                errors[i].append((o.double() - want[i]).abs().max().item())

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, e in enumerate(errors):
            self.assertEqual(len(e), 25)
            self.assertLess(max(e), 1e-5, f"thread {i}")

    def test_inference_runs_the_operator_body_without_dispatch(self):
        """Calls that want no gradient skip the custom operator (its dispatch is most of a small call's
        time); calls whose inputs require grad go through it, and both give the same values."""
        q, k, v = self.qkv(1, 7, 9, 2, 1, 16)
        cu, cu_k = torch.tensor([0, 3, 7], dtype=torch.int32), torch.tensor([0, 4, 9], dtype=torch.int32)
        calls = []
        originals = {"_attention": torch_op._attention, "_varlen_attention": torch_op._varlen_attention}

        def recording(name):
            def run(*args):
                calls.append(name)
                return originals[name](*args)
            return run

        try:
            for name in originals:
                setattr(torch_op, name, recording(name))
            with torch.no_grad():
                inference = flashgen.attention(q, k, v, causal=True)
                inference_lse = flashgen.attention(q, k, v, causal=True, return_lse=True)
            inference_varlen = flashgen.varlen_attention(q[0], k[0], v[0], cu, cu_k, 4, 5)  # nothing requires grad
            self.assertEqual(calls, [])
            q.requires_grad_()
            training = flashgen.attention(q, k, v, causal=True)
            training_varlen = flashgen.varlen_attention(q[0], k[0], v[0], cu, cu_k, 4, 5)
            self.assertEqual(calls, ["_attention", "_varlen_attention"])
        finally:
            for name, op in originals.items():
                setattr(torch_op, name, op)
        self.assertTrue(torch.equal(inference, training.detach()))
        self.assertTrue(torch.equal(inference_lse[0], inference))
        self.assertTrue(torch.equal(inference_lse[1], flashgen.attention(q, k, v, causal=True, return_lse=True)[1].detach()))
        self.assertTrue(torch.equal(inference_varlen, training_varlen.detach()))
        training.sum().backward()
        self.assertIsNotNone(q.grad)

    def test_errors_carry_flashgens_message(self):
        q, k, v = self.qkv(1, 5, 5, 3, 2, 16)
        with self.assertRaisesRegex(ValueError, r"k: shape\[2\] \(heads_kv\) is 2"):
            flashgen.attention(q, k, v)
        q, k, v = self.qkv(1, 5, 5, 2, 2, 16)
        with self.assertRaisesRegex(TypeError, "q: dtype is torch.float64"):
            flashgen.attention(q.double(), k, v)
        with self.assertRaisesRegex(TypeError, "k: dtype is torch.float16"):
            flashgen.attention(q, k.half(), v)
        with self.assertRaisesRegex(ValueError, "window_left"):
            flashgen.attention(q, k, v, window_size=(-3, 0))
        with self.assertRaisesRegex(ValueError, "softmax_scale"):
            flashgen.attention(q, k, v, softmax_scale=-1.0)


@unittest.skipUnless(HAS_COMPILE, "torch.compile of flashgen needs torch >= 2.4 (custom_op)")
class CompileTest(TorchTestCase):
    def check_compiled_matches_eager(self, dtype, device):
        q, k, v = self.qkv(2, 64, 64, 4, 2, 64, dtype, device)
        w = self.randn(q.shape, dtype, device)

        def step(q, k, v):
            o, lse = flashgen.attention(q, k, v, causal=True, return_lse=True)
            return (o.float() * w.float()).sum() + lse.sum()

        compiled = torch.compile(step, fullgraph=True)
        results = []
        for fn in (step, compiled):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            loss = fn(*leaves)
            loss.backward()
            results.append([loss] + [t.grad for t in leaves])
        for name, eager, traced in zip(("loss", "dq", "dk", "dv"), *results):
            torch.testing.assert_close(traced, eager, rtol=2e-2, atol=2e-2, msg=lambda m: f"{name}: {m} {self.where()}")

    def test_compile_fullgraph_cpu(self):
        self.check_compiled_matches_eager(torch.float32, "cpu")

    @unittest.skipUnless(HAS_CUDA, "no CUDA device")
    def test_compile_fullgraph_cuda(self):
        self.check_compiled_matches_eager(torch.bfloat16, "cuda")


@unittest.skipUnless(HAS_CUDA, "no CUDA device")
class CudaTest(TorchTestCase):
    def run_cases(self, dtype):
        for case, (shape, options) in CASES.items():
            with self.subTest(case=case):
                self.check_against_reference(case, *self.qkv(*shape, dtype=dtype, device="cuda"), options)

    def test_float16(self):
        self.run_cases(torch.float16)

    def test_bfloat16(self):
        self.run_cases(torch.bfloat16)

    def test_packed_qkv(self):
        qkv = self.randn((2, 131, 3, 8, 128), torch.bfloat16, "cuda")
        q, k, v = qkv.unbind(dim=2)
        self.check_against_reference("packed_qkv", q, k, v, {"causal": True})

    def test_runs_on_the_current_stream(self):
        q, k, v = self.qkv(2, 256, 256, 4, 4, 64, torch.bfloat16, "cuda")
        expected = flashgen.attention(q, k, v, causal=True)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            # Inputs written on the side stream just before: reading them on another stream would race.
            q2, k2, v2 = q * 1, k * 1, v * 1
            got = flashgen.attention(q2, k2, v2, causal=True)
        torch.cuda.current_stream().wait_stream(side)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)

    def test_float32_is_unsupported_on_cuda(self):
        q, k, v = self.qkv(1, 8, 8, 2, 2, 64, torch.float32, "cuda")
        with self.assertRaisesRegex(NotImplementedError, "fp32"):
            flashgen.attention(q, k, v)


if __name__ == "__main__":
    unittest.main()
