#!/usr/bin/env python3
"""Trains a small GPT from scratch with flashgen's attention and with PyTorch's
scaled_dot_product_attention (SDPA), same seed and same data order, and compares them.

    python examples/train_gpt.py --attn both --noise-baseline --out-dir out/train    # on a GPU
    python examples/train_gpt.py --tiny --device cpu --attn both --steps 10           # CI, CPU backend

Corpus: the Python standard library's .py sources of the running interpreter
(sysconfig.get_paths()['stdlib'], site-packages excluded), one byte per token
(vocabulary 256); a file goes to validation when the CRC32 of its path is 0 mod 20.
Model: GPT-2 style pre-LayerNorm blocks, learned positions, tied embedding and head.
Defaults: 6 layers, d_model 512, 8 heads (head_dim 64), context 1024, batch 32,
500 steps, AdamW (lr 1e-3, linear warm-up, cosine decay), bf16 autocast on CUDA.
--tiny: 2 layers, d_model 64, 2 heads, context 64, batch 8, 20 steps, fp32 on the CPU.

Each run reports its loss curve (train loss every --log-every steps, validation loss at
the end), tokens/s (after the first steps, which include kernel compilation), peak
memory (torch.cuda.max_memory_allocated) and its final losses. --noise-baseline runs
SDPA again, once per --noise-seeds seed (default: --seed again; another seed is another
initialisation and data order): the largest distance of these runs to the first SDPA
run is the run-to-run noise that flashgen's distance to SDPA is measured against. Writes
<out-dir>/train_gpt.json and a plot of the loss curves (matplotlib, if installed).

Works with torch >= 1.13 (no torch.compile needed); where torch has no SDPA (< 2.0),
the "sdpa" runs use the same standard attention written out in torch.
"""
import argparse
import json
import math
import pathlib
import sys
import sysconfig
import time
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import flashgen
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
    import flashgen

DEFAULTS = dict(steps=500, batch=32, context=1024, layers=6, d_model=512, heads=8, device="cuda",
                dtype="bfloat16", lr=1e-3, log_every=10, val_batches=16)
TINY = dict(steps=20, batch=8, context=64, layers=2, d_model=64, heads=2, device="cpu",
            dtype="float32", lr=3e-3, log_every=1, val_batches=4)
VOCAB = 256  # bytes


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attn", choices=("flashgen", "sdpa", "both"), default="both")
    p.add_argument("--noise-baseline", action="store_true", help="with --attn both: run SDPA again once per --noise-seeds seed")
    p.add_argument("--tiny", action="store_true", help="the tiny CPU configuration (explicit flags still win)")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--context", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--device", choices=("cuda", "cpu"))
    p.add_argument("--dtype", choices=("bfloat16", "float32"), help="autocast dtype (float32: no autocast)")
    p.add_argument("--lr", type=float)
    p.add_argument("--log-every", type=int)
    p.add_argument("--val-batches", type=int)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--noise-seeds", type=lambda text: [int(x) for x in text.split(",")], default=None,
                   help="comma-separated seeds of the repeated SDPA runs (default: --seed; other seeds measure "
                        "seed-to-seed noise)")
    p.add_argument("--out-dir", type=pathlib.Path, default=pathlib.Path("train_gpt_out"))
    p.add_argument("--plot", type=pathlib.Path, help="PNG path (default: <out-dir>/train_gpt.png)")
    args = p.parse_args(argv)
    for name, value in (TINY if args.tiny else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.d_model % args.heads:
        p.error(f"--d-model {args.d_model} is not a multiple of --heads {args.heads}")
    if args.noise_baseline and args.attn == "flashgen":
        p.error("--noise-baseline repeats the SDPA run: use it with --attn both or sdpa")
    return args


# --- data ---------------------------------------------------------------------------

def load_corpus():
    """(train bytes, validation bytes, description) from the standard library's sources."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    train, val = [], []
    for path in sorted(stdlib.rglob("*.py")):
        relative = path.relative_to(stdlib)
        if {"site-packages", "dist-packages"} & set(relative.parts) or not path.is_file():
            continue
        (val if zlib.crc32(str(relative).encode()) % 20 == 0 else train).append(path.read_bytes())
    train_bytes, val_bytes = b"\n".join(train), b"\n".join(val)
    info = {"stdlib": str(stdlib), "python": sys.version.split()[0], "train_files": len(train),
            "val_files": len(val), "train_tokens": len(train_bytes), "val_tokens": len(val_bytes)}
    return byte_tensor(train_bytes), byte_tensor(val_bytes), info


def byte_tensor(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def batch_at(data, offsets, context):
    """Inputs and next-byte targets of the windows starting at `offsets`."""
    windows = data[offsets[:, None] + torch.arange(context + 1, device=data.device)].long()
    return windows[:, :-1], windows[:, 1:]


# --- model --------------------------------------------------------------------------

def flashgen_attention(q, k, v):
    return flashgen.attention(q, k, v, causal=True)


def sdpa_attention(q, k, v):
    """SDPA on (batch, seqlen, heads, head_dim); standard attention where torch < 2.0 lacks SDPA."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if hasattr(F, "scaled_dot_product_attention"):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        future = torch.ones(q.size(2), k.size(2), dtype=torch.bool, device=q.device).triu(1)
        o = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
    return o.transpose(1, 2)


ATTENTION = {"flashgen": flashgen_attention, "sdpa": sdpa_attention}


class SelfAttention(nn.Module):
    def __init__(self, d_model, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        batch, seqlen, d_model = x.shape
        # (batch, seqlen, 3, heads, head_dim) unbound into strided q, k, v: no copies.
        q, k, v = self.qkv(x).view(batch, seqlen, 3, self.heads, d_model // self.heads).unbind(dim=2)
        return self.proj(self.attend(q, k, v).reshape(batch, seqlen, d_model))


class Block(nn.Module):
    def __init__(self, d_model, heads, attend):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, heads, attend)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, d_model, heads, context, attend):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, d_model)
        self.positions = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, attend) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's init; residual projections scaled by depth
                residual = name.endswith("proj.weight") or name.endswith("mlp.2.weight")
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers) if residual else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.size(1), device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tokens.weight.t()  # logits, head tied to the embedding


# --- training -----------------------------------------------------------------------

def learning_rate(step, args):
    warmup = max(1, args.steps // 20)
    if step < warmup:
        return args.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, args.steps - warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(name, attn, args, train_data, val_data, device, seed):
    """One run from `seed`; returns its record for the summary."""
    torch.manual_seed(seed)  # same initial weights for every run of the same seed
    model = GPT(args.layers, args.d_model, args.heads, args.context, ATTENTION[attn]).to(device)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))
    autocast = dict(device_type=device.type, dtype=torch.bfloat16, enabled=args.dtype == "bfloat16")
    # The same windows in the same order for every run.
    offsets = torch.randint(0, len(train_data) - args.context - 1, (args.steps, args.batch),
                            generator=torch.Generator().manual_seed(seed)).to(device)

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    timed_from = min(5, args.steps - 1)  # the first steps compile kernels and warm allocators
    losses, curve = [], []
    for step in range(args.steps):
        if step == timed_from:
            synchronize(device)
            start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        x, y = batch_at(train_data, offsets[step], args.context)
        with torch.autocast(**autocast):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.detach())
        if step % args.log_every == 0 or step == args.steps - 1:
            curve.append([step, loss.item()])
            print(f"  {name:14s} step {step:4d}  train loss {curve[-1][1]:.4f}", flush=True)
    synchronize(device)
    seconds = time.perf_counter() - start
    tokens_per_s = (args.steps - timed_from) * args.batch * args.context / seconds
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None

    model.eval()
    val_offsets = torch.linspace(0, len(val_data) - args.context - 1, args.val_batches * args.batch).long()
    val_losses = []
    with torch.no_grad(), torch.autocast(**autocast):
        for chunk in val_offsets.to(device).split(args.batch):
            x, y = batch_at(val_data, chunk, args.context)
            val_losses.append(F.cross_entropy(model(x).float().view(-1, VOCAB), y.reshape(-1)).item())
    tail = max(1, args.steps // 10)
    return {
        "name": name, "attn": attn, "seed": seed, "train_curve": curve,
        "final_train_loss": torch.stack(losses[-tail:]).mean().item(),  # mean of the last 10% of steps
        "val_loss": sum(val_losses) / len(val_losses), "tokens_per_s": tokens_per_s,
        "peak_memory_bytes": peak, "train_seconds": seconds,
    }


# --- report -------------------------------------------------------------------------

def summary_table(runs):
    lines = [f"{'run':16s} {'final train':>11s} {'val loss':>9s} {'tokens/s':>10s} {'peak MiB':>9s}"]
    for r in runs:
        peak = "-" if r["peak_memory_bytes"] is None else f"{r['peak_memory_bytes'] / 2**20:.0f}"
        lines.append(f"{r['name']:16s} {r['final_train_loss']:11.4f} {r['val_loss']:9.4f} "
                     f"{r['tokens_per_s']:10.0f} {peak:>9s}")
    return "\n".join(lines)


def differences(runs):
    """Val and final-train loss differences to the first SDPA run."""
    by_name = {r["name"]: r for r in runs}
    if "sdpa" not in by_name:
        return {}
    base = by_name["sdpa"]
    return {f"{r['name']} - sdpa": {"val_loss": r["val_loss"] - base["val_loss"],
                                    "final_train_loss": r["final_train_loss"] - base["final_train_loss"]}
            for r in runs if r is not base}


def verdict(runs):
    """flashgen's val-loss distance to SDPA against the largest distance of SDPA's repeats."""
    diffs = differences(runs)
    gap = diffs.get("flashgen - sdpa", {}).get("val_loss")
    noise = [abs(d["val_loss"]) for name, d in diffs.items() if name.startswith("sdpa (")]
    if gap is None or not noise:
        return ""
    within = abs(gap) <= max(noise)
    return (f"val loss |flashgen - sdpa| = {abs(gap):.4f} {'<=' if within else '>'} run-to-run noise "
            f"{max(noise):.4f} (largest |sdpa repeat - sdpa| of {len(noise)}): "
            f"{'within' if within else 'outside'} the noise")


def plot(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot at {path}")
        return
    fig, (losses, gaps) = plt.subplots(1, 2, figsize=(12, 4.5))
    sdpa = next((dict(r["train_curve"]) for r in runs if r["name"] == "sdpa"), None)
    for r in runs:
        steps, values = zip(*r["train_curve"])
        line, = losses.plot(steps, values, label=f"{r['name']} (val {r['val_loss']:.3f})", linewidth=1)
        losses.scatter([steps[-1]], [r["val_loss"]], color=line.get_color(), marker="x")
        if sdpa is not None and r["name"] != "sdpa":
            gaps.plot(steps, [v - sdpa[s] for s, v in zip(steps, values)], label=f"{r['name']} - sdpa",
                      color=line.get_color(), linewidth=1)
    losses.set(xlabel="step", ylabel="train loss (nats/byte); x: val loss", title="byte-level GPT on the Python stdlib")
    losses.legend()
    gaps.axhline(0, color="gray", linewidth=0.5)
    gaps.set(xlabel="step", ylabel="train loss difference", title="difference to SDPA (same seed, same data)")
    gaps.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device; use --device cpu (or --tiny)")
    names = {"flashgen": ["flashgen"], "sdpa": ["sdpa"], "both": ["flashgen", "sdpa"]}[args.attn]
    noise_seeds = (args.noise_seeds or [args.seed]) if args.noise_baseline else []
    plan = [(name, args.seed) for name in names] + [(f"sdpa (seed {s})", s) for s in noise_seeds]

    train_data, val_data, corpus = load_corpus()
    train_data, val_data = train_data.to(device), val_data.to(device)
    print(f"corpus: {corpus['train_tokens']} train / {corpus['val_tokens']} val bytes from {corpus['stdlib']}; "
          f"{args.layers} layers, d_model {args.d_model}, {args.heads} heads, context {args.context}, "
          f"batch {args.batch}, {args.steps} steps, {args.dtype} on {device}", flush=True)
    runs = [train(name, name.split()[0], args, train_data, val_data, device, seed) for name, seed in plan]

    config = {k: getattr(args, k) for k in (*DEFAULTS, "seed", "noise_seeds", "tiny", "noise_baseline")}
    summary = {
        "config": config, "corpus": corpus, "torch": torch.__version__, "flashgen": flashgen.library_version(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "sdpa": "F.scaled_dot_product_attention" if hasattr(F, "scaled_dot_product_attention")
                else "standard attention in torch (this torch has no SDPA)",
        "runs": runs, "differences": differences(runs), "verdict": verdict(runs),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "train_gpt.json").write_text(json.dumps(summary, indent=1))
    plot(runs, args.plot or args.out_dir / "train_gpt.png")
    print(f"summary: {args.out_dir / 'train_gpt.json'}")
    print(summary_table(runs))
    for name, d in summary["differences"].items():
        print(f"{name}: val loss {d['val_loss']:+.4f}, final train loss {d['final_train_loss']:+.4f}")
    if summary["verdict"]:
        print(summary["verdict"])


if __name__ == "__main__":
    main()
