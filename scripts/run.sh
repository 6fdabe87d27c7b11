#!/usr/bin/env bash
# The main job: installs dependencies, builds the luminal CLI, fetches the embedded default model
# (SmolLM2-135M-Instruct, scripts/fetch-default-model.sh) and generates text with it. Extra
# arguments go to `luminal generate` (e.g. --prompt "..." --max-new-tokens 64).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh luminal
model="$(scripts/fetch-default-model.sh)"
if [ $# -eq 0 ]; then
  set -- --chat --prompt "Explain in two sentences what a compiler does." --max-new-tokens 64
fi
./build/luminal generate --model "$model" "$@"
