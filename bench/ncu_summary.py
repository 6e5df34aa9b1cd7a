#!/usr/bin/env python3
"""Summarises an Nsight Compute raw CSV (bench/profile.sh): per kernel launch, duration,
tensor-pipe and shared-memory utilisation, bank conflicts, and the top warp stall reasons.

    python3 bench/ncu_summary.py ncu.csv      # summary
    python3 bench/ncu_summary.py --metrics    # the metric list profile.sh asks ncu for
"""
import csv
import sys

STALLS = ["barrier", "long_scoreboard", "short_scoreboard", "math_pipe_throttle", "mio_throttle", "wait",
          "not_selected", "dispatch_stall", "lg_throttle", "no_instruction", "membar", "branch_resolving",
          "tex_throttle", "drain", "imc_miss", "misc", "sleeping", "selected"]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
METRICS = {
    "gpu__time_duration.sum": "us",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor%",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed": "smem%",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "bank-confl-ld",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "bank-confl-st",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy%",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
    "launch__registers_per_thread": "regs",
}


def metric_list():
    return ",".join(list(METRICS) + [STALL_METRIC.format(s) for s in STALLS])


def main(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    header, body = rows[start], rows[start + 2:]  # the row after the header holds units
    col = {name: i for i, name in enumerate(header)}
    for r in body:
        name = r[col["Kernel Name"]][:90]
        vals = []
        for m, short in METRICS.items():
            if m in col:
                v = r[col[m]]
                if short == "us":
                    v = f"{float(v.replace(',', '')) / 1000:.1f}" if header and "nsecond" in rows[start + 1][col[m]] else v
                vals.append(f"{short}={v}")
        stalls = []
        for s in STALLS:
            m = STALL_METRIC.format(s)
            if m in col:
                try:
                    stalls.append((float(r[col[m]].replace(",", "")), s))
                except ValueError:
                    pass
        stalls.sort(reverse=True)
        print(name)
        print("   " + " ".join(vals))
        print("   stalls/issue: " + " ".join(f"{s}={v:.2f}" for v, s in stalls[:6]))


if __name__ == "__main__":
    if sys.argv[1:] == ["--metrics"]:
        print(metric_list())
    else:
        main(sys.argv[1])
