"""bench/ab_variants.py's parent (the GPU machine's A/B driver) with its per-variant children
faked: the environment each variant runs in, the interleaved rounds, the table and the summary
of means against the first variant. The children themselves need torch and a GPU."""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import unittest
from unittest import mock

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "ab_variants.py")


def load_ab_variants():
    spec = importlib.util.spec_from_file_location("ab_variants", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AbVariantsTest(unittest.TestCase):
    def setUp(self):
        self.ab = load_ab_variants()
        self.calls = []  # (variant's NVRTC flags, its FLASHGEN_LIBRARY) per child, in order

    def fake_child(self, argv, env, **kwargs):
        """A child's RESULT line: forward 100 TFLOP/s, +10 % with -DFLASHGEN_FAST=1; backward
        200, rising by 1 per child run so that rounds differ."""
        self.calls.append((env["FLASHGEN_NVRTC_FLAGS"], env.get("FLASHGEN_LIBRARY")))
        fast = "-DFLASHGEN_FAST=1" in env["FLASHGEN_NVRTC_FLAGS"]
        rows = [dict(d=64, causal=0, n=128, fwd=110.0 if fast else 100.0, bwd=200.0 + len(self.calls),
                     first_fwd=0.5, first_bwd=0.25)]
        return subprocess.CompletedProcess(argv, 0, stdout="RESULT " + json.dumps(rows) + "\n", stderr="")

    def run_main(self, variants, rounds):
        argv = [BENCH, "--variants", variants, "--dims", "64", "--seqlens", "128", "--causal", "0",
                "--rounds", str(rounds)]
        out = io.StringIO()
        with mock.patch.object(sys, "argv", argv), mock.patch.object(self.ab.subprocess, "run", self.fake_child), \
                mock.patch.object(self.ab, "template_text", lambda: "#ifndef FLASHGEN_FAST"), \
                contextlib.redirect_stdout(out):
            self.ab.main()
        return out.getvalue()

    def test_rounds_interleave_and_summary_compares_means(self):
        lib = os.path.abspath(__file__)  # any file stands in for another build's library
        text = self.run_main(f"base=FLASHGEN_LIBRARY={lib};fast=-DFLASHGEN_FAST=1", rounds=2)
        # base fast base fast: the base's library and no flags, then the flag on the library
        # the caller's environment names (ctest's build; none outside it).
        this_tree = os.environ.get("FLASHGEN_LIBRARY")
        self.assertEqual(self.calls, [("", lib), ("-DFLASHGEN_FAST=1", this_tree)] * 2)
        self.assertIn("base#2: d64c0n128 100/203", text)
        # fast's mean forward 110 against 100; backward (202 + 204) / 2 against (201 + 203) / 2.
        summary = text[text.index("mean over rounds"):]
        self.assertRegex(summary, r"64 0   128 \|   100 /   202 \| \+10\.0 / {2}\+0\.5 % \| spread  0\.0 /  1\.0 %")

    def test_a_macro_no_template_reads_is_refused(self):
        with self.assertRaises(SystemExit) as caught:
            self.run_main("base=;typo=-DFLASHGEN_FAZT=1", rounds=1)
        self.assertIn("-DFLASHGEN_FAZT is read by no file under templates/", str(caught.exception))
        self.assertEqual(self.calls, [])


if __name__ == "__main__":
    unittest.main()
