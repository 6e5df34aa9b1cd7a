#!/usr/bin/env python3
"""Cold start: first-call latency of a new variant's forward and backward, with an empty cache.

Each variant runs in a fresh process with a fresh FLASHGEN_CACHE_DIR (nothing compiled yet,
nothing in memory), after a call on CPU tensors that pays what a process pays once (torch's
first custom-operator dispatch, loading the library; reported apart), twice: with inputs that require grad (the first forward starts the
backward's compiles beside its own: Runtime::prepare) and with that hint suppressed (the
backward compiles only when it arrives). Printed per variant: first forward, first backward
after it, their sum, and a warm forward + backward for scale (ms, wall, synchronised).

GPU machine (torch with CUDA):
    FLASHGEN_LIBRARY=build/runtime/libflashgen.so PYTHONPATH=python python3 bench/cold_start.py
With --packaged DIR the processes also have a package's kernel set (`ninja flashgen_packaged_kernels`
builds the wheel's into build/packaged-kernels): the first call of a variant it holds loads
its kernels instead of compiling them. Without it no package is used. With --substitute too, a
variant the set lacks runs its first calls on the set's kernels of the next head-dim class over
zero-padded copies while its own compile (FLASHGEN_SUBSTITUTE_KERNELS=1).
CPU machine (no GPU): the compile wall of each variant's kernels with `flashgen cache warm`
into an empty directory (forward, backward, both), the part of the cold start a GPU adds
nothing to:
    python3 bench/cold_start.py --cpu --cli build/tools/flashgen
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (name, head_dim, causal, window (left, right), softcap, dtype, deterministic): the default set
# and option-heavy ones.
VARIANTS = [
    ("d64_causal", 64, True, (-1, -1), 0.0, "bf16", False),
    ("d128", 128, False, (-1, -1), 0.0, "bf16", False),
    ("d128_causal", 128, True, (-1, -1), 0.0, "bf16", False),
    ("d256_causal", 256, True, (-1, -1), 0.0, "bf16", False),
    ("d112_window_softcap", 112, False, (256, 0), 30.0, "bf16", False),
    ("d96_window_softcap_fp16", 96, False, (256, 0), 30.0, "fp16", False),
    ("d128_causal_deterministic", 128, True, (-1, -1), 0.0, "bf16", True),
]
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def child(name, prepare):
    """Runs in the fresh process: one variant's first and warm calls, as JSON on stdout."""
    import torch

    sys.path.insert(0, str(ROOT / "python"))
    import flashgen
    from flashgen import torch_op

    _, d, causal, window, softcap, dtype, deterministic = next(v for v in VARIANTS if v[0] == name)
    b, n, h = 2, 2048, 16
    dtype = getattr(torch, TORCH_DTYPES[dtype])
    q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    if not prepare:  # no background compile starts: the backward compiles when it arrives
        torch_op._prepare_once = lambda *args: None
    torch.cuda.synchronize()

    # What the process pays once, whatever the variant: torch's first dispatch of a custom
    # operator (it imports torch._dynamo, sympy and more: 3-4 s on the GPU machine's fresh
    # image, whose site-packages have no .pyc yet), loading libflashgen and creating the
    # runtime. A forward and backward on CPU tensors pays it without compiling any kernel.
    start = time.perf_counter()
    tiny = [torch.randn(1, 4, 1, 8, requires_grad=True) for _ in range(3)]
    flashgen.attention(*tiny).sum().backward()
    process_once = (time.perf_counter() - start) * 1e3

    def timed(fn):
        start = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        return out, (time.perf_counter() - start) * 1e3

    def fwd():
        return flashgen.attention(q, k, v, causal=causal, window_size=window, softcap=softcap,
                                  deterministic=deterministic)

    o, first_fwd = timed(fwd)
    _, first_bwd = timed(lambda: o.backward(do))
    o, warm_fwd = timed(fwd)
    _, warm_bwd = timed(lambda: o.backward(do))
    print(json.dumps({"first_fwd_ms": first_fwd, "first_bwd_ms": first_bwd, "warm_ms": warm_fwd + warm_bwd,
                      "process_once_ms": process_once}))


def run_gpu(args):
    rows = []
    for name in args.chosen:
        for prepare in (True, False):
            with tempfile.TemporaryDirectory(prefix="flashgen-cold-") as cache:
                env = dict(os.environ, FLASHGEN_CACHE_DIR=cache, FLASHGEN_AUTOTUNE="off",
                           FLASHGEN_PACKAGED_KERNELS=args.packaged or "",
                           FLASHGEN_SUBSTITUTE_KERNELS="1" if args.substitute else "0")
                out = subprocess.run([sys.executable, __file__, "--child", name, "--prepare", str(int(prepare))],
                                     env=env, capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                print(f"{name}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                return 1
            r = json.loads(out.stdout.strip().splitlines()[-1])
            r.update(variant=name, prepare=prepare, packaged=args.packaged, substitute=args.substitute)
            rows.append(r)
            print(f"{name:25s} prepare={int(prepare)}  first fwd {r['first_fwd_ms']:7.0f} ms  first bwd "
                  f"{r['first_bwd_ms']:7.0f} ms  total {r['first_fwd_ms'] + r['first_bwd_ms']:7.0f} ms  "
                  f"(warm fwd+bwd {r['warm_ms']:.1f} ms; once per process before it: {r['process_once_ms']:.0f} ms)",
                  flush=True)
    return write(args, {"mode": "gpu", "rows": rows})


def run_cpu(args):
    rows = []
    for name, d, causal, window, softcap, dtype, deterministic in VARIANTS:
        if name not in args.chosen:
            continue
        row = {"variant": name}
        for passes in ("fwd", "bwd", "fwd,bwd"):
            with tempfile.TemporaryDirectory(prefix="flashgen-cold-") as cache:
                cmd = [args.cli, "cache", "warm", "--cache-dir", cache, "--head-dims", str(d), "--dtypes", dtype,
                       "--archs", "sm_90a", "--causal", "on" if causal else "off", "--passes", passes,
                       "--window", "on" if window != (-1, -1) else "off", "--softcap", "on" if softcap else "off",
                       "--deterministic", "on" if deterministic else "off", "--seqlens", "2k"]
                start = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                row[passes] = (time.perf_counter() - start) * 1e3
            if out.returncode != 0:
                print(f"{name} {passes}: {' '.join(cmd)} failed\n{out.stderr[-2000:]}", file=sys.stderr)
                return 1
        rows.append(row)
        print(f"{name:25s} compile wall: fwd {row['fwd']:6.0f} ms  bwd {row['bwd']:6.0f} ms  fwd+bwd "
              f"{row['fwd,bwd']:6.0f} ms ({os.cpu_count()} cores)", flush=True)
    return write(args, {"mode": "cpu", "cores": os.cpu_count(), "rows": rows})


def write(args, result):
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu", action="store_true", help="compile walls with `flashgen cache warm` (no GPU needed)")
    p.add_argument("--cli", default=str(ROOT / "build" / "tools" / "flashgen"), help="the flashgen CLI (--cpu)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--packaged", help="a package's kernel set for the GPU runs (FLASHGEN_PACKAGED_KERNELS)")
    p.add_argument("--substitute", action="store_true",
                   help="with --packaged: the next head-dim class's kernels stand in while a variant compiles")
    p.add_argument("--variants", help="only these variants (comma-separated names; default: all)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--prepare", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    names = [v[0] for v in VARIANTS]
    chosen = args.variants.split(",") if args.variants else names
    unknown = [n for n in chosen if n not in names]
    if unknown:
        p.error(f"--variants: unknown {', '.join(unknown)}; expected names from {', '.join(names)}")
    args.chosen = chosen
    if args.child:
        child(args.child, bool(args.prepare))
        return 0
    return run_cpu(args) if args.cpu else run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
