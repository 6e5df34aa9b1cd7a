#!/usr/bin/env python3
"""Long sequences: time and peak device memory of forward+backward, flashgen vs FA2.

B=1, H=16, D=128, bf16, causal (the long-sequence rows of ../shared/anchors/h200-peers.md).
"Extra" memory is the peak allocated beyond the tensors every implementation must hold
(q, k, v, o, dO, dq, dk, dv, lse): for flashgen it should be at most the fp32 dQ
accumulator (+ the D row sums) of the backward's workspace, i.e. O(N).

    FLASHGEN_LIBRARY=build/runtime/libflashgen.so PYTHONPATH=python \
        python3 bench/long_sequence.py --seqlens 4096,65536,262144
"""
import argparse
import json
import pathlib
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import flashgen  # noqa: E402

B, H, D = 1, 16, 128


def gib(x):
    return x / 2**30


def run(impl, n):
    torch.cuda.empty_cache()
    gen = torch.Generator(device="cuda").manual_seed(n)
    shape = (B, n, H, D)
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    if impl == "flashgen":
        o = flashgen.attention(q, k, v, causal=True)
    else:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            ).transpose(1, 2)
    o.backward(do)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    required = 4 * q.numel() * 2 + B * H * n * 4  # o, dq, dk, dv in bf16 + lse fp32
    extra = torch.cuda.max_memory_allocated() - base - required
    dq_accum = B * H * ((n + 127) // 128 * 128) * D * 4
    ok = all(torch.isfinite(t.grad).all().item() for t in (q, k, v))
    return {"impl": impl, "N": n, "seconds": seconds, "extra_gib": gib(extra), "dq_accum_gib": gib(dq_accum),
            "finite": ok}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlens", default="4096,16384,65536,262144")
    ap.add_argument("--impls", default="flashgen,fa2")
    ap.add_argument("--out", default="build/bench")
    args = ap.parse_args()
    rows = []
    print(f"{'impl':>9} {'N':>8} {'fwd+bwd s':>10} {'extra GiB':>10} {'dQ acc GiB':>11} finite")
    for n in (int(s) for s in args.seqlens.split(",")):
        for impl in args.impls.split(","):
            try:
                r = run(impl, n)
            except Exception as e:  # keep going: report and mark n/a
                r = {"impl": impl, "N": n, "error": str(e).splitlines()[0]}
                print(f"{impl:>9} {n:>8} n/a: {r['error']}")
                rows.append(r)
                continue
            rows.append(r)
            print(f"{impl:>9} {n:>8} {r['seconds']:>10.2f} {r['extra_gib']:>10.3f} {r['dq_accum_gib']:>11.3f} "
                  f"{r['finite']}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_sequence.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
