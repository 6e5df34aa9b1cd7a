#!/usr/bin/env python3
"""PNG plots from bench/compare_sdpa.py's JSON.

For each (D, causal): TFLOP/s vs N, forward and backward side by side, one line
per implementation (tflops_d128_causal1.png). For each D where peak memory was
recorded: peak extra memory of forward+backward vs N on a log scale
(memory_d128_causal0.png); a shape an implementation ran out of memory on is
marked on the plot.

    python3 bench/plot.py build/bench/compare_sdpa.json --out docs/perf
"""
import argparse
import collections
import json
import pathlib

import matplotlib

matplotlib.use("Agg")  # files only; no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

STYLE = {  # stable colours per implementation across plots
    "flashgen": dict(color="tab:red", marker="o", linewidth=2.2),
    "fa2": dict(color="tab:blue", marker="s"),
    "cudnn": dict(color="tab:green", marker="^"),
    "efficient": dict(color="tab:purple", marker="v"),
    "flex": dict(color="tab:orange", marker="D"),
    "math": dict(color="tab:gray", marker="x"),
}
LABEL = {
    "flashgen": "flashgen",
    "fa2": "SDPA flash (FA2)",
    "cudnn": "SDPA cuDNN",
    "efficient": "SDPA mem-efficient",
    "flex": "FlexAttention",
    "math": "standard (SDPA math)",
}


def load(path):
    data = json.loads(pathlib.Path(path).read_text())
    return data.get("environment", {}), data["results"]


def group(results):
    """(head_dim, causal) -> impl -> rows sorted by seqlen."""
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in results:
        groups[(r["head_dim"], r["causal"])][r["impl"]].append(r)
    for impls in groups.values():
        for rows in impls.values():
            rows.sort(key=lambda r: r["seqlen"])
    return groups


def subtitle(env):
    parts = [env.get("gpu"), env.get("date", "")[:10], env.get("commit") and f"commit {env['commit']}"]
    return ", ".join(p for p in parts if p)


def seqlen_axis(ax, impls):
    """log2 x axis labelled with the measured sequence lengths as plain numbers."""
    seqlens = sorted({r["seqlen"] for rows in impls.values() for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqlens)
    ax.set_xticklabels([str(n) for n in seqlens], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("sequence length N")


def label(impl, rows, field):
    """The legend entry; an implementation without a single value says why."""
    name = LABEL.get(impl, impl)
    if any(r.get(field) for r in rows):
        return name
    errors = [r["error"] for r in rows if r.get("error")]
    return f"{name} (n/a: {errors[0][:40]})" if errors else f"{name} (n/a)"


def plot_tflops(key, impls, env, out_dir):
    head_dim, causal = key
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, field, title in zip(axes, ("fwd_tflops", "bwd_tflops"), ("forward", "backward")):
        for impl, rows in impls.items():
            points = [(r["seqlen"], r[field]) for r in rows if r.get(field)]
            xs, ys = zip(*points) if points else ((), ())
            ax.plot(xs, ys, label=label(impl, rows, field), **STYLE.get(impl, {}))
        seqlen_axis(ax, impls)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    axes[0].set_ylim(bottom=0)
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"bf16 attention, D={head_dim}, causal={causal} — {subtitle(env)}", fontsize=10)
    fig.tight_layout()
    path = out_dir / f"tflops_d{head_dim}_causal{causal}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_memory(key, impls, env, out_dir):
    head_dim, causal = key
    if not any(r.get("peak_gib") for rows in impls.values() for r in rows):
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    values = []
    for impl, rows in impls.items():
        points = [(r["seqlen"], r["peak_gib"]) for r in rows if r.get("peak_gib")]
        xs, ys = zip(*points) if points else ((), ())
        values += ys
        ax.plot(xs, ys, label=label(impl, rows, "peak_gib"), **STYLE.get(impl, {}))
        for r in rows:
            if r.get("error") and "OutOfMemory" in r["error"]:
                ax.annotate(f"{LABEL.get(impl, impl)}:\nout of memory", (r["seqlen"], 0.97), xycoords=("data", "axes fraction"),
                            ha="center", va="top", fontsize=7, color=STYLE.get(impl, {}).get("color", "k"))
    seqlen_axis(ax, impls)
    if max(values) > 10 * min(values):  # standard attention's O(N^2) next to O(N): log scale
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    else:
        ax.set_ylim(bottom=0, top=1.2 * max(values))
    ax.set_ylabel("peak extra memory, fwd+bwd (GiB)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"D={head_dim}, causal={causal} — {subtitle(env)}", fontsize=9)
    fig.tight_layout()
    path = out_dir / f"memory_d{head_dim}_causal{causal}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("json", type=pathlib.Path, help="compare_sdpa.json")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/bench/plots"), help="output directory")
    args = p.parse_args()
    env, results = load(args.json)
    args.out.mkdir(parents=True, exist_ok=True)
    for key, impls in sorted(group(results).items()):
        for path in (plot_tflops(key, impls, env, args.out), plot_memory(key, impls, env, args.out)):
            if path:
                print(f"wrote {path}")


if __name__ == "__main__":
    main()
