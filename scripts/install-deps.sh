#!/usr/bin/env bash
# Installs flashgen's build and test dependencies from Debian's packages.
# Idempotent: packages already present are skipped, so a warm machine pays nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy python3-venv  # python3-venv: the wheel test's build and install environments
  python3-torch  # PyTorch 1.13, CPU only: the python tests and examples/train_gpt.py --tiny (~50 s)
)
if [[ "${FLASHGEN_WITH_MLIR:-ON}" != "OFF" ]]; then
  packages+=(llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "flashgen: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -d /usr/local/cuda ]]; then
  echo "flashgen: the CUDA Toolkit 13 is expected at /usr/local/cuda" >&2
  exit 1
fi
