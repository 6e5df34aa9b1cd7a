"""Host time per Python call: a tiny attention (issue 15: 1 x 128 x 4 x 64, bf16) through each
of flashgen's Python entry points and through PyTorch SDPA, on CUDA tensors.

The kernels take a few microseconds, so a loop of calls is bound by the host: `issue` is the
time to enqueue one call (the loop without a synchronisation), `wall` the loop's time per call
including the final synchronisation. The split shows where the time goes: the custom operator
(torch.library dispatch), the torch.autograd.Function path and the library call underneath.
"""
import argparse
import json
import pathlib
import statistics
import time
import timeit

import torch
import torch.nn.functional as F

import flashgen
from flashgen import _library, flash_attn_interface, torch_op


def per_call_us(fns, calls, repeats):
    """name -> (issue us, wall us) per call: the median over `repeats` loops of `calls` calls. The
    entry points take turns loop by loop, so a drift of the host's speed (this machine's moved ~1.5x
    between sessions, and within one) weighs on all of them alike."""
    for fn in fns.values():
        for _ in range(20):
            fn()
    torch.cuda.synchronize()
    issue = {name: [] for name in fns}
    wall = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            issue[name].append((t1 - t0) / calls * 1e6)
            wall[name].append((t2 - t0) / calls * 1e6)
    return {name: (statistics.median(issue[name]), statistics.median(wall[name])) for name in fns}


def time_parts(q, k, v, options):
    """The pieces of torch_op._forward, each in a loop of its own (best of 5, us)."""
    o, lse = torch_op._outputs(q)
    torch_op._forward(q, k, v, *options)
    inputs = {"q": q, "k": k, "v": v}
    args = torch_op._cached_args("forward", (options[:6], True), inputs, None, {"o": o, "lse": lse})
    lib, runtime, stream = _library.library(), _library.runtime(), torch_op._stream(q)
    parts = {
        "torch.empty(shape, dtype=, device=)": lambda: torch.empty(q.shape, dtype=q.dtype, device=q.device),
        "torch.empty_like": lambda: torch.empty_like(q, memory_format=torch.contiguous_format),
        "Tensor.new_empty": lambda: q.new_empty((4, 128), dtype=torch.float32),
        "_outputs (o, lse)": lambda: torch_op._outputs(q),
        "_cached_args (a known signature)": lambda: torch_op._cached_args("forward", (options[:6], True), inputs, None,
                                                                          {"o": o, "lse": lse}),
        "flashgen_forward (ctypes, the C call)": lambda: lib.flashgen_forward(runtime, args.ref, stream),
    }
    rows = {}
    for name, fn in parts.items():
        us = min(timeit.repeat(fn, number=2000, repeat=5)) / 2000 * 1e6
        torch.cuda.synchronize()
        rows[name] = {"us": round(us, 2)}
        print(f"  {name:38} {us:7.2f}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--out", type=pathlib.Path, default=None, help="directory for python_call_overhead.json")
    p.add_argument("--parts", action="store_true", help="also time the pieces of one call (allocations, the "
                   "argument struct, the library call alone)")
    a = p.parse_args()

    torch.manual_seed(0)
    shape = (1, 128, 4, 64)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # SDPA's (batch, heads, seqlen, head_dim)
    options = (0.0, a.causal, -1, -1, 0.0, False, False, False)
    calls = {
        "sdpa": lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=a.causal),
        "flashgen.attention": lambda: flashgen.attention(q, k, v, causal=a.causal),
        "flash_attn_func": lambda: flash_attn_interface.flash_attn_func(q, k, v, causal=a.causal),
        "AttentionFunction.apply": lambda: torch_op.AttentionFunction.apply(q, k, v, *options),
        "_forward (library call only)": lambda: torch_op._forward(q, k, v, *options),
    }
    rows = {}
    print(f"{'entry point':32} {'issue us':>9} {'wall us':>9}")
    for name, (issue, wall) in per_call_us(calls, a.calls, a.repeats).items():
        rows[name] = {"issue_us": round(issue, 2), "wall_us": round(wall, 2)}
        print(f"{name:32} {issue:9.1f} {wall:9.1f}")
    # Issue 15's bar: flashgen's eager call at most SDPA's time.
    ratio = rows["flashgen.attention"]["wall_us"] / rows["sdpa"]["wall_us"]
    rows["flashgen.attention / sdpa"] = round(ratio, 3)
    print(f"flashgen.attention / sdpa: {ratio:.3f}")
    if a.parts:
        rows.update(time_parts(q, k, v, options))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "python_call_overhead.json").write_text(json.dumps(
            {"shape": shape, "causal": a.causal, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
