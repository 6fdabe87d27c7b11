#!/usr/bin/env bash
# Compiles every standalone GPU design study here (*.cu) for sm_90 with nvcc, so that a change to
# a shared part (study_parts.h) or the toolkit cannot leave one unbuildable until a device
# session finds it. No GPU needed. Exits 77 (ctest: skipped) where there is no nvcc.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
  echo "no nvcc (set NVCC or install the CUDA toolkit): the studies were not compiled"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for f in "$here"/*.cu; do
  if "$NVCC" -O3 -arch=sm_90 -std=c++17 -c "$f" -o "$tmp/study.o" > "$tmp/log" 2>&1; then
    echo "ok      $(basename "$f")"
  else
    echo "FAILED  $(basename "$f")"
    cat "$tmp/log"
    failed=1
  fi
done
exit $failed
