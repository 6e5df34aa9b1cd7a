"""flashgen.numpy.attention_backward (CPU backend): against standard attention's
gradients in float64, and against finite differences of attention_forward."""
import unittest

import numpy as np

import support
from reference import standard_attention
from test_numpy_forward import CASES

import flashgen.numpy as fgnp


class BackwardTest(support.SeededTestCase):
    def gradients(self, q, k, v, dout, options, deterministic=False):
        o, lse = fgnp.attention_forward(q, k, v, **options)
        return fgnp.attention_backward(dout, q, k, v, o, lse, deterministic=deterministic, **options)

    def check(self, case, dtype, q, k, v, options):
        dout = self.randn(q.shape, dtype)
        dq, dk, dv = self.gradients(q, k, v, dout, options)
        exact = standard_attention(q, k, v, dout, **options)
        same = standard_attention(q, k, v, dout, **options, compute=np.float32, round_to=dtype)
        for name, got in (("dq", dq), ("dk", dk), ("dv", dv)):
            self.assertEqual(got.dtype, np.dtype(dtype), name)
            self.assert_by_rule(f"{case} {name}", got, exact[name], same[name], dtype)

    def run_cases(self, dtype):
        for case, (shape, options) in CASES.items():
            with self.subTest(case=case):
                self.check(case, dtype, *self.qkv(*shape, dtype=dtype), options)

    def test_float32(self):
        self.run_cases(np.float32)

    def test_float16(self):
        self.run_cases(np.float16)

    @unittest.skipIf(support.BFLOAT16 is None, "ml_dtypes (numpy bfloat16) is not installed")
    def test_bfloat16(self):
        self.run_cases(support.BFLOAT16)

    def test_rows_without_keys_have_zero_gradients(self):
        q, k, v = self.qkv(1, 14, 9, 2, 1, 16)  # causal: rows 0..4 see no key
        dq, dk, dv = self.gradients(q, k, v, self.randn(q.shape), {"causal": True})
        self.assertTrue(np.all(dq[:, :5] == 0), f"dq of rows without keys {self.where()}")
        for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
            self.assertTrue(np.all(np.isfinite(g)), f"{name} has non-finite entries {self.where()}")

    def test_strided_and_broadcast_dout(self):
        q, k, v = self.qkv(2, 17, 23, 4, 2, 32)
        options = {"causal": True}
        # dout of sum(o * w) with w broadcast over the batch (stride 0), and a transposed dout.
        w = np.broadcast_to(self.randn((1, 17, 4, 32)), q.shape)
        transposed = self.randn((2, 4, 17, 32)).transpose(0, 2, 1, 3)
        for name, dout in (("broadcast", w), ("transposed", transposed)):
            with self.subTest(dout=name):
                dq, dk, dv = self.gradients(q, k, v, dout, options)
                exact = standard_attention(q, k, v, np.ascontiguousarray(dout), **options)
                same = standard_attention(q, k, v, np.ascontiguousarray(dout), **options, compute=np.float32)
                for g, key in ((dq, "dq"), (dk, "dk"), (dv, "dv")):
                    self.assert_by_rule(f"{name} {key}", g, exact[key], same[key], np.float32)

    def test_matches_finite_differences_of_forward(self):
        # Gradcheck in the C API's widest type (float32): the directional derivative of
        # L = sum(w * o) along a random direction u, by central differences, must equal
        # <grad, u>. Step h balances truncation (h^2) against float32 rounding (eps / h).
        cases = {"causal_gqa": ((1, 9, 12, 4, 2, 8), {"causal": True}),
                 "softcap_window": ((1, 11, 11, 2, 2, 8), {"softcap": 1.5, "softmax_scale": 0.8, "window_size": (3, 2)})}
        h = 3e-3
        for case, (shape, options) in cases.items():
            q, k, v = self.qkv(*shape)
            w = self.randn(q.shape)
            grads = dict(zip("qkv", self.gradients(q, k, v, w, options)))

            def loss(q, k, v):
                o, _ = fgnp.attention_forward(q, k, v, **options)
                return float(np.sum(w.astype(np.float64) * o))

            for name in "qkv":
                with self.subTest(case=case, wrt=name):
                    u = self.randn(grads[name].shape)
                    inputs = {"q": q, "k": k, "v": v}
                    plus = dict(inputs, **{name: (inputs[name] + h * u).astype(np.float32)})
                    minus = dict(inputs, **{name: (inputs[name] - h * u).astype(np.float32)})
                    numeric = (loss(**plus) - loss(**minus)) / (2 * h)
                    analytic = float(np.sum(grads[name].astype(np.float64) * u))
                    tolerance = 2e-3 * max(1.0, abs(analytic))  # observed errors: < 5e-4
                    self.assertLessEqual(
                        abs(numeric - analytic), tolerance,
                        f"{case} d{name}: finite differences {numeric:.6g} vs backward {analytic:.6g} {self.where()}",
                    )

    def test_deterministic_gradients_are_bitwise_reproducible(self):
        q, k, v = self.qkv(2, 67, 75, 4, 1, 32)
        dout = self.randn(q.shape)
        first = self.gradients(q, k, v, dout, {"causal": True}, deterministic=True)
        second = self.gradients(q, k, v, dout, {"causal": True}, deterministic=True)
        for name, a, b in zip(("dq", "dk", "dv"), first, second):
            self.assertTrue(np.array_equal(a, b), f"{name} differs between two deterministic runs {self.where()}")


if __name__ == "__main__":
    unittest.main()
