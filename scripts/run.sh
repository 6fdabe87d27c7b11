#!/usr/bin/env bash
# The main job: installs dependencies, builds the luminal CLI and runs its built-in example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh luminal
./build/luminal example "$@"
