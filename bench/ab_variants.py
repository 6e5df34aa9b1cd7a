#!/usr/bin/env python3
"""Same-process-series A/B of kernel variants selected by FLASHGEN_NVRTC_FLAGS (-D macros):
flashgen backward (and forward) TFLOP/s per variant, one subprocess per variant.
    python3 bench/ab_variants.py --variants "A=-DX=0;B=-DX=1" --dims 64,128 --seqlens 4096,16384 --rounds 3
A variant may also set FLASHGEN_* variables, e.g. "old=FLASHGEN_LIBRARY=/tmp/base/libflashgen.so;new=".
--rounds R runs the whole list R times in turn (A B A B ...) and ends with each variant's mean
over its rounds against the first variant's, with the first variant's spread: on a GPU whose
run-to-run noise is +-5-8 % per cell (the H100 machines), one round cannot tell a 5 % change.
"""
import argparse, functools, json, os, re, statistics, subprocess, sys, time

def child(args):
    import torch, triton
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    import flashgen
    out = []
    for d in args.dims:
        for causal in args.causal:
            for n in args.seqlens:
                b, h = max(1, 16384 // n), 2048 // d
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v, do = (torch.randn((b, n, h, d), device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
                leaves = [t.requires_grad_() for t in (q, k, v)]
                t0 = time.perf_counter()
                o = flashgen.attention(*leaves, causal=bool(causal))
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                torch.autograd.grad(o, leaves, do, retain_graph=True)
                torch.cuda.synchronize()
                first = (t1 - t0, time.perf_counter() - t1)  # first forward, first backward (s): compiles
                bwd = triton.testing.do_bench(lambda: torch.autograd.grad(o, leaves, do, retain_graph=True),
                                              warmup=10, rep=args.rep, return_mode="median")
                with torch.no_grad():
                    fwd = triton.testing.do_bench(lambda: flashgen.attention(q, k, v, causal=bool(causal)),
                                                  warmup=10, rep=args.rep, return_mode="median")
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                out.append(dict(d=d, causal=causal, n=n, fwd=flops / fwd / 1e9, bwd=2.5 * flops / bwd / 1e9,
                                first_fwd=first[0], first_bwd=first[1]))
    print("RESULT " + json.dumps(out), flush=True)

@functools.cache
def template_text():
    """Every kernel template's text, for checking that a variant's -D macros exist."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "templates")
    return "".join(open(os.path.join(d, f)).read() for d, _, files in os.walk(root) for f in files)

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--variants", required=True)
    p.add_argument("--dims", default="64,128")
    p.add_argument("--seqlens", default="4096,16384")
    p.add_argument("--causal", default="0,1")
    p.add_argument("--rep", type=int, default=40)
    p.add_argument("--timeout", type=int, default=150, help="seconds per variant (a hung kernel ends its variant)")
    p.add_argument("--rounds", type=int, default=1, help="the variant list run this many times in turn")
    p.add_argument("--child", action="store_true")
    a = p.parse_args()
    a.dims = [int(x) for x in a.dims.split(",")]
    a.seqlens = [int(x) for x in a.seqlens.split(",")]
    a.causal = [int(x) for x in a.causal.split(",")]
    if a.child:
        return child(a)
    results = {}
    specs = [spec.split("=", 1) for spec in a.variants.split(";")]  # [name, flags]
    # A -D macro the kernel templates never read (a pending patch not applied) would make its
    # variant the unchanged kernels: refused before anything runs.
    for name, flags in specs:
        for macro in re.findall(r"-D\s*([A-Za-z_]\w*)", flags):
            if macro not in template_text():
                sys.exit(f"ab_variants.py: variant {name}: -D{macro} is read by no file under templates/ "
                         "(a pending patch not applied?)")
    for round_, (name, flags) in ((r, s) for r in range(a.rounds) for s in specs):
        if a.rounds > 1:
            name += f"#{round_ + 1}"
        # Words NAME=value with an upper-case FLASHGEN_ name set that variable (e.g. another
        # build's FLASHGEN_LIBRARY); the other words are the variant's NVRTC flags.
        words = flags.split()
        env_words = [w for w in words if re.fullmatch(r"FLASHGEN_[A-Z_]+=.*", w)]
        variables = dict(w.split("=", 1) for w in env_words)
        env = dict(os.environ, FLASHGEN_NVRTC_FLAGS=" ".join(w for w in words if w not in env_words))
        env.update(variables)
        # A library that is not there would leave the child on the default one: both variants
        # the same code, a measurement of nothing.
        lib = variables.get("FLASHGEN_LIBRARY")
        if lib is not None and not os.path.isfile(lib):
            sys.exit(f"ab_variants.py: variant {name}: FLASHGEN_LIBRARY={lib!r} is not a file")
        try:
            r = subprocess.run([sys.executable, __file__, "--child"] + sys.argv[1:], env=env, capture_output=True,
                               text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            print(name, f"timed out after {a.timeout} s")
            continue
        line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
        if not line:
            print(name, "failed:", r.stderr[-2000:])
            continue
        results[name] = json.loads(line[0][7:])
        # As it comes (a run cut short still shows what it measured): fwd / bwd TFLOP/s per shape.
        print(name + ": " + "  ".join(f"d{r['d']}c{r['causal']}n{r['n']} {r['fwd']:.0f}/{r['bwd']:.0f}"
                                      for r in results[name]), flush=True)
    names = list(results)
    if not names:
        sys.exit("ab_variants.py: no variant produced a result (their errors above)")
    print("   D c     N | " + " | ".join(f"{n:>15}" for n in names) + "   (fwd / bwd TFLOP/s)")
    for i, row in enumerate(results[names[0]]):
        cells = [f"{results[n][i]['fwd']:6.0f} / {results[n][i]['bwd']:6.0f}" for n in names]
        print(f"{row['d']:4} {row['causal']} {row['n']:5} | " + " | ".join(cells))
    print("first forward / first backward of each variant's first shape per (D, causal), ms (compiles):")
    for i, row in enumerate(results[names[0]]):
        if i and results[names[0]][i - 1]["d"] == row["d"] and results[names[0]][i - 1]["causal"] == row["causal"]:
            continue
        cells = [f"{1e3 * results[n][i]['first_fwd']:6.0f} / {1e3 * results[n][i]['first_bwd']:6.0f}" for n in names]
        print(f"{row['d']:4} {row['causal']} {row['n']:5} | " + " | ".join(cells))
    if a.rounds > 1:
        summarize(results, [name for name, _ in specs])

def summarize(results, bases):
    """Each variant's mean over its rounds, as a change against the first variant's mean, and the
    first variant's own spread ((max - min) / mean over its rounds): changes inside it are noise."""
    rounds = {b: [results[n] for n in results if n.split("#")[0] == b] for b in bases}
    if not rounds[bases[0]]:
        return
    print(f"mean over rounds; change against {bases[0]} (fwd / bwd), {bases[0]}'s own spread last:")
    for i, row in enumerate(rounds[bases[0]][0]):
        def mean(b, key):
            return statistics.mean(r[i][key] for r in rounds[b]) if rounds[b] else float("nan")
        ref = {k: mean(bases[0], k) for k in ("fwd", "bwd")}
        cells = [f"{100 * (mean(b, 'fwd') / ref['fwd'] - 1):+5.1f} / {100 * (mean(b, 'bwd') / ref['bwd'] - 1):+5.1f} %"
                 for b in bases[1:]]
        spread = [100 * (max(r[i][k] for r in rounds[bases[0]]) - min(r[i][k] for r in rounds[bases[0]])) / ref[k]
                  for k in ("fwd", "bwd")]
        print(f"{row['d']:4} {row['causal']} {row['n']:5} | {ref['fwd']:5.0f} / {ref['bwd']:5.0f} | " + " | ".join(cells)
              + f" | spread {spread[0]:4.1f} / {spread[1]:4.1f} %")

if __name__ == "__main__":
    main()
