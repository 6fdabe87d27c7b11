#!/usr/bin/env bash
# Installs the Debian packages luminal needs to build and test, skipping those already present.
set -euo pipefail
packages=(g++ cmake ninja-build libgtest-dev nlohmann-json3-dev libpcre2-dev xz-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
