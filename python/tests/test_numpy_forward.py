"""flashgen.numpy.attention_forward (CPU backend) against standard attention in float64."""
import unittest

import numpy as np

import support
from reference import standard_attention

import flashgen.numpy as fgnp

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim) and options; odd sizes on purpose.
CASES = {
    "plain": ((2, 37, 53, 3, 3, 40), {}),
    "head_dim_1": ((1, 5, 7, 2, 2, 1), {}),
    "causal_square": ((2, 41, 41, 2, 2, 32), {"causal": True}),
    "causal_more_queries_than_keys": ((1, 45, 19, 2, 1, 24), {"causal": True}),
    "causal_more_keys_than_queries": ((2, 17, 61, 4, 2, 16), {"causal": True}),
    "gqa": ((1, 29, 33, 6, 2, 48), {}),
    "mqa": ((2, 13, 27, 4, 1, 8), {"causal": True}),
    "window": ((1, 50, 50, 2, 2, 16), {"window_size": (5, 3)}),
    "window_left_only_uneven": ((1, 23, 40, 2, 1, 16), {"window_size": (6, -1)}),
    "window_and_causal": ((2, 31, 31, 2, 2, 16), {"window_size": (9, -1), "causal": True}),
    "softcap": ((1, 33, 35, 2, 2, 32), {"softcap": 2.0, "softmax_scale": 0.6}),
    "softcap_causal_gqa": ((1, 21, 26, 4, 2, 32), {"softcap": 5.0, "causal": True}),
    "explicit_scale": ((1, 19, 23, 2, 2, 64), {"softmax_scale": 0.37}),
}


class ForwardTest(support.SeededTestCase):
    def check(self, case, dtype, q, k, v, options):
        o, lse = fgnp.attention_forward(q, k, v, **options)
        exact = standard_attention(q, k, v, **options)
        same = standard_attention(q, k, v, **options, compute=np.float32, round_to=dtype)
        self.assertEqual(o.dtype, np.dtype(dtype))
        self.assertEqual(lse.dtype, np.float32)
        self.assert_by_rule(f"{case} o", o, exact["o"], same["o"], dtype)
        self.assert_by_rule(f"{case} lse", lse, exact["lse"], same["lse"], np.float32)
        return o, lse

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

    def test_rows_without_keys_give_zero_and_minus_infinity(self):
        # Bottom-right causal: query i sees keys j <= i + 10 - 16, so the first 6 rows see none.
        q, k, v = self.qkv(2, 16, 10, 2, 2, 8)
        o, lse = fgnp.attention_forward(q, k, v, causal=True)
        self.assertTrue(np.all(o[:, :6] == 0), f"o of rows without keys {self.where()}")
        self.assertTrue(np.all(lse[:, :, :6] == -np.inf), f"lse of rows without keys {self.where()}")
        self.assertTrue(np.all(np.isfinite(o[:, 6:])) and np.all(np.isfinite(lse[:, :, 6:])), self.where())

    def test_strided_views_are_read_in_place(self):
        # q: heads 1 and 3 of a (b, s, h, d) buffer; k, v: from one packed (b, s, 2, h, d) buffer;
        # plus a q stored as (b, h, s, d) and viewed as (b, s, h, d).
        base = self.randn((2, 21, 4, 32))
        kv = self.randn((2, 25, 2, 2, 32))
        q, k, v = base[:, :, 1::2], kv[:, :, 0], kv[:, :, 1]
        self.check("strided", np.float32, q, k, v, {"causal": True})
        q_bhsd = self.randn((2, 2, 21, 32)).transpose(0, 2, 1, 3)
        self.check("transposed", np.float32, q_bhsd, k, v, {})

    def test_inputs_without_contiguous_last_dimension_are_copied(self):
        q = self.randn((1, 11, 2, 32))[..., ::2]
        k = self.randn((1, 13, 2, 16))[:, ::-1]  # negative stride
        v = np.asfortranarray(self.randn((1, 13, 2, 16)))
        self.check("copied", np.float32, q, k, v, {"window_size": (4, 4)})

    def test_big_endian_inputs_are_read_as_numbers(self):
        # ">f4" / ">f2" arrays hold the same values in the other byte order: converted, not misread.
        for dtype in (np.float32, np.float16):
            with self.subTest(dtype=np.dtype(dtype).name):
                q, k, v = self.qkv(1, 9, 12, 2, 1, 16, dtype=dtype)
                swapped = [a.astype(a.dtype.newbyteorder(">")) for a in (q, k, v)]
                o, lse = fgnp.attention_forward(*swapped, causal=True)
                o_native, lse_native = fgnp.attention_forward(q, k, v, causal=True)
                self.assertTrue(np.array_equal(o, o_native, equal_nan=True), self.where())
                self.assertTrue(np.array_equal(lse, lse_native), self.where())
                self.assertTrue(o.dtype.isnative)

    def test_inputs_are_not_modified(self):
        q, k, v = self.qkv(1, 9, 9, 2, 2, 16)
        before = [a.copy() for a in (q, k, v)]
        fgnp.attention_forward(q, k, v, causal=True)
        for a, b in zip((q, k, v), before):
            self.assertTrue(np.array_equal(a, b), self.where())


if __name__ == "__main__":
    unittest.main()
