#!/usr/bin/env bash
# One device call for the MoE design studies that have not yet run (session 44): the whole
# decode layer as one persistent kernel (layer_persistent_bench.cu, 16 and 48 layers) and the
# experts split by column chunks as two kernels beside session 38-40's ways (moe_layer_bench.cu,
# 48 layers). Needs nvcc and one sm_90 GPU with about 62 GB free (48 layers of experts). Each
# run has a time limit, so a fault costs minutes, not the call. Output also in $OUT/studies.log.
#   bash benchmarks/cuda/studies_device_run.sh            (about 2-3 minutes on an H200)
# Session 45 ran it: the persistent layer lost (docs/cuda_backend.md); PERSISTENT=0 leaves it out.
# EXPERTS_CUBIN=path: moe_layer_bench also runs the compiler's experts-in-one kernel from that
# cubin (made here by benchmarks/cuda/cut_experts_kernel.py, whose header gives the commands;
# carry it) with stages of 220, 160 and 120 KB, beside the study's own experts kernel.
# ROUTING_CUBIN=path (with EXPERTS_CUBIN): also the compiler's routing group in place of the
# study's top-k before the 220 KB one (session 46).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/studies.log") 2>&1
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
for study in layer_persistent_bench moe_layer_bench; do
  "$NVCC" -O3 -arch=sm_90 -std=c++17 "benchmarks/cuda/$study.cu" -o "/tmp/$study" -lcuda || exit 1
done
if [ "${PERSISTENT:-1}" != 0 ]; then
  echo "== layer_persistent_bench 16 layers [${SECONDS}s]"
  timeout 240 /tmp/layer_persistent_bench 16 21 527
  echo "== layer_persistent_bench 48 layers [${SECONDS}s]"
  timeout 300 /tmp/layer_persistent_bench "${LAYERS:-48}" 11 527
fi
GENERATED=()
if [ -n "${EXPERTS_CUBIN:-}" ]; then
  for kb in 220 160 120; do GENERATED+=("$EXPERTS_CUBIN" "lm_experts:$kb"); done
fi
echo "== moe_layer_bench 48 layers [${SECONDS}s]"
timeout 300 /tmp/moe_layer_bench "${LAYERS:-48}" 21 "${GENERATED[@]}"
echo "== done [${SECONDS}s]"
