#!/usr/bin/env bash
# The tests: install what is missing, build, run the whole suite (ctest), then the
# host tests again in an AddressSanitizer + UBSan build. Exits non-zero on any failure.
# GPU tests (label gpu) skip themselves with a message where no GPU is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/scripts/install-deps.sh"

echo "== build (release) =="
"$root/scripts/build.sh" "$root/build"
echo "== ctest (release) =="
ctest --test-dir "$root/build" --output-on-failure -j "$jobs" --timeout 1800

echo "== build (ASan + UBSan, host code) =="
"$root/scripts/build.sh" "$root/build-asan" -DFLASHGEN_SANITIZE=ON -DFLASHGEN_WITH_MLIR=OFF -DFLASHGEN_BUILD_BENCH=OFF
echo "== ctest (ASan + UBSan: host tests) =="
# NVRTC and the driver are not built with ASan; leaks inside them are not ours.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$jobs" --timeout 1800 -L "cpu|api|cache"
echo "flashgen: all tests passed"
