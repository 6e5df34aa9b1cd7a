#!/usr/bin/env python3
"""Summarises Nsight Compute's source page (`ncu -i R --page source --csv --print-source sass`,
bench/ncu_source.sh): warp-state samples per opcode, and the hottest SASS instructions with
their leading stall reasons.

    python3 bench/ncu_source_summary.py fwd128-source.csv[.gz] [--top 40]
"""
import argparse
import collections
import csv
import gzip
import io
import re


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        lines = f.read().splitlines()
    # ncu may print a kernel line before the table; the table starts at the header naming "Source".
    start = next(i for i, line in enumerate(lines) if '"Source"' in line or line.startswith("Source,"))
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    rows = read_rows(a.csv)
    cols = list(rows[0].keys())
    sample_col = next(c for c in cols if "Warp Stall Sampling (All" in c)
    # Per-reason sample columns, where the page has them (stall_wait, ...).
    reason_cols = [c for c in cols if re.match(r"^(stall_|smsp__pcsamp_warps_issue_stalled_)", c)]
    exec_col = next((c for c in cols if c.startswith("Instructions Executed")), None)
    total = sum(number(r[sample_col]) for r in rows) or 1.0
    print(f"{len(rows)} SASS rows, {total:.0f} samples; columns: {', '.join(cols)}")

    by_op = collections.Counter()
    by_reason = collections.Counter()
    for r in rows:
        op = re.sub(r"^@!?U?P\w+\s+", "", r["Source"].strip()).split(" ")[0]
        by_op[op] += number(r[sample_col])
        for c in reason_cols:
            by_reason[c] += number(r[c])
    print("\nsamples by opcode:")
    for op, n in by_op.most_common(25):
        print(f"  {100 * n / total:5.1f} %  {op}")
    if by_reason:
        print("\nsamples by reason:")
        for c, n in by_reason.most_common(12):
            print(f"  {100 * n / total:5.1f} %  {c}")

    addr_col = next((c for c in cols if "Address" in c), None)
    print(f"\nhottest {a.top} instructions:")
    for r in sorted(rows, key=lambda r: -number(r[sample_col]))[: a.top]:
        n = number(r[sample_col])
        reasons = sorted(((number(r[c]), c) for c in reason_cols), reverse=True)[:3]
        why = " ".join(f"{c.split('stalled_')[-1]}={v:.0f}" for v, c in reasons if v > 0)
        ex = f" exec={number(r[exec_col]):.0f}" if exec_col else ""
        addr = r.get(addr_col, "") if addr_col else ""
        print(f"  {100 * n / total:5.2f} % {addr:>8} {r['Source'].strip()[:70]:70}{ex} {why}")


if __name__ == "__main__":
    main()
