"""Shared test helpers: fresh random inputs per test (seed printed on failure) and
FlashAttention's error rule against the float64 reference."""
import os
import pathlib
import secrets
import sys
import unittest

import numpy as np

# The tests import the package from this checkout unless one is already importable.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

# Absolute slack of the error rule per dtype, on values of magnitude ~1.
SLACK = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


class SeededTestCase(unittest.TestCase):
    """Each test draws from its own generator; every failure message names the seed."""

    def setUp(self):
        self.seed = int(os.environ.get("FG_TEST_SEED", secrets.randbits(32)))
        self.rng = np.random.default_rng(self.seed)

    def where(self):
        return f"(seed {self.seed}; rerun with FG_TEST_SEED={self.seed})"

    def randn(self, shape, dtype=np.float32):
        return self.rng.standard_normal(shape).astype(dtype)

    def qkv(self, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype=np.float32):
        return (
            self.randn((batch, seqlen_q, heads_q, head_dim), dtype),
            self.randn((batch, seqlen_k, heads_kv, head_dim), dtype),
            self.randn((batch, seqlen_k, heads_kv, head_dim), dtype),
        )

    def assert_by_rule(self, name, got, exact, same_precision, dtype):
        """max|got - exact| <= 2 * max|same_precision - exact| + slack (scaled by the values' size).

        exact: float64 standard attention; same_precision: standard attention in the
        input precision; dtype: the input dtype or its name. -inf entries (lse of rows without keys) must match exactly.
        """
        got = np.asarray(got, dtype=np.float64)
        self.assertEqual(got.shape, exact.shape, f"{name}: shape {self.where()}")
        infinite = np.isinf(exact)
        self.assertTrue(
            np.array_equal(got[infinite], exact[infinite]),
            f"{name}: expected the same infinite entries as the reference {self.where()}",
        )
        finite = ~infinite
        error = np.max(np.abs(got[finite] - exact[finite]), initial=0.0)
        baseline = np.max(np.abs(same_precision[finite] - exact[finite]), initial=0.0)
        magnitude = max(1.0, np.max(np.abs(exact[finite]), initial=0.0))
        dtype_name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        bound = 2 * baseline + SLACK[dtype_name] * magnitude
        self.assertTrue(
            error <= bound,  # also false for NaN
            f"{name}: max error {error:.3g} exceeds {bound:.3g} (2 x standard attention in "
            f"{dtype_name}: {baseline:.3g}, plus slack) {self.where()}",
        )
