"""The installed wheel on CUDA tensors, as a PyTorch user runs it (issue 16): run from outside the
source tree in a fresh virtual environment, no environment variables set. flashgen's forward and
backward against SDPA (bf16, causal, GQA), and FlashAttention-2's paged varlen call against
per-sequence SDPA; prints where the library and NVRTC were found. The first forward + backward
(d128 causal) is a variant of the kernel set the wheel ships: it must compile nothing (the cache
directory gains no entry) and its wall time is printed. Exit status 0 when all agree."""
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import flashgen
from flashgen.flash_attn_interface import flash_attn_varlen_func


def sdpa(q, k, v, causal):
    """SDPA on (batch, seqlen, heads, head_dim) tensors, GQA by repeating k and v; causal aligned
    bottom-right (query i sees keys up to i + seqlen_k - seqlen_q), as flashgen and FA2 align it."""
    group = q.shape[2] // k.shape[2]
    k, v = (t.repeat_interleave(group, dim=2) for t in (k, v))
    mask = None
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
    return out.transpose(1, 2)


def cached_kernels():
    """The entries of the cache directory in use, as the wheel's `flashgen cache ls` lists them."""
    command = pathlib.Path(sys.executable).parent / "flashgen"
    listing = subprocess.run([str(command), "cache", "ls"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listing.splitlines()[1:] if line.strip()}


def main():
    assert "FLASHGEN_LIBRARY" not in os.environ and "FLASHGEN_NVRTC" not in os.environ, "run with no flashgen variables"
    # A new user's empty cache: a kernel found at the first call comes from the wheel's set or a compile.
    os.environ["FLASHGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="flashgen-wheel-check-")
    library = flashgen.library_path()
    print(f"flashgen {flashgen.__version__} from {library}")
    assert "site-packages" in library, f"not the installed wheel's library: {library}"
    torch.manual_seed(0)
    errors = []
    q = torch.randn(2, 1000, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 1100, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    dout = torch.randn_like(q)
    # What a process pays once whatever the variant (torch's first custom-operator dispatch,
    # loading the library): a CPU call, which needs no kernel, before the timed one.
    tiny = [torch.randn(1, 4, 1, 8, requires_grad=True) for _ in range(3)]
    flashgen.attention(*tiny).sum().backward()
    before = cached_kernels()
    torch.cuda.synchronize()
    start = time.perf_counter()
    o = flashgen.attention(q, k, v, causal=True)
    grads = torch.autograd.grad(o, (q, k, v), dout)
    torch.cuda.synchronize()
    first_ms = (time.perf_counter() - start) * 1e3
    compiled = sorted(cached_kernels() - before)
    print(f"first forward + backward (d128 causal, shipped variant): {first_ms:.0f} ms, kernels compiled: "
          f"{', '.join(compiled) or 'none'}")
    if compiled:
        errors.append("the shipped kernel set was not used")
    ref = sdpa(q.float(), k.float(), v.float(), True)
    ref_grads = torch.autograd.grad(ref, (q, k, v), dout.float())
    for name, got, want in [("o", o, ref)] + list(zip(("dq", "dk", "dv"), grads, ref_grads)):
        error = (got.float() - want.float()).abs().max().item()
        print(f"{name}: max |flashgen - sdpa fp32| = {error:.4f}")
        if not error < 3e-2 * max(1.0, want.abs().max().item()):
            errors.append(name)

    # Packed queries over a paged cache: two sequences of 3 and 1 queries over 700 and 33 keys.
    lengths_q, lengths_k, page = [3, 1], [700, 33], 16
    cu_q = torch.tensor([0, 3, 4], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 700, 733], dtype=torch.int32, device="cuda")
    keys = [torch.randn(n, 2, 128, device="cuda", dtype=torch.bfloat16) for n in lengths_k]
    values = [torch.randn_like(t) for t in keys]
    pages_per_seq = (max(lengths_k) + page - 1) // page
    k_cache = torch.zeros(2 * pages_per_seq, page, 2, 128, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    table = torch.arange(2 * pages_per_seq, dtype=torch.int32, device="cuda").flip(0).view(2, pages_per_seq)
    for b, n in enumerate(lengths_k):
        for j in range(n):
            k_cache[table[b, j // page], j % page] = keys[b][j]
            v_cache[table[b, j // page], j % page] = values[b][j]
    qp = torch.randn(4, 8, 128, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        out = flash_attn_varlen_func(qp, k_cache, v_cache, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=True,
                                     block_table=table)
        for b in range(2):
            rows = slice(int(cu_q[b]), int(cu_q[b + 1]))
            want = sdpa(qp[None, rows].float(), keys[b][None].float(), values[b][None].float(), True)[0]
            error = (out[rows].float() - want).abs().max().item()
            print(f"paged varlen sequence {b}: max |flashgen - sdpa fp32| = {error:.4f}")
            if not error < 3e-2:
                errors.append(f"paged varlen {b}")
    if errors:
        print(f"FAILED: {', '.join(errors)}")
        return 1
    print("the wheel runs CUDA attention")
    return 0


if __name__ == "__main__":
    sys.exit(main())
