#!/usr/bin/env python3
"""One forward + backward of flashgen and of SDPA's flash backend (FA2) on the same inputs,
for a profiler (bench/profile.sh and bench/ncu_source.sh run it under Nsight Compute);
--impl fa4 runs FlashAttention-4 alone instead (../shared/anchors/fa4/ stages it), so that
its kernels are profiled on the same shapes.

    python3 bench/profile_step.py --dim 128 --seqlen 4096 [--causal] [--impl fa4]
"""
import argparse
import pathlib
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import flashgen  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--dim", type=int, default=128)
p.add_argument("--seqlen", type=int, default=4096)
p.add_argument("--total-tokens", type=int, default=16384)
p.add_argument("--causal", action="store_true")
p.add_argument("--impl", choices=("flashgen", "fa4"), default="flashgen",
               help="flashgen (and FA2 beside it, for comparison) or FlashAttention-4 alone")
a = p.parse_args()
b, h = a.total_tokens // a.seqlen, 2048 // a.dim
q, k, v, do = (torch.randn(b, a.seqlen, h, a.dim, device="cuda", dtype=torch.bfloat16) for _ in range(4))
for t in (q, k, v):
    t.requires_grad_(True)
if a.impl == "fa4":
    from flash_attn.cute.interface import flash_attn_func

    for _ in range(2):  # the first call compiles (CuTe DSL JIT); profile the second
        o = flash_attn_func(q, k, v, causal=a.causal)
        o = o[0] if isinstance(o, tuple) else o
        torch.autograd.grad(o, (q, k, v), do)
    torch.cuda.synchronize()
    sys.exit(0)
for _ in range(2):  # the first call compiles (JIT); the profiler sees both, filter by launch
    o = flashgen.attention(q, k, v, causal=a.causal)
    torch.autograd.grad(o, (q, k, v), do)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o2 = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=a.causal)
        torch.autograd.grad(o2, (q, k, v), do.transpose(1, 2))
torch.cuda.synchronize()
print("max |o_flashgen - o_fa2| =", (o - o2.transpose(1, 2)).abs().max().item())
