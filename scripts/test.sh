#!/usr/bin/env bash
# The tests: install what is missing, build, run the whole suite (ctest), then the
# host tests again in an AddressSanitizer + UBSan build. Exits non-zero on any failure.
# GPU tests (label gpu) skip themselves with a message where no GPU is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/scripts/install-deps.sh"

# NVRTC 12 from pip (nvidia-cuda-nvrtc-cu12) for the NVRTC 12 suites (tests/nvrtc/CMakeLists.txt:
# the NVRTC tests and the kernel subset and matrix compiled again), in a virtual environment
# beside the build where the package index answers; without it those suites say so and skip.
nvrtc12=()
nvrtc12_env=$root/build-nvrtc12-env
if { [[ -x $nvrtc12_env/bin/python ]] || python3 -m venv "$nvrtc12_env" >/dev/null 2>&1; } &&
   timeout 600 "$nvrtc12_env/bin/python" -m pip install -q nvidia-cuda-nvrtc-cu12 >/dev/null 2>&1; then
  lib=$(ls "$nvrtc12_env"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null | head -1 || true)
  if [[ -n $lib ]]; then nvrtc12=(-DFLASHGEN_TEST_NVRTC12="$lib"); fi
fi

# nvdisasm from pip (nvidia-cuda-nvdisasm, CUDA 13) in the same environment, for the SASS tests
# (tests/compiler/sass_test.cpp: HGMMA and TMA in the sm_90a kernels, read without a GPU); on
# PATH after everything else, so a toolkit's own comes first. Without it those tests skip.
if [[ -x $nvrtc12_env/bin/python ]] &&
   timeout 600 "$nvrtc12_env/bin/python" -m pip install -q nvidia-cuda-nvdisasm >/dev/null 2>&1; then
  nvdisasm=$(ls "$nvrtc12_env"/lib/python3*/site-packages/nvidia/cu13/bin/nvdisasm 2>/dev/null | head -1 || true)
  if [[ -n $nvdisasm ]]; then export PATH="$PATH:$(dirname "$nvdisasm")"; fi
fi

echo "== build (release) =="
"$root/scripts/build.sh" "$root/build" "${nvrtc12[@]}"
echo "== ctest (release) =="
ctest --test-dir "$root/build" --output-on-failure -j "$jobs" --timeout 1800

echo "== build (ASan + UBSan, host code) =="
"$root/scripts/build.sh" "$root/build-asan" -DFLASHGEN_SANITIZE=ON -DFLASHGEN_WITH_MLIR=OFF -DFLASHGEN_BUILD_BENCH=OFF
echo "== ctest (ASan + UBSan: host tests) =="
# NVRTC and the driver are not built with ASan; leaks inside them are not ours.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$jobs" --timeout 1800 -L "cpu|api|cache"
echo "flashgen: all tests passed"
