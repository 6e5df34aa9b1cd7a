"""Bad input raises the matching Python exception carrying flashgen's message."""
import unittest

import numpy as np

import support

import flashgen
import flashgen.numpy as fgnp
from flashgen._capi import Status


class ErrorTest(support.SeededTestCase):
    def setUp(self):
        super().setUp()
        self.q, self.k, self.v = self.qkv(1, 7, 9, 4, 2, 16)

    def assert_raises(self, exception, *fragments, call):
        with self.assertRaises(exception) as caught:
            call()
        message = str(caught.exception)
        for fragment in fragments:
            self.assertIn(fragment, message)
        return caught.exception

    def test_heads_not_divisible(self):
        e = self.assert_raises(
            ValueError, "k: shape[2] (heads_kv) is 3", "divisor",
            call=lambda: fgnp.attention_forward(self.q, self.k[:, :, :1].repeat(3, axis=2), self.v),
        )
        self.assertIsInstance(e, flashgen.InvalidArgumentError)
        self.assertEqual(e.status, Status.INVALID_ARGUMENT)

    def test_mismatched_shapes(self):
        self.assert_raises(ValueError, "v: shape[1] (seqlen_k) is 8", "expected 9",
                           call=lambda: fgnp.attention_forward(self.q, self.k, self.v[:, :8]))
        self.assert_raises(ValueError, "k: shape[3] (head_dim) is 8",
                           call=lambda: fgnp.attention_forward(self.q, self.k[..., :8], self.v[..., :8]))

    def test_rank(self):
        self.assert_raises(ValueError, "q: rank is 3", call=lambda: fgnp.attention_forward(self.q[0], self.k, self.v))
        self.assert_raises(ValueError, "q: rank is 5", call=lambda: fgnp.attention_forward(self.q[None], self.k, self.v))

    def test_empty_dimension(self):
        self.assert_raises(ValueError, "q: shape[1] (seqlen_q) is 0",
                           call=lambda: fgnp.attention_forward(self.q[:, :0], self.k, self.v))

    def test_options(self):
        forward = fgnp.attention_forward
        q, k, v = self.q, self.k, self.v
        self.assert_raises(ValueError, "window_left", "-2", call=lambda: forward(q, k, v, window_size=(-2, 0)))
        self.assert_raises(ValueError, "window_right", "-5", call=lambda: forward(q, k, v, window_size=(0, -5)))
        self.assert_raises(ValueError, "window_left", "int32", call=lambda: forward(q, k, v, window_size=(2**40, 0)))
        self.assert_raises(ValueError, "softcap", call=lambda: forward(q, k, v, softcap=-1.0))
        self.assert_raises(ValueError, "softmax_scale", call=lambda: forward(q, k, v, softmax_scale=-0.5))
        self.assert_raises(ValueError, "softmax_scale", call=lambda: forward(q, k, v, softmax_scale=float("inf")))

    def test_dtypes(self):
        q, k, v = self.q, self.k, self.v
        self.assert_raises(TypeError, "q: dtype is float64", call=lambda: fgnp.attention_forward(q.astype(np.float64), k, v))
        self.assert_raises(TypeError, "k: dtype is float16", "like q",
                           call=lambda: fgnp.attention_forward(q, k.astype(np.float16), v))
        self.assert_raises(TypeError, "q: dtype is int32",
                           call=lambda: fgnp.attention_forward(*(a.astype(np.int32) for a in (q, k, v))))

    def test_unsupported_head_dim(self):
        q, k, v = self.qkv(1, 2, 2, 1, 1, 1025)
        e = self.assert_raises(NotImplementedError, "head_dim", "1025", call=lambda: fgnp.attention_forward(q, k, v))
        self.assertIsInstance(e, flashgen.UnsupportedError)

    def test_backward_arguments(self):
        q, k, v = self.q, self.k, self.v
        o, lse = fgnp.attention_forward(q, k, v)
        dout = self.randn(q.shape)
        backward = fgnp.attention_backward
        self.assert_raises(ValueError, "lse: shape", call=lambda: backward(dout, q, k, v, o, lse[:, :2]))
        self.assert_raises(TypeError, "lse: dtype is float64", call=lambda: backward(dout, q, k, v, o, lse.astype(np.float64)))
        self.assert_raises(ValueError, "dout: shape[1] (seqlen_q) is 6", call=lambda: backward(dout[:, :6], q, k, v, o, lse))
        self.assert_raises(TypeError, "dout: dtype is float16", call=lambda: backward(dout.astype(np.float16), q, k, v, o, lse))


if __name__ == "__main__":
    unittest.main()
