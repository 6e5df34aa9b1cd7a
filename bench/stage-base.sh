#!/usr/bin/env bash
# Stages a revision's sources for `bench/device.sh ab`, the A/B of the working tree against that
# revision on the GPU machine (which has no git history): `git archive REV` into .ab-base/
# (git-ignored), its commit in .ab-base/REVISION. Carry [".deps", ".ab-base"].
# Usage: bench/stage-base.sh [REV]   (default HEAD: the working tree's uncommitted change against
# its commit; HEAD~1 for the last commit against its parent)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rev=${1:-HEAD}
sha=$(git -C "$root" rev-parse --verify "$rev^{commit}")
dir=$root/.ab-base
# Only a directory this script staged (it holds REVISION) is replaced.
if [[ -e $dir && ! -f $dir/REVISION ]]; then
  echo "stage-base.sh: $dir exists and was not staged by this script (no REVISION): not touching it" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"
git -C "$root" archive "$sha" | tar -x -C "$dir"
echo "$sha" >"$dir/REVISION"
echo "staged $rev ($sha) in .ab-base ($(du -sh "$dir" | cut -f1)): carry [\".deps\", \".ab-base\"], run bench/device.sh ab"
