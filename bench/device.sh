#!/usr/bin/env bash
# Everything the GPU machine does, in one call: build, the `gpu` test label
# (compute-sanitizer on small shapes included), the benchmarks against PyTorch SDPA, and a
# short table last. Run there from the repo root (carry .deps, staged by
# bench/stage-deps.sh). Usage: bench/device.sh [quick|full|extra|tests|bench]
# (full: tests, D 64/128 grid, long sequences; extra: D 96/256 grid and long sequences, no tests)
set -uo pipefail
mode=${1:-quick}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
export FLASHGEN_CACHE_DIR=/tmp/flashgen-cache
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

echo "== build =="
start=$(date +%s)
cmake -S "$root" -B "$root/build" -G Ninja -DFLASHGEN_WITH_MLIR=OFF -DFLASHGEN_BUILD_BENCH=OFF -DFLASHGEN_WERROR=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
ninja -C "$root/build" flashgen_runtime flashgen gpu_attention_tests cache_gpu_tests >"$out/build.log" 2>&1 || { grep -E 'error|FAILED' "$out/build.log" | head -40; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

summary=""
if [[ $mode != bench && $mode != extra ]]; then
  echo "== ctest -L gpu =="
  ctest --test-dir "$root/build" -L gpu -j 4 --output-on-failure --timeout 600 >"$out/ctest-gpu.log" 2>&1
  grep -E 'tests passed|tests failed|Failed|\*\*\*' "$out/ctest-gpu.log" | tail -30
  summary=$(grep -E 'tests passed' "$out/ctest-gpu.log" | tail -1)
fi

if [[ $mode != tests ]]; then
  echo "== benchmarks vs PyTorch SDPA =="
  lib=$(ls "$root"/build/runtime/libflashgen.so* | head -1)
  bench_args=(--out "$out/bench")
  [[ $mode == quick ]] && bench_args+=(--quick)
  [[ $mode == extra ]] && bench_args+=(--dims 96,256 --seqlens 1024,4096,16384)
  export FLASHGEN_LIBRARY=$lib PYTHONPATH=$root/python
  python3 "$root/bench/compare_sdpa.py" "${bench_args[@]}" --commit "${BENCH_COMMIT:-unknown}" \
    2>&1 | tee "$out/bench.log" | tail -60
  if [[ $mode == full || $mode == extra ]]; then
    echo "== long sequences (B=1, H=16, D=128, causal): time and peak extra memory =="
    python3 "$root/bench/long_sequence.py" --out "$out/bench" 2>&1 | tee "$out/long.log"
  fi
fi
echo "== summary =="
echo "gpu tests: ${summary:-not run}"
