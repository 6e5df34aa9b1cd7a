#!/usr/bin/env python3
"""Long sequences: forward and backward time, TFLOP/s and peak device memory, flashgen vs FA2.

B=1, H=16, D=128, bf16, causal (the long-sequence rows of ../shared/anchors/h200-peers.md, and
issue 14's goals: N = 256k forward + backward, the forward's rate at N = 2^20 against its rate at
16k, and N = 2^21 on one H200). The kernels are compiled before any row is timed (a 16k call
per implementation, and shorter rows run twice), so the times are the kernels' alone. "Extra"
memory is the peak allocated beyond the tensors every implementation must hold (q, k, v, o, dO,
dq, dk, dv, lse): for flashgen it should be at most the fp32 dQ accumulator (+ the D row sums)
of the backward's workspace, i.e. O(N). FLOPs: causal, half of 4·B·H·N²·D forward, 2.5× that
backward (FlashAttention's counts).

    FLASHGEN_LIBRARY=build/runtime/libflashgen.so PYTHONPATH=python \
        python3 bench/long_sequence.py --seqlens 16384,262144,1048576
"""
import argparse
import json
import pathlib
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import flashgen  # noqa: E402

B, H, D = 1, 16, 128
WARM_N = 16384  # selection is the same from here on: one call compiles the long rows' kernels


def gib(x):
    return x / 2**30


def fwd_flops(n):
    return 2.0 * B * H * n * n * D  # causal: half of 4 B H N^2 D


def attention(impl, q, k, v):
    if impl == "flashgen":
        return flashgen.attention(q, k, v, causal=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        ).transpose(1, 2)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run(impl, n, device):
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
    gen = torch.Generator(device=device).manual_seed(n)
    shape = (B, n, H, D)
    dtype = torch.bfloat16 if cuda else torch.float32
    q, k, v, do = (torch.randn(shape, device=device, dtype=dtype, generator=gen) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    sync(device)
    base = torch.cuda.memory_allocated() if cuda else 0
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    o = attention(impl, q, k, v)
    sync(device)
    mid = time.perf_counter()
    o.backward(do)
    sync(device)
    end = time.perf_counter()
    required = 4 * q.numel() * q.element_size() + B * H * n * 4  # o, dq, dk, dv + lse fp32
    extra = torch.cuda.max_memory_allocated() - base - required if cuda else 0
    dq_accum = B * H * ((n + 127) // 128 * 128) * D * 4
    ok = all(torch.isfinite(t.grad).all().item() for t in (q, k, v))
    fwd_s, bwd_s = mid - start, end - mid
    return {"impl": impl, "N": n, "fwd_s": fwd_s, "bwd_s": bwd_s, "seconds": end - start,
            "fwd_tflops": fwd_flops(n) / fwd_s / 1e12, "bwd_tflops": 2.5 * fwd_flops(n) / bwd_s / 1e12,
            "extra_gib": gib(extra), "dq_accum_gib": gib(dq_accum), "finite": ok}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlens", default="4096,16384,65536,262144")
    ap.add_argument("--impls", default="flashgen,fa2")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run of the script (flashgen only)")
    ap.add_argument("--out", default="build/bench")
    args = ap.parse_args()
    device = torch.device(args.device)
    seqlens = [int(s) for s in args.seqlens.split(",")]
    impls = args.impls.split(",")
    rows, rate_16k = [], {}
    # Compile (JIT, autotune lookups) before timing: one call at the length the long rows select by.
    for impl in impls:
        if max(seqlens) >= WARM_N:
            run(impl, WARM_N, device)
    print(f"{'impl':>9} {'N':>8} {'fwd s':>8} {'bwd s':>8} {'fwd TF/s':>9} {'bwd TF/s':>9} {'fwd/16k':>8} "
          f"{'extra GiB':>10} {'dQ acc GiB':>11} finite")
    for n in seqlens:
        for impl in impls:
            try:
                if n < WARM_N:
                    run(impl, n, device)  # its own kernels: compiled by a first run
                r = run(impl, n, device)
            except Exception as e:  # keep going: report and mark n/a
                r = {"impl": impl, "N": n, "error": str(e).splitlines()[0]}
                print(f"{impl:>9} {n:>8} n/a: {r['error']}")
                rows.append(r)
                continue
            if n == WARM_N:
                rate_16k[impl] = r["fwd_tflops"]
            # Issue 14: no falloff with length (>= 0.9 of the 16k forward rate at 2^20).
            r["fwd_vs_16k"] = r["fwd_tflops"] / rate_16k[impl] if impl in rate_16k else None
            rows.append(r)
            ratio = f"{r['fwd_vs_16k']:8.2f}" if r["fwd_vs_16k"] is not None else f"{'-':>8}"
            print(f"{impl:>9} {n:>8} {r['fwd_s']:>8.3f} {r['bwd_s']:>8.3f} {r['fwd_tflops']:>9.1f} "
                  f"{r['bwd_tflops']:>9.1f} {ratio} {r['extra_gib']:>10.3f} {r['dq_accum_gib']:>11.3f} {r['finite']}",
                  flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_sequence.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
