#!/usr/bin/env bash
# Installs what luminal needs to build and test, skipping what is already present: Debian
# packages; with --python also the Python packages of the Python extension and its tests
# (pybind11, numpy, pytest, torch, transformers) from PyPI.
set -euo pipefail
with_python=0
[ "${1:-}" = "--python" ] && with_python=1
packages=(g++ cmake ninja-build libgtest-dev nlohmann-json3-dev libpcre2-dev xz-utils)
command -v python3 >/dev/null 2>&1 || packages+=(python3 python3-dev python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "$with_python" = 1 ] || exit 0
# The extension needs Python's headers (a Debian python3 has them in python3-dev).
if ! python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-dev python3-pip
fi
python_missing=()
for m in pybind11 numpy pytest torch transformers; do
  python3 -c "import $m" >/dev/null 2>&1 || python_missing+=("$m")
done
if [ ${#python_missing[@]} -gt 0 ]; then
  echo "pip installing: ${python_missing[*]}"
  # Debian's own python3 refuses system-wide pip installs without this flag (PEP 668).
  python3 -m pip install -q "${python_missing[@]}" 2>/dev/null || python3 -m pip install -q --break-system-packages "${python_missing[@]}"
fi
