#!/usr/bin/env bash
# The folder a device call carries (`carry ["build-carry"]`): the device image has no GoogleTest,
# nlohmann-json or PCRE2 headers, so luminal and the GPU test binaries are built here, stripped,
# with libpcre2 beside them (cuda_device_run.sh puts $BIN/lib on LD_LIBRARY_PATH). Also the
# compiler's experts-in-one kernel and routing group of a one-layer Qwen3-30B-A3B as cubins, for
# studies_device_run.sh (EXPERTS_CUBIN=build-carry/experts.cubin ROUTING_CUBIN=build-carry/routing.cubin,
# the one-block group; routing16.cubin, the 16-block group of LUMINAL_CUDA_TOP_RANKS=0). Well under the tool's 64 MiB.
#   bash benchmarks/cuda/make_carry.sh [BUILD=build] [OUT=build-carry]     (about a minute)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-build-carry}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ninja -C "$BUILD" luminal tests/test_cuda tests/test_models benchmarks/cuda_dump_kernels
rm -rf "$OUT"
mkdir -p "$OUT/tests" "$OUT/lib"
cp "$BUILD/luminal" "$OUT/"
cp "$BUILD/tests/test_cuda" "$BUILD/tests/test_models" "$OUT/tests/"
strip "$OUT/luminal" "$OUT"/tests/*
cp /lib/x86_64-linux-gnu/libpcre2-8.so.0 "$OUT/lib/"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 scripts/make_random_model.py --arch qwen3-30b-a3b --out "$work/config" --config-only --layers 1 > /dev/null
"$BUILD/benchmarks/cuda_dump_kernels" "$work/config/config.json" "$work/dump" > "$work/dump.log" 2>&1 || { cat "$work/dump.log"; exit 1; }
python3 benchmarks/cuda/cut_experts_kernel.py "$work/dump" "$work/experts.cu"
"$NVCC" -cubin -arch=sm_90 -O3 -std=c++17 "$work/experts.cu" -o "$OUT/experts.cubin"
python3 benchmarks/cuda/cut_experts_kernel.py --routing "$work/dump" "$work/routing.cu"
"$NVCC" -cubin -arch=sm_90 -O3 -std=c++17 "$work/routing.cu" -o "$OUT/routing.cubin"
LUMINAL_CUDA_TOP_RANKS=0 "$BUILD/benchmarks/cuda_dump_kernels" "$work/config/config.json" "$work/dump16" > "$work/dump.log" 2>&1 || { cat "$work/dump.log"; exit 1; }
python3 benchmarks/cuda/cut_experts_kernel.py --routing "$work/dump16" "$work/routing16.cu"
"$NVCC" -cubin -arch=sm_90 -O3 -std=c++17 "$work/routing16.cu" -o "$OUT/routing16.cubin"
du -sh "$OUT"
