#!/usr/bin/env python3
"""flashgen vs PyTorch SDPA (flash, cuDNN, optionally efficient and FlexAttention) on one GPU.

The grid of ../shared/anchors/h200-peers.md: bf16, total tokens B*N = 16384,
H = 2048 / D, D in {64, 128} x causal {0, 1} x N in {512 .. 16384} (--extra-dims adds
D 96 and 256 at N 1024, 4096, 16384). flashgen takes (B, N, H, D); SDPA takes
(B, H, N, D) as transposed views of the same data. Times are the median of
triton.testing.do_bench (which flushes L2 before every run). FLOPs: forward
4*B*H*N^2*D, halved when causal; backward 2.5x forward.

Prints a table (TFLOP/s per implementation, ratios flashgen/FA2 and
flashgen/cuDNN, max |o_flashgen - o_sdpa|) and writes compare_sdpa.json and
compare_sdpa.csv into --out (plots: bench/plot.py). An implementation that fails on a shape is
reported and marked n/a; the run goes on.

    FLASHGEN_LIBRARY=build/runtime/libflashgen.so PYTHONPATH=python \
        python3 bench/compare_sdpa.py --quick --out build/bench
"""
import argparse
import csv
import datetime
import json
import pathlib
import platform
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import flashgen  # noqa: E402

TOTAL_TOKENS = 16384
MODEL_WIDTH = 2048  # H * D
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
EXTRA_DIMS = [96, 256]
EXTRA_SEQLENS = [1024, 4096, 16384]


def parse_ints(text):
    return [int(x) for x in text.split(",") if x]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dims", type=parse_ints, default=[64, 128], help="head dims, e.g. 64,128")
    p.add_argument("--seqlens", type=parse_ints, default=None, help="sequence lengths, e.g. 512,4096")
    p.add_argument("--causal", choices=["0", "1", "both"], default="both")
    p.add_argument("--extra-dims", action="store_true", help="also D 96 and 256 (N 1024, 4096, 16384)")
    p.add_argument("--efficient", action="store_true", help="also SDPA's memory-efficient backend")
    p.add_argument("--flex", action="store_true", help="also FlexAttention (torch.compile'd)")
    p.add_argument("--fa4", action="store_true",
                   help="also FlashAttention-4 (flash-attn-4's flash_attn.cute; ../shared/anchors/fa4/ stages it)")
    p.add_argument("--math", action="store_true", help="also standard attention (SDPA's math backend, materialises P)")
    p.add_argument("--quick", action="store_true", help="D 128, N 1024 and 4096, fewer timing runs (< 60 s)")
    p.add_argument("--total-tokens", type=int, default=TOTAL_TOKENS, help="B * N")
    p.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    p.add_argument("--rep", type=int, default=100, help="do_bench repetition time, ms")
    p.add_argument("--commit", default=None, help="commit recorded in the JSON (default: git rev-parse HEAD)")
    p.add_argument("--traceback", action="store_true", help="print the full traceback of a failing implementation")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/bench"), help="output directory")
    args = p.parse_args()
    if args.quick:
        args.dims, args.seqlens, args.warmup, args.rep = [128], [1024, 4096], 10, 30
    return args


def shapes(args):
    """(D, causal, N) in table order."""
    causals = [False, True] if args.causal == "both" else [args.causal == "1"]
    grid = [(d, c, n) for d in args.dims for c in causals for n in (args.seqlens or SEQLENS)]
    if args.extra_dims:
        grid += [(d, c, n) for d in EXTRA_DIMS for c in causals for n in (args.seqlens or EXTRA_SEQLENS)]
    return grid


def forward_flops(batch, heads, seqlen, head_dim, causal):
    flops = 4 * batch * heads * seqlen * seqlen * head_dim
    return flops / 2 if causal else flops


# --- implementations: each maps (q, k, v) in (B, N, H, D) to o in (B, N, H, D) -------------

def flashgen_attention(causal):
    return lambda q, k, v: flashgen.attention(q, k, v, causal=causal)


def sdpa_attention(causal):
    def run(q, k, v):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
        return o.transpose(1, 2)

    return run


def flex_attention(causal, seqlen):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention, dynamic=False)
    mask = None
    if causal:
        mask = create_block_mask(lambda b, h, q, kv: q >= kv, B=None, H=None, Q_LEN=seqlen, KV_LEN=seqlen)

    def run(q, k, v):
        o = compiled(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=mask)
        return o.transpose(1, 2)

    return run


def fa4_attention(causal):
    from flash_attn.cute.interface import flash_attn_func

    def run(q, k, v):
        o = flash_attn_func(q, k, v, causal=causal)
        return o[0] if isinstance(o, tuple) else o

    return run


def implementations(args, causal, seqlen):
    """name -> (backend context for SDPA or None, function)."""
    impls = {
        "flashgen": (None, flashgen_attention(causal)),
        "fa2": (SDPBackend.FLASH_ATTENTION, sdpa_attention(causal)),
        "cudnn": (SDPBackend.CUDNN_ATTENTION, sdpa_attention(causal)),
    }
    if args.efficient:
        impls["efficient"] = (SDPBackend.EFFICIENT_ATTENTION, sdpa_attention(causal))
    if args.flex:
        impls["flex"] = (None, None)  # built lazily inside measure(): compiling may fail
    if args.fa4:
        impls["fa4"] = (None, None)  # imported lazily inside measure(): the import may fail
    if args.math:
        impls["math"] = (SDPBackend.MATH, sdpa_attention(causal))
    return impls


# --- measurement --------------------------------------------------------------------------

class Backend:
    """sdpa_kernel(backend) around everything an SDPA implementation runs; a no-op otherwise."""

    def __init__(self, backend):
        self.context = sdpa_kernel(backend) if backend is not None else None

    def __enter__(self):
        if self.context is not None:
            self.context.__enter__()

    def __exit__(self, *exc):
        if self.context is not None:
            return self.context.__exit__(*exc)
        return False


def bench(fn, args):
    return triton.testing.do_bench(fn, warmup=args.warmup, rep=args.rep, return_mode="median")


def measure(name, backend, fn, inputs, args, causal, seqlen):
    """Forward and backward times (ms), peak extra memory (GiB) and o; None where it failed."""
    q, k, v, dout = inputs
    result = {"fwd_ms": None, "bwd_ms": None, "peak_gib": None, "error": None, "o": None}
    try:
        if name == "flex":
            fn = flex_attention(causal, seqlen)
        if name == "fa4":
            fn = fa4_attention(causal)
        with Backend(backend), torch.no_grad():
            result["o"] = fn(q, k, v)  # first call: compiles, and the output for the spot check
            torch.cuda.synchronize()
            result["fwd_ms"] = bench(lambda: fn(q, k, v), args)
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        with Backend(backend):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            o = fn(*leaves)
            torch.autograd.grad(o, leaves, dout, retain_graph=True)
            torch.cuda.synchronize()
            result["peak_gib"] = (torch.cuda.max_memory_allocated() - base) / 2**30
            result["bwd_ms"] = bench(lambda: torch.autograd.grad(o, leaves, dout, retain_graph=True), args)
    except Exception as e:  # noqa: BLE001  (any failure of one implementation is reported, not fatal)
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        result["error"] = f"{type(e).__name__}: {first_line}"[:300]
        print(f"  {name}: failed: {result['error']}", flush=True)
        if args.traceback:
            traceback.print_exc()
    finally:
        torch.cuda.empty_cache()
    return result


def run_shape(args, head_dim, causal, seqlen):
    batch, heads = max(1, args.total_tokens // seqlen), MODEL_WIDTH // head_dim
    gen = torch.Generator(device="cuda").manual_seed(0)

    def randn(shape):
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)

    shape = (batch, seqlen, heads, head_dim)
    inputs = (randn(shape), randn(shape), randn(shape), randn(shape))
    fwd_flops = forward_flops(batch, heads, seqlen, head_dim, causal)
    rows, outputs = [], {}
    for name, (backend, fn) in implementations(args, causal, seqlen).items():
        r = measure(name, backend, fn, inputs, args, causal, seqlen)
        outputs[name] = r.pop("o")
        r.update(
            impl=name, head_dim=head_dim, causal=int(causal), seqlen=seqlen, batch=batch, heads=heads,
            dtype="bf16",
            fwd_tflops=fwd_flops / (r["fwd_ms"] * 1e-3) / 1e12 if r["fwd_ms"] else None,
            bwd_tflops=2.5 * fwd_flops / (r["bwd_ms"] * 1e-3) / 1e12 if r["bwd_ms"] else None,
        )
        rows.append(r)
    for r in rows:
        if r["impl"] == "flashgen":
            r["max_abs_diff"] = spot_check(outputs)
    return rows


def spot_check(outputs):
    """max |o_flashgen - o_sdpa| against the first SDPA backend that ran."""
    mine = outputs.get("flashgen")
    for name in ("fa2", "cudnn", "efficient"):
        if mine is not None and outputs.get(name) is not None:
            return (mine.float() - outputs[name].float()).abs().max().item()
    return None


# --- report -------------------------------------------------------------------------------

def fmt(x, spec=".0f"):
    return "n/a" if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b is None else a / b


def pair(a, b, spec):
    return f"{fmt(a, spec)} / {fmt(b, spec)}"


def print_table(rows_by_shape, impl_names, total_tokens):
    """One line per shape: fwd / bwd TFLOP/s per implementation, flashgen's ratios, spot check."""
    print(f"\nTFLOP/s fwd / bwd (bf16, B*N = {total_tokens}, H = {MODEL_WIDTH}/D)")
    peers = [n for n in ("fa2", "cudnn", "fa4") if n in impl_names]
    head = f"{'D':>4} {'c':>1} {'N':>6} |" + "".join(f" {n:>13}" for n in impl_names)
    head += "".join(f" | {'fg/' + n:>11}" for n in peers) + " | max|o-sdpa|"
    print(head)
    print("-" * len(head))
    for rows in rows_by_shape:
        by = {r["impl"]: r for r in rows}
        first = rows[0]
        line = f"{first['head_dim']:>4} {first['causal']:>1} {first['seqlen']:>6} |"
        for n in impl_names:
            r = by.get(n, {})
            line += f" {pair(r.get('fwd_tflops'), r.get('bwd_tflops'), '.0f'):>13}"
        fg = by.get("flashgen", {})
        for other in peers:
            o = by.get(other, {})
            ratios = [ratio(fg.get(k), o.get(k)) for k in ("fwd_tflops", "bwd_tflops")]
            line += f" | {pair(*ratios, '.2f'):>11}"
        line += f" | {fmt(fg.get('max_abs_diff'), '.2e')}"
        print(line, flush=True)


def environment(args):
    def git_commit():
        try:
            root = pathlib.Path(__file__).resolve().parents[1]
            return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "flashgen_library": flashgen.library_version(),
        "commit": args.commit or git_commit(),
        "host": platform.node(),
    }


def write_outputs(out_dir, env, rows):
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "compare_sdpa.json").write_text(json.dumps({"environment": env, "results": rows}, indent=1))
    fields = ["head_dim", "causal", "seqlen", "batch", "heads", "dtype", "impl", "fwd_ms", "bwd_ms", "fwd_tflops",
              "bwd_tflops", "peak_gib", "max_abs_diff", "error"]
    with open(out_dir / "compare_sdpa.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("compare_sdpa: needs a CUDA GPU")
    env = environment(args)
    start = time.perf_counter()
    print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    grid = shapes(args)
    rows_by_shape = []
    for head_dim, causal, seqlen in grid:
        print(f"D={head_dim} causal={int(causal)} N={seqlen} ...", flush=True)
        rows_by_shape.append(run_shape(args, head_dim, causal, seqlen))
        write_outputs(args.out, env, [r for rows in rows_by_shape for r in rows])  # partial results survive a crash
    impl_names = list(dict.fromkeys(r["impl"] for rows in rows_by_shape for r in rows))
    print_table(rows_by_shape, impl_names, args.total_tokens)
    print(f"\nwrote {args.out / 'compare_sdpa.json'} and {args.out / 'compare_sdpa.csv'} "
          f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
