#!/usr/bin/env bash
# The Python package on the GPU machine, in one call:
# 1. it builds the extension there, because the device's Python (3.12) is not this machine's;
# 2. it runs the CUDA pytest suite (python/tests/test_torch_cuda.py: the op cases and tiny
#    models on CUDA tensors) and the graph API tests; PYTEST_ONLY=1 stops after it, SKIP_PYTEST=1
#    leaves it out;
# 3. it times torch.compile(backend="luminal") against eager and inductor (reduce-overhead) on a
#    random-weight Llama-3-8B-shaped model.
# REUSE=1 keeps the extension a warm machine built in the last call.
#
# The device image lacks nlohmann-json's and PCRE2's headers. Make them here, then carry them:
#   scripts/make_device_deps.sh        # -> build-deps/{include,lib}
# and through the device tool, with carry ["build-deps"]:
#   OUT=$OUT bash benchmarks/python_device_run.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/python.log") 2>&1
export LD_LIBRARY_PATH="$PWD/build-deps/lib:${LD_LIBRARY_PATH:-}"
build() {  # build(compiler): the extension in build-py
  echo "== build the extension with $($1 --version | head -n 1) [${SECONDS}s]"
  rm -rf build-py
  cmake -S . -B build-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DLUMINAL_BUILD_TESTS=OFF -DCMAKE_CXX_COMPILER="$1" \
    -DCMAKE_CXX_FLAGS="-I$PWD/build-deps/include" -DPCRE2_LIBRARY="$PWD/build-deps/lib/libpcre2-8.so.0" > "$OUT/cmake.txt" 2>&1 \
    || { tail -n 20 "$OUT/cmake.txt"; return 1; }
  ninja -C build-py luminal_python > "$OUT/ninja.txt" 2>&1 || { grep -m 20 -E "error|Error" "$OUT/ninja.txt"; return 1; }
}
smoke() {  # one tiny graph on the GPU, in a process that has torch's and numpy's libstdc++
  PYTHONPATH=build-py/python python3 -c "import numpy, torch, luminal as L
g = L.Graph(); x = g.input('x', 'f32', [4]); L.add(x, x).output('y')
c = L.compile(g, backend='cuda'); c.set_input('x', numpy.ones(4, 'float32')); c.run()
assert (c.output('y') == 2).all(); print('smoke test on cuda: ok')"
}
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|pybind11|numpy|pytest) "
if [ -n "${REUSE:-}" ] && [ -d build-py/python ]; then echo "== the extension of the last call (REUSE=1)"  # a warm machine's build
else
build "${CXX:-g++}" || exit 1
# The image's g++ 13 wrapper once gave a module that crashed in its first ostringstream (its
# libstdc++ code inside the module; docs/lessons.md): the older compiler is the fallback.
if ! smoke && command -v g++-12 > /dev/null; then build g++-12 && smoke || exit 1; fi
fi
if [ -n "${BUILD_ONLY:-}" ]; then exit 0; fi  # the extension alone, for another script's use
if [ -z "${SKIP_PYTEST:-}" ]; then
echo "== pytest on cuda [${SECONDS}s]"
(cd python/tests && LUMINAL_PYTHON_DIR="$PWD/../../build-py/python" timeout "${PYTEST_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider -rfE \
  test_torch_cuda.py test_graph_api.py > "$OUT/pytest_cuda.txt" 2>&1)
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_cuda.txt" | head -n 40
fi
if [ -n "${PYTEST_ONLY:-}" ]; then echo "== done [${SECONDS}s]"; exit 0; fi
echo "== torch.compile: luminal, eager, inductor; Llama-3-8B shape, bf16 [${SECONDS}s]"
PYTHONPATH=build-py/python timeout "${BENCH_TIMEOUT:-330}" python3 -u benchmarks/torch_compile_bench.py --preset "${PRESET:-llama-3-8b}" --dtype bfloat16 \
  --device cuda --inductor --steps "${STEPS:-32}" --prompt "${PROMPT:-512}" 2>&1 | tee "$OUT/bench.txt" | grep -v -E "Warning|warn\(" | tail -n 8
echo "== done [${SECONDS}s]"
