#!/usr/bin/env bash
# flashgen's forward and dK/dV kernels beside FlashAttention-4's forward and backward kernels
# under Nsight Compute, one shape, one table (time, cycles, instructions, IPC, tensor pipe):
# where FA4's lead comes from, in one device call. Run from the repo root there (carry .deps;
# FA4 staged as ../shared/anchors/fa4/ describes, PYTHONPATH set; without it, flashgen alone):
#   bench/ncu_compare.sh DIM SEQLEN [--causal]
# Each kernel's report, source page and summary land in $OUT (bench/ncu_source.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
dim=$1 seqlen=$2
shift 2
tag=d${dim}_${seqlen}${1:+_causal}
runs=("fwd_$tag" "regex:^fwd_d${dim}_" "" "dkdv_$tag" "regex:^bwd_dkdv_d${dim}_" "")
if python3 -c "import flash_attn.cute.interface" 2>/dev/null; then
  runs+=("fa4fwd_$tag" "regex:ForwardSm90" "--impl fa4" "fa4bwd_$tag" "regex:BackwardSm90" "--impl fa4")
else
  echo "(FlashAttention-4 not importable: flashgen alone)"
fi
for ((i = 0; i < ${#runs[@]}; i += 3)); do
  # shellcheck disable=SC2086  # the impl option is two words or none
  OUT=$out bash "$root/bench/ncu_source.sh" "${runs[i]}" "${runs[i + 1]}" --dim "$dim" --seqlen "$seqlen" "$@" \
    ${runs[i + 2]} >"$out/${runs[i]}.txt" 2>&1 || echo "${runs[i]}: ncu_source.sh failed (see $out/${runs[i]}.txt)"
done
python3 - "$out" "${runs[@]}" <<'PY'
import re, sys
out, names = sys.argv[1], sys.argv[2::3]
def value(text, label):  # the last number on the line that starts with `label`
    m = re.search(r"^\s*" + re.escape(label) + r"\b.*?([\d,.]+)\s*$", text, re.M)
    return float(m.group(1).replace(",", "")) if m else float("nan")
print("| kernel | time (ms) | cycles (M) | instructions (M) | IPC | tensor pipe active | tensor cycles (M) |")
print("|---|---|---|---|---|---|---|")
for name in names:
    try:
        text = open(f"{out}/{name}-totals.txt").read()
    except OSError:
        print(f"| {name} | (no report) | | | | | |")
        continue
    cycles = value(text, "Elapsed Cycles")
    tensor = value(text, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
    print(f"| {name} | {value(text, 'Duration'):.3f} | {cycles / 1e6:.2f} | "
          f"{value(text, 'Executed Instructions') / 1e6:.1f} | {value(text, 'Executed Ipc Active'):.2f} | "
          f"{tensor:.1f} % | {cycles * tensor / 1e8:.2f} |")
PY
