#!/usr/bin/env bash
# Headers and the library the build needs that the GPU machine's image lacks (nlohmann-json,
# PCRE2), copied from this machine into build-deps/ (ignored by git), to carry there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-deps/include build-deps/lib
cp -r /usr/include/nlohmann build-deps/include/
cp /usr/include/pcre2.h build-deps/include/
cp /lib/x86_64-linux-gnu/libpcre2-8.so.0 build-deps/lib/
du -sh build-deps
