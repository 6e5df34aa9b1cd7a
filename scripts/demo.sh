#!/usr/bin/env bash
# The main job: install what is missing, build, and run `flashgen demo`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
exec "$root/build/tools/flashgen" demo "$@"
