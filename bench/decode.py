#!/usr/bin/env python3
"""Decode-shaped attention on one GPU: flashgen vs PyTorch SDPA (flash, cuDNN) and, with
--fa4, FlashAttention-4, in the same process.

The rows of ../shared/anchors/h200-peers.md ("Decode"): bf16, D 128, 32 query heads,
8 KV heads, contiguous K/V in (B, seqlen, heads, D); seqlen_q 1 or 4 against long K/V.
Decode reads K and V once: the figure of merit is the bandwidth, bytes of q, k, v and o
over the time (the H200's copy ceiling is 4.24-4.3 TB/s). flashgen also runs on paged
copies of the same K/V (page sizes 16 and 256, pages in random order, through a block
table: flashgen.torch_op.kv_cache_forward); the peers have no paged path here. Times are the median of
triton.testing.do_bench (L2 flushed before every run). Each implementation's output is
checked against SDPA's flash backend (max |o - o_fa2|).

Prints a table (us and TB/s per implementation, flashgen / best peer) and writes
decode.json into --out.

    FLASHGEN_LIBRARY=build/runtime/libflashgen.so PYTHONPATH=python \\
        python3 bench/decode.py --out build/bench
"""
import argparse
import datetime
import json
import pathlib
import statistics
import subprocess
import sys
import traceback

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import flashgen  # noqa: E402
from flashgen.torch_op import kv_cache_forward  # noqa: E402

# (batch, seqlen_q, seqlen_k): h200-peers.md's decode rows, plus speculative decoding at 16.
ROWS = [(64, 1, 8192), (8, 1, 65536), (1, 1, 262144), (64, 4, 8192), (8, 16, 16384)]
HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
COPY_CEILING_TBS = 4.24
PAGE_SIZES = (16, 256)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fa4", action="store_true", help="also FlashAttention-4 (../shared/anchors/fa4/ stages it)")
    p.add_argument("--causal", action="store_true", help="bottom-right causal mask (decode's own)")
    p.add_argument("--warmup", type=int, default=20, help="do_bench warm-up, ms")
    p.add_argument("--rep", type=int, default=100, help="do_bench repetition time, ms")
    p.add_argument("--rounds", type=int, default=1, help="timings per implementation, taken in turns (median kept)")
    p.add_argument("--commit", default=None, help="commit recorded in the JSON (default: git rev-parse HEAD)")
    p.add_argument("--traceback", action="store_true", help="print the full traceback of a failing implementation")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/bench"), help="output directory")
    p.add_argument("--num-splits", default="", help="comma-separated split counts: flashgen forced to each "
                   "(ForwardArgs::num_splits) as columns split<n> beside its own choice")
    p.add_argument("--sequential-pages", action="store_true", help="also paged copies with pages in the "
                   "sequences' order (columns paged<n>seq) and the contiguous cache through kv_cache_forward (kvcache)")
    p.add_argument("--paged-splits", action="store_true", help="--num-splits also forced on the paged copies "
                   "(columns paged<p>split<n>)")
    p.add_argument("--rows", default="", help="only these rows, e.g. 8x16x16384,64x1x8192 (B x seqlen_q x seqlen_k)")
    return p.parse_args()


def sdpa(backend, causal):
    def run(q, k, v):
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=causal, enable_gqa=True)
        return o.transpose(1, 2)

    return run


def fa4(causal):
    from flash_attn.cute.interface import flash_attn_func

    def run(q, k, v):
        o = flash_attn_func(q, k, v, causal=causal)
        return o[0] if isinstance(o, tuple) else o

    return run


class Paged:
    """flashgen over a paged copy of k, v, made once per row outside the timing: pages in random
    order or (shuffled=False) in the sequences' own order, which tells the kernel's cost of
    paging from the memory system's cost of scattered pages."""

    def __init__(self, page_size, causal, shuffled=True, num_splits=0):
        self.page_size, self.causal, self.shuffled, self.cache = page_size, causal, shuffled, None
        self.num_splits = num_splits

    def __call__(self, q, k, v):
        if self.cache is None or self.cache[0] is not k:
            batch, seqlen = k.shape[:2]
            pages = seqlen // self.page_size
            order = (torch.randperm if self.shuffled else torch.arange)(batch * pages, device=k.device)
            shape = (batch * pages, self.page_size) + tuple(k.shape[2:])
            k_pages = torch.empty(shape, dtype=k.dtype, device=k.device)
            k_pages[order] = k.reshape(shape)
            v_pages = torch.empty_like(k_pages)
            v_pages[order] = v.reshape(shape)
            self.cache = (k, k_pages, v_pages, order.view(batch, pages).to(torch.int32))
        _, k_pages, v_pages, table = self.cache
        return kv_cache_forward(q, k_pages, v_pages, block_table=table, causal=self.causal,
                                num_splits=self.num_splits)[0]

    def clear(self):
        self.cache = None


def implementations(args):
    impls = {
        "flashgen": lambda q, k, v: flashgen.attention(q, k, v, causal=args.causal),
        **{f"paged{p}": Paged(p, args.causal) for p in PAGE_SIZES},
        "fa2": sdpa(SDPBackend.FLASH_ATTENTION, args.causal),
        "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION, args.causal),
    }
    if args.sequential_pages:
        impls.update({f"paged{p}seq": Paged(p, args.causal, shuffled=False) for p in PAGE_SIZES})
        impls["kvcache"] = lambda q, k, v: kv_cache_forward(q, k, v, causal=args.causal)[0]
    for n in filter(None, args.num_splits.split(",")):
        if args.paged_splits:
            impls.update({f"paged{p}split{n}": Paged(p, args.causal, num_splits=int(n)) for p in PAGE_SIZES})
        impls[f"split{n}"] = lambda q, k, v, n=int(n): kv_cache_forward(q, k, v, causal=args.causal, num_splits=n)[0]
    if args.fa4:
        impls["fa4"] = None  # imported on first use: the import may fail
    return impls


def commit_of(args):
    if args.commit:
        return args.commit
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def main():
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    impls = implementations(args)
    rows = []
    wanted = {tuple(int(x) for x in r.split("x")) for r in filter(None, args.rows.split(","))}
    for batch, seqlen_q, seqlen_k in [r for r in ROWS if not wanted or r in wanted]:
        torch.manual_seed(0)
        q = torch.randn(batch, seqlen_q, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(batch, seqlen_k, HEADS_KV, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        nbytes = 2 * (k.numel() + v.numel() + 2 * q.numel())
        row = {"batch": batch, "seqlen_q": seqlen_q, "seqlen_k": seqlen_k, "heads_q": HEADS_Q, "heads_kv": HEADS_KV,
               "head_dim": HEAD_DIM, "causal": args.causal, "bytes": nbytes, "results": {}}
        ref = o = None
        for name, fn in impls.items():
            try:
                if fn is None:
                    fn = impls[name] = fa4(args.causal)
                o = fn(q, k, v)
                if ref is None:
                    ref = sdpa(SDPBackend.FLASH_ATTENTION, args.causal)(q, k, v).float()
                err = (o.float() - ref).abs().max().item()
                row["results"][name] = {"max_err": err, "samples_us": []}
            except Exception as e:  # noqa: BLE001
                if args.traceback:
                    traceback.print_exc()
                row["results"][name] = {"error": repr(e)[:200]}
        # Rounds over every implementation in turn: a drift of the GPU's clocks or temperature
        # falls on all columns alike; each column keeps its median.
        for _ in range(args.rounds):
            for name, fn in impls.items():
                r = row["results"][name]
                if "error" in r:
                    continue
                try:
                    r["samples_us"].append(1e3 * triton.testing.do_bench(lambda: fn(q, k, v), warmup=args.warmup,
                                                                         rep=args.rep))
                except Exception as e:  # noqa: BLE001
                    r.clear()
                    r["error"] = repr(e)[:200]
        for r in row["results"].values():
            if "samples_us" in r:
                r["us"] = statistics.median(r["samples_us"])
                r["tbs"] = nbytes / r["us"] / 1e6
        del q, k, v, ref, o
        for fn in impls.values():  # drop the paged copies
            if isinstance(fn, Paged):
                fn.clear()
        torch.cuda.empty_cache()
        rows.append(row)
        print_row(row, impls, header=len(rows) == 1)

    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": commit_of(args), "gpu": torch.cuda.get_device_name(), "copy_ceiling_tbs": COPY_CEILING_TBS,
           "rows": rows}
    (args.out / "decode.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out / 'decode.json'}")


def ours(names):
    """flashgen's columns: its own choice, the paged copies, the forced split counts."""
    return [n for n in names if n in ("flashgen", "kvcache") or n.startswith(("paged", "split"))]


def print_row(row, impls, header):
    names = list(impls)
    if header:
        print(f"{'B':>3} {'sq':>3} {'sk':>7} | " + " | ".join(f"{n:>17}" for n in names) +
              " | best peer / flashgen (" + ", ".join(ours(names)) + ")")
    cells = []
    for n in names:
        r = row["results"].get(n, {})
        cells.append(f"{r['us']:7.0f} us {r['tbs']:4.2f} TB/s" if "us" in r else f"{'n/a':>17}")
    peers = [row["results"][n]["us"] for n in names if n not in ours(names) and "us" in row["results"].get(n, {})]
    ratio = " ".join(f"{min(peers) / row['results'][n]['us']:.2f}x" if peers and "us" in row["results"].get(n, {})
                     else "n/a" for n in ours(names))
    print(f"{row['batch']:>3} {row['seqlen_q']:>3} {row['seqlen_k']:>7} | " + " | ".join(cells) + f" | {ratio}",
          flush=True)


if __name__ == "__main__":
    main()
