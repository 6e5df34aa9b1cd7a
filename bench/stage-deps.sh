#!/usr/bin/env bash
# Run here before a GPU-machine call: copies the header-only libraries that the
# GPU machine lacks into .deps/include (git-ignored; pass carry [".deps"]).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.deps/include"
for h in nlohmann CLI xxhash.h xxh3.h; do
  cp -r "/usr/include/$h" "$root/.deps/include/"
done
echo "staged: $(ls "$root/.deps/include" | tr '\n' ' ')"
