#!/usr/bin/env bash
# Everything the GPU machine does, in one call: build, the `gpu` test label
# (compute-sanitizer on small shapes included), the benchmarks against PyTorch SDPA, and a
# short table last. Run there from the repo root (carry .deps, staged by
# bench/stage-deps.sh). Usage: bench/device.sh [quick|full|extra|tests|bench|decode|long|train|tune|wheel|cold|ab]
# (full: tests, autotune of the standard set, D 64/128 grid, long sequences; extra: D 96/256 grid and long sequences, no tests;
# train: only examples/embed_cpp's GPU step, test_torch.py and examples/train_gpt.py, its table last;
# tune: the autotune GPU tests and the cold/warm tuning of the standard set; wheel: the carried
# dist/ manylinux wheel installed in a fresh venv and run on CUDA (no build); decode: only the decode rows
# (bench/decode.py, also after compare_sdpa.py in every benchmark mode); long: only issue 14's long
# sequences (flashgen, causal, N = 16k, 256k, 2^20, 2^21: a few minutes); cold: issue 18's first-call
# latency per variant (bench/cold_start.py), compiled and from the wheel's kernel set built here;
# ab: bench/ab_variants.py of this tree's library against the revision bench/stage-base.sh staged
# in .ab-base (carried), AB_ARGS its options (default D 64/128/256, N 4k/16k, 3 rounds); decode with
# AB_VARIANTS: bench/decode.py once per variant (-D flags, FLASHGEN_ variables) and round (AB_ROUNDS,
# default 2; DECODE_ARGS more bench/decode.py options) instead; ab with
# AB_VARIANTS set ("name=-DFLAG=1;..."), the variants of this tree's library (a variant "@base"
# is the staged revision's library: "base=@base;new=;x=-DFLAG=1" measures all three in turn);
# env FA4=1 adds FlashAttention-4 to the benchmarks, BENCH_ARGS passes compare_sdpa.py options)
set -uo pipefail
mode=${1:-quick}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
export FLASHGEN_CACHE_DIR=/tmp/flashgen-cache
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

if [[ $mode == wheel ]]; then
  # The distributable wheel (scripts/build-wheel.sh, run on the CPU machine; carry ["dist"])
  # in a fresh virtual environment, run on CUDA tensors from outside the tree, no flashgen
  # variables set: what `pip install flashgen` gives a PyTorch user. No build here.
  wheel=$(ls "$root"/dist/flashgen-*manylinux*.whl 2>/dev/null | head -1)
  [[ -n $wheel ]] || { echo "no dist/flashgen-*manylinux*.whl: run scripts/build-wheel.sh and carry dist"; exit 1; }
  # The machine's python3 is itself a venv (/opt/torch/.venv): --system-site-packages would see
  # only the base interpreter's packages, so a .pth file lends the new venv torch's site-packages.
  rm -rf /tmp/flashgen-wheel-venv && python3 -m venv /tmp/flashgen-wheel-venv &&
    python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
      >"$(/tmp/flashgen-wheel-venv/bin/python -c 'import site; print(site.getsitepackages()[0])')/torch-site.pth" &&
    /tmp/flashgen-wheel-venv/bin/pip install -q --no-deps --no-index "$wheel" || exit 1
  (cd /tmp && env -u FLASHGEN_LIBRARY -u FLASHGEN_NVRTC -u PYTHONPATH /tmp/flashgen-wheel-venv/bin/python \
     "$root/tests/package/wheel_cuda_check.py") 2>&1 | tee "$out/wheel.log"
  rc=${PIPESTATUS[0]}
  /tmp/flashgen-wheel-venv/bin/flashgen cache env 2>&1 | grep -i nvrtc | head -5
  exit "$rc"
fi

echo "== build =="
start=$(date +%s)
cmake -S "$root" -B "$root/build" -G Ninja -DFLASHGEN_WITH_MLIR=OFF -DFLASHGEN_BUILD_BENCH=OFF -DFLASHGEN_WERROR=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
targets=(flashgen_runtime flashgen label_gpu)  # label_gpu: every executable of the gpu label
[[ $mode == ab ]] && targets=(flashgen_runtime)
[[ $mode == train ]] && targets=(flashgen_runtime flashgen_runtime_static flashgen_compiler flashgen)
ninja -C "$root/build" "${targets[@]}" >"$out/build.log" 2>&1 || { grep -E 'error|FAILED' "$out/build.log" | head -40; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

if [[ $mode == ab ]]; then
  new_lib=$(ls "$root"/build/runtime/libflashgen.so* | head -1)
  # The library of the revision bench/stage-base.sh staged in .ab-base, built here.
  build_base() {
    local base=$root/.ab-base
    [[ -f $base/REVISION ]] || { echo "no .ab-base/REVISION: run bench/stage-base.sh REV here first and carry .ab-base"; return 1; }
    echo "== base: $(cat "$base/REVISION") =="
    [[ -d $root/.deps && ! -e $base/.deps ]] && ln -s "$root/.deps" "$base/.deps"
    cmake -S "$base" -B /tmp/flashgen-ab-base -G Ninja -DFLASHGEN_WITH_MLIR=OFF -DFLASHGEN_BUILD_BENCH=OFF \
      -DFLASHGEN_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake-base.log" 2>&1 &&
      ninja -C /tmp/flashgen-ab-base flashgen_runtime >"$out/build-base.log" 2>&1 ||
      { tail -30 "$out/cmake-base.log" "$out/build-base.log"; return 1; }
    base_lib=$(ls /tmp/flashgen-ab-base/runtime/libflashgen.so* | head -1)
  }
  if [[ -n ${AB_VARIANTS:-} ]]; then  # -D variants of this tree's library; "@base" names the staged base's
    echo "== A/B: this tree's library, variants $AB_VARIANTS (bench/ab_variants.py) =="
    export FLASHGEN_LIBRARY=$new_lib
    variants=$AB_VARIANTS
    if [[ $variants == *@base* ]]; then
      build_base || exit 1
      variants=${variants//@base/FLASHGEN_LIBRARY=$base_lib}
    fi
  else
    build_base || exit 1
    echo "== A/B: this tree against $(cat "$root/.ab-base/REVISION") (bench/ab_variants.py) =="
    variants="base=FLASHGEN_LIBRARY=$base_lib;new=FLASHGEN_LIBRARY=$new_lib"
  fi
  read -r -a ab_args <<<"${AB_ARGS:---dims 64,128,256 --seqlens 4096,16384 --rounds 3}"
  python3 "$root/bench/ab_variants.py" --variants "$variants" "${ab_args[@]}" 2>&1 | tee "$out/ab.log" | tail -40
  exit "${PIPESTATUS[0]}"
fi

if [[ $mode == cold ]]; then
  echo "== cold start: first forward + first backward per variant, a fresh process and cache each =="
  ninja -C "$root/build" flashgen_packaged_kernels >"$out/packaged.log" 2>&1 || { tail -30 "$out/packaged.log"; exit 1; }
  grep -E '^(kernels|compiled|wall time) ' "$out/packaged.log"
  export FLASHGEN_LIBRARY=$(ls "$root"/build/runtime/libflashgen.so* | head -1) PYTHONPATH=$root/python
  echo "-- compiled at the first call --"
  python3 "$root/bench/cold_start.py" --json "$out/cold_start.json" 2>&1 | tee "$out/cold.log"
  echo "-- from the kernel set the wheel ships (build/packaged-kernels) --"
  python3 "$root/bench/cold_start.py" --packaged "$root/build/packaged-kernels" --json "$out/cold_start_packaged.json" \
    2>&1 | tee -a "$out/cold.log"
  rc=${PIPESTATUS[0]}
  echo "-- the same, the set's next head-dim class standing in while a variant compiles (--substitute) --"
  python3 "$root/bench/cold_start.py" --packaged "$root/build/packaged-kernels" --substitute \
    --json "$out/cold_start_substitute.json" 2>&1 | tee -a "$out/cold.log"
  exit $(( rc || PIPESTATUS[0] ))
fi

if [[ $mode == train ]]; then
  echo "== examples/embed_cpp against a staging install (CPU step, then the GPU step) =="
  sh "$root/tests/package/install_and_build_example.sh" cmake "$root/build" "$root" /tmp/flashgen-embed /usr/local/cuda Ninja \
    >"$out/embed.log" 2>&1
  embed_rc=$?
  grep -E '^flashgen |GPU step|bytes of CUDA source|^  (o|lse|dq|dk|dv) |skipping|error|FAILED' "$out/embed.log"
  [[ $embed_rc != 0 ]] && { echo "embed example: exit $embed_rc"; tail -30 "$out/embed.log"; }
  export FLASHGEN_LIBRARY=$(ls "$root"/build/runtime/libflashgen.so* | head -1) PYTHONPATH=$root/python
  echo "== python/tests/test_torch.py (custom_op, AttentionFunction, torch.compile, CUDA vs SDPA) =="
  (cd "$root/python/tests" && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -v test_torch >"$out/test_torch.log" 2>&1)
  torch_rc=$?
  grep -E '^(FAIL|ERROR):|^Ran |^OK|^FAILED' "$out/test_torch.log"
  echo "== examples/train_gpt.py: flashgen vs SDPA (+ SDPA again: run-to-run noise) =="
  t0=$(date +%s)
  python3 "$root/examples/train_gpt.py" --attn both --noise-baseline --noise-seeds "${NOISE_SEEDS:-1234,4321,777}" --steps 500 --out-dir "$out/train" \
    >"$out/train.log" 2>&1
  rc=$?
  echo "train_gpt.py: exit $rc after $(( $(date +%s) - t0 )) s (log: train.log; plot: train/train_gpt.png)"
  tail -8 "$out/train.log"
  exit $(( rc || embed_rc || torch_rc ))
fi

summary=""
if [[ $mode != bench && $mode != extra && $mode != decode && $mode != long ]]; then
  echo "== ctest -L gpu =="
  only=()
  [[ $mode == tune ]] && only=(-R Autotune)
  ctest --test-dir "$root/build" -L gpu "${only[@]}" -j 4 --output-on-failure --timeout 600 >"$out/ctest-gpu.log" 2>&1
  grep -E 'tests passed|tests failed|Failed|\*\*\*' "$out/ctest-gpu.log" | tail -30
  summary=$(grep -E 'tests passed' "$out/ctest-gpu.log" | tail -1)
  if [[ $mode != tune ]]; then  # the Python calls' CUDA tests (varlen, paged varlen, FA2's interface)
    echo "== python CUDA tests: test_varlen, test_flash_attn_interface =="
    (cd "$root/python/tests" && FLASHGEN_LIBRARY=$(ls "$root"/build/runtime/libflashgen.so* | head -1) \
       PYTHONPATH=$root/python PYTHONDONTWRITEBYTECODE=1 python3 -m unittest test_varlen test_flash_attn_interface \
       >"$out/python-cuda.log" 2>&1)
    grep -E '^(FAIL|ERROR):|^Ran |^OK|^FAILED' "$out/python-cuda.log"
  fi
fi

if [[ $mode == full || $mode == tune ]]; then  # ~1 min of device time: not in quick runs
  # Cold: a fresh directory, so the candidates' compile time counts. Its winners are not
  # used by the benchmarks below (they use FLASHGEN_CACHE_DIR).
  echo "== autotune: standard set (D 64/128, bf16/fp16, causal on/off, N 1k/4k/16k; goal <= 30 s) =="
  tune_dir=/tmp/flashgen-tune-cache
  rm -rf "$tune_dir"
  tune=("$root/build/tools/flashgen" tune --cache-dir "$tune_dir" --head-dims 64,128 --dtypes bf16,fp16
        --causal both --seqlens 1k,4k,16k --passes fwd,bwd)
  t0=$(date +%s%N)
  "${tune[@]}" >"$out/tune.log" 2>"$out/tune-progress.log"
  rc=$?
  echo "cold tune: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall (exit $rc)"
  cat "$out/tune.log"
  [[ $rc != 0 ]] && tail -20 "$out/tune-progress.log"
  echo "== autotune: the same with the winners persisted (startup cost; goal <= 50 ms) =="
  t0=$(date +%s%N)
  "${tune[@]}" >"$out/tune-warm.log" 2>&1
  rc=$?
  echo "warm tune: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall for the process (CUDA init included; exit $rc)"
  tail -1 "$out/tune-warm.log"
  cp "$tune_dir/autotune.json" "$out/" 2>/dev/null
fi

if [[ $mode == quick || $mode == full ]]; then
  echo "== flashgen bench (C++, CUDA events, L2 flushed; D 128, N 4k, causal off/on) =="
  mkdir -p "$out/bench"
  "$root/build/tools/flashgen" bench --head-dims 128 --seqlens 4k --causal both \
    --json "$out/bench/flashgen-bench.json" 2>&1 | tee "$out/flashgen-bench.log" | tail -12
fi

if [[ $mode == long ]]; then
  echo "== long sequences (issue 14: 256k forward + backward, the forward's rate at 2^20 against 16k, 2^21) =="
  export FLASHGEN_LIBRARY=$(ls "$root"/build/runtime/libflashgen.so* | head -1) PYTHONPATH=$root/python
  python3 "$root/bench/long_sequence.py" --seqlens 16384,262144,1048576,2097152 --impls flashgen \
    --out "$out/bench" 2>&1 | tee "$out/long.log"
elif [[ $mode != tests && $mode != tune ]]; then
  echo "== benchmarks vs PyTorch SDPA =="
  lib=$(ls "$root"/build/runtime/libflashgen.so* | head -1)
  bench_args=(--out "$out/bench")
  [[ $mode == quick ]] && bench_args+=(--quick)
  [[ $mode == extra ]] && bench_args+=(--dims 96,256 --seqlens 1024,4096,16384)
  # FA4=1: FlashAttention-4 in the same run (staged by ../shared/anchors/fa4/, on PYTHONPATH);
  # BENCH_ARGS: more compare_sdpa.py options, e.g. "--dims 64,128,256 --seqlens 4096,16384".
  [[ -n ${FA4:-} ]] && bench_args+=(--fa4)
  read -r -a extra_args <<<"${BENCH_ARGS:-}"
  bench_args+=("${extra_args[@]}")
  export FLASHGEN_LIBRARY=$lib PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}  # FA4 staged on PYTHONPATH
  if [[ $mode != decode ]]; then
    python3 "$root/bench/compare_sdpa.py" "${bench_args[@]}" --commit "${BENCH_COMMIT:-unknown}" \
      2>&1 | tee "$out/bench.log" | tail -60
  fi
  if [[ $mode == decode && -n ${AB_VARIANTS:-} ]]; then
    # Variants of the decode kernels ("name=-DFLAG=1;..."; "name=" for none), each compiled
    # into a kernel cache of its own, the list run AB_ROUNDS times in turn (default 2). As in
    # bench/ab_variants.py, words FLASHGEN_NAME=value set that variable (e.g. a pending
    # patch's FLASHGEN_DECODE_TILE=64,64,8,5); the other words are the NVRTC flags.
    echo "== decode A/B: variants $AB_VARIANTS, ${AB_ROUNDS:-2} rounds (us, TB/s) =="
    IFS=';' read -r -a decode_variants <<<"$AB_VARIANTS"
    for ((round = 1; round <= ${AB_ROUNDS:-2}; ++round)); do
      for variant in "${decode_variants[@]}"; do
        name=${variant%%=*} flags=${variant#*=}
        variables=() nvrtc_flags=()
        for word in $flags; do
          if [[ $word =~ ^FLASHGEN_[A-Z_]+= ]]; then variables+=("$word"); else nvrtc_flags+=("$word"); fi
        done
        echo "-- $name (${flags:-no flags}), round $round --"
        env FLASHGEN_NVRTC_FLAGS="${nvrtc_flags[*]}" FLASHGEN_CACHE_DIR=/tmp/flashgen-decode-$name "${variables[@]}" \
          python3 "$root/bench/decode.py" --rep 50 --warmup 10 --out "$out/decode-$name-$round" ${DECODE_ARGS:-} 2>&1 |
          tee "$out/decode-$name-$round.log" | grep -E '^ *(B|[0-9]+) +(sq|[0-9]+) +(sk|[0-9]+) +[|]'
      done
    done
  else
    echo "== decode (B x seqlen_q x seqlen_k; D 128, 32 query heads, 8 KV heads; us, TB/s) =="
    python3 "$root/bench/decode.py" --out "$out/bench" ${FA4:+--fa4} --commit "${BENCH_COMMIT:-unknown}" \
      2>&1 | tee "$out/decode.log" | tail -8
    echo "== Python host time per call (tiny forward, us; SDPA beside) =="
    python3 "$root/bench/python_call_overhead.py" --parts --out "$out/bench" 2>&1 | tee "$out/python-call.log" | tail -14
  fi
  if [[ $mode == full || $mode == extra ]]; then
    echo "== long sequences (B=1, H=16, D=128, causal): time and peak extra memory =="
    python3 "$root/bench/long_sequence.py" --out "$out/bench" 2>&1 | tee "$out/long.log"
  fi
fi
echo "== summary =="
echo "gpu tests: ${summary:-not run}"
