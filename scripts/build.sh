#!/usr/bin/env bash
# Configures and builds luminal into ./build (incremental). Extra args are ninja targets.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
ninja -C build "$@"
