#!/usr/bin/env bash
# Nsight Compute on the GPU machine: flashgen's forward/backward kernels next to FA2's
# (SDPA flash backend), same inputs, plus the SASS instruction mix of flashgen's cubins.
# Run from the repo root there (carry .deps): bench/profile.sh [--dim 128 --seqlen 4096 --causal]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
export FLASHGEN_CACHE_DIR=/tmp/flashgen-profile-cache
cmake -S "$root" -B "$root/build" -G Ninja -DFLASHGEN_WITH_MLIR=OFF -DFLASHGEN_BUILD_BENCH=OFF -DFLASHGEN_WERROR=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
ninja -C "$root/build" flashgen_runtime >"$out/build.log" 2>&1 || { grep -E 'error|FAILED' "$out/build.log" | head; exit 1; }
export FLASHGEN_LIBRARY=$(ls "$root"/build/runtime/libflashgen.so* | head -1)
# Every launch whose name contains "flash" (flashgen's and FA2's); the first iteration is the JIT warm-up.
kernels='regex:flash|fwd_d|bwd_'
ncu --clock-control none -k "$kernels" \
  --section SpeedOfLight --metrics "$(python3 "$root/bench/ncu_summary.py" --metrics)" \
  --csv --page raw python3 "$root/bench/profile_step.py" "$@" >"$out/ncu.csv" 2>"$out/ncu.err"
echo "ncu rc=$? ($(wc -l <"$out/ncu.csv") lines)"; tail -3 "$out/ncu.err"
python3 "$root/bench/ncu_summary.py" "$out/ncu.csv" | tee "$out/ncu-summary.txt"
echo "== SASS instruction mix of flashgen's cubins =="
for c in $(find "$FLASHGEN_CACHE_DIR" -name '*.cubin' | sort); do
  echo "-- $(grep -oE '"uri": *"[^"]+"' "$(dirname "$c")/meta.json" | cut -d'"' -f4)"
  cuobjdump -sass "$c" | grep -oE '^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+' | awk '{print $2}' | sed 's/\..*//' |
    sort | uniq -c | sort -rn | head -14 | tr '\n' ' '; echo
done
