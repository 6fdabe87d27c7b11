#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --python
# Configured again even where build/ exists: the Python extension is built only when pybind11
# was found at configure time, and here it must be (LUMINAL_REQUIRE_PYTHON).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLUMINAL_REQUIRE_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v python3)" > /dev/null  # the python3 the packages went into
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)"
