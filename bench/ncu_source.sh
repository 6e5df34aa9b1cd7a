#!/usr/bin/env bash
# Nsight Compute source counters on the GPU machine: where one flashgen kernel's warps stall,
# per SASS instruction (warp-state samples by reason, instructions executed). Run from the
# repo root there (carry .deps):
#   bench/ncu_source.sh NAME KERNEL_REGEX [profile_step.py options]
# e.g. bench/ncu_source.sh fwd128 'regex:^flash_fwd' --dim 128 --seqlen 16384
# (env NCU_METRICS: extra metrics, comma-separated, printed with the totals)
# Writes $OUT/NAME.ncu-rep, $OUT/NAME-source.csv.gz (the source page, one row per SASS
# instruction) and prints the hottest instructions (bench/ncu_source_summary.py).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
name=$1 kernel=$2
shift 2
mkdir -p "$out"
export FLASHGEN_CACHE_DIR=${FLASHGEN_CACHE_DIR:-/tmp/flashgen-profile-cache}
export FLASHGEN_LIBRARY=${FLASHGEN_LIBRARY:-$(ls "$root"/build/runtime/libflashgen.so* | head -1)}
# The second launch of the kernel: the first one follows the JIT compile.
ncu --clock-control none -k "$kernel" --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters --section InstructionStats \
  ${NCU_METRICS:+--metrics "$NCU_METRICS"} -f -o "$out/$name" python3 "$root/bench/profile_step.py" "$@" >"$out/$name.log" 2>&1
echo "ncu rc=$? ($name)"; grep -E '==PROF==|==ERROR==|==WARNING==' "$out/$name.log" | tail -3
ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass >"$out/$name-source.csv" 2>"$out/$name-source.err" ||
  { tail -5 "$out/$name-source.err"; exit 1; }
# The kernel's totals: time, clocks, instructions, issue and tensor-pipe use.
ncu -i "$out/$name.ncu-rep" --page details 2>/dev/null |
  grep -E '^  +(Duration|SM Frequency|Elapsed Cycles|Executed Ipc Active|Issue Slots Busy|SM Busy|Executed Instructions |Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Block Size|Grid Size)|pipe_' |
  sort -u | tee "$out/$name-totals.txt"
# Pipe and shared-memory use (the raw metrics behind ComputeWorkloadAnalysis and
# MemoryWorkloadAnalysis): is the tensor pipe, the issue path or shared memory the roof?
ncu -i "$out/$name.ncu-rep" --page raw 2>/dev/null |
  grep -E 'sm__pipe_(tensor|shared|alu|fma|xu)[a-z_]*cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_(tensor|xu|uniform)[a-z_]*\.(sum|avg\.pct)|l1tex__data_pipe_lsu_wavefronts_mem_shared(_op_[a-z]+)?\.sum |l1tex__data_bank_conflicts_pipe_lsu_mem_shared(_op_[a-z]+)?\.sum |smsp__cycles_active\.avg |sm__throughput\.avg\.pct|l1tex__throughput\.avg\.pct' |
  tee -a "$out/$name-totals.txt"
python3 "$root/bench/ncu_source_summary.py" "$out/$name-source.csv" | tee "$out/$name-summary.txt"
gzip -f "$out/$name-source.csv"
