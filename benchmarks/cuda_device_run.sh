#!/usr/bin/env bash
# One call on the GPU machine: the CUDA backend's tests, then its speed on a random-weight model
# of a real architecture, with Hugging Face eager on the same weights for scale.
#
# The device image has no GoogleTest, nlohmann-json or PCRE2 headers, so the binaries are built
# here and carried:
#   cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release
#   ninja -C build-dev luminal tests/test_cuda tests/test_models
#   mkdir -p build-dev/lib && cp /lib/x86_64-linux-gnu/libpcre2-8.so.0 build-dev/lib/
#   strip build-dev/luminal build-dev/tests/test_cuda build-dev/tests/test_models
# then, through the device tool, with carry [build-dev/luminal, build-dev/tests, build-dev/lib]:
#   ARCHS="qwen3-0.6b llama-3-8b" PROFILE=1 LOGITS=32 TORCH_COMPILE=1 bash benchmarks/cuda_device_run.sh
# OVERLAP=1 also runs the fixture models and the benchmark without overlapping launches
# (LUMINAL_CUDA_OVERLAP=0; they are on by default). MODELS: where the random models are written
# (default /tmp; the 61 GB qwen3-30b-a3b fits in /dev/shm, not on the 64 GiB disk). LAYERS: fewer
# layers than the architecture has (e.g. a 2-layer qwen3-30b-a3b for LOGITS), or per entry,
# ARCHS="llama-3-8b qwen3-30b-a3b:8" (that model in $MODELS/qwen3-30b-a3b-8). AB_ENV: environment
# overrides for more benchmark runs in the same call (an A/B; sets separated by ';'). NCU_KERNEL: a regex of kernel
# names for Nsight Compute on one prefill (NCU_COUNT launches after NCU_SKIP, NCU_ARGS for the
# bench, NCU_NEW tokens generated so decode kernels run too, NCU_CLOCKS=1 unlocked clocks,
# NCU_ENV environment settings for that run alone, NCU_ARCHS the ARCHS entries it is for). SKIP_HF=1
# leaves out transformers eager (SKIP_TESTS=1 the tests, SKIP_FIXTURES=1 the fixture models,
# FIXTURE_FILTER picks some of them). AB_ARCHS: the ARCHS entries the AB_ENV
# runs are for (default all). TIMELINE=N: each luminal benchmark also
# records N decode steps' kernels through CUPTI (`bench --timeline`; the tables go to its file).
set -uo pipefail
# Every benchmark process times and refines its own schedules (the A/B sets must not share the
# first run's choices through the schedule cache); SCHEDULE_CACHE=1 keeps the cache on.
[ -n "${SCHEDULE_CACHE:-}" ] || export LUMINAL_CUDA_SCHEDULE_CACHE=0
BIN=${BIN:-build-dev}
ARCHS=${ARCHS:-qwen3-0.6b}
MODELS=${MODELS:-/tmp}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1  # everything is also kept in $OUT/run.log
export LD_LIBRARY_PATH="$PWD/$BIN/lib:${LD_LIBRARY_PATH:-}"
# The tests were built with their data folder's path here (/work/main/tests/data).
if [ ! -e /work/main/tests/data ]; then mkdir -p /work && ln -sfn "$PWD" /work/main; fi
# CUPTI for --timeline: the toolkit's, else the one PyTorch's wheels carry.
if [ -z "${LUMINAL_CUPTI:-}" ]; then
  LUMINAL_CUPTI=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda/lib64/libcupti.so* 2>/dev/null | head -n 1)
  [ -n "$LUMINAL_CUPTI" ] || LUMINAL_CUPTI=$(python3 -c "import glob, os, nvidia; print(([p for d in nvidia.__path__ for p in glob.glob(os.path.join(d, '*', 'lib', 'libcupti.so*'))] + [''])[0])" 2>/dev/null)
  export LUMINAL_CUPTI
fi

echo "== device [${SECONDS}s]"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader

# The models are made in the background while the tests run (the 8B one takes minutes).
# An entry of ARCHS may name its own layer count, "qwen3-30b-a3b:8" (else LAYERS, else all);
# its model then goes to $MODELS/qwen3-30b-a3b-8 and its files are named that way.
spec() {  # sets NAME (the architecture), L (layers or empty) and ARCH (the model's folder name)
  NAME=${1%%:*}
  if [ "$1" != "$NAME" ]; then L=${1#*:}; ARCH=$NAME-$L; else L=${LAYERS:-}; ARCH=$NAME; fi
}
( PREV=""
  for SPEC in $ARCHS; do
    spec "$SPEC"
    # With DROP_MODELS, a model is made once the one before it is gone: /dev/shm holds the 61 GB
    # MoE only alone (session 30: made beside the 8B and an 8-layer MoE, it failed to write).
    if [ -n "${DROP_MODELS:-}" ] && [ -n "$PREV" ]; then while [ -e "$MODELS/$PREV" ]; do sleep 1; done; fi
    PREV=$ARCH
    # A model an earlier call made there (its .made beside it) is used, not made again. A folder
    # without .made is what a maker killed at the end of an earlier call leaves (the device tool
    # ends a call's background processes; session 45 lost a call waiting on one): made anew.
    [ -e "$MODELS/$ARCH.made" ] && continue
    rm -rf "${MODELS:?}/$ARCH" "$MODELS/$ARCH.failed"
    # .made either way, so the benchmark loop stops waiting; a failed or killed maker (session
    # 27: the 61 GB MoE beside two other models in /dev/shm) leaves .failed too.
    python3 scripts/make_random_model.py --arch "$NAME" --out "$MODELS/$ARCH" --no-gguf --init-device cuda ${L:+--layers $L} \
      > "$OUT/make_$ARCH.txt" 2>&1 || touch "$MODELS/$ARCH.failed"
    touch "$MODELS/$ARCH.made"
  done ) &

if [ -z "${SKIP_TESTS:-}" ]; then
echo "== test_cuda [${SECONDS}s]"
# CudaCodegen.* needs no GPU and runs in CI (its NVRTC compiles of every fixture plan took 88 s
# of session 24's first call): by default only the tests that need the GPU run here.
"$BIN/tests/test_cuda" --gtest_filter="${TEST_FILTER:-CudaBackend.*}" > "$OUT/test_cuda.txt" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|expected|element" "$OUT/test_cuda.txt" | head -n 40

# Session 37 on a fresh H200: CudaBackend.* took 430 s and the 24 fixture runs about 470 s, so
# the whole suite needs two calls of the device tool's 600 s (a TEST_FILTER / FIXTURE_FILTER each).
if [ -z "${SKIP_FIXTURES:-}" ]; then  # SKIP_FIXTURES=1 leaves them out
echo "== fixture models on cuda [${SECONDS}s]"
"$BIN/tests/test_models" --gtest_filter="${FIXTURE_FILTER:-*cuda*}" > "$OUT/test_models_cuda.txt" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|max_abs" "$OUT/test_models_cuda.txt" | head -n 40
fi

if [ -n "${OVERLAP:-}" ]; then
  echo "== fixture models on cuda, launches not overlapped (LUMINAL_CUDA_OVERLAP=0) [${SECONDS}s]"
  LUMINAL_CUDA_OVERLAP=0 "$BIN/tests/test_models" --gtest_filter='*cuda*' > "$OUT/test_models_cuda_overlap.txt" 2>&1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|max_abs" "$OUT/test_models_cuda_overlap.txt" | head -n 40
fi
fi

for SPEC in $ARCHS; do
spec "$SPEC"
echo "== random $ARCH [${SECONDS}s]"
while [ ! -e "$MODELS/$ARCH.made" ]; do sleep 1; done
tail -n 2 "$OUT/make_$ARCH.txt"
if [ -e "$MODELS/$ARCH.failed" ]; then
  echo "making $ARCH failed (see make_$ARCH.txt): its runs are skipped"
  if [ -n "${DROP_MODELS:-}" ]; then rm -rf "${MODELS:?}/$ARCH" "$MODELS/$ARCH.made"; fi
  continue
fi
echo "== luminal --backend cuda [${SECONDS}s]"
"$BIN/luminal" bench --model "$MODELS/$ARCH" --backend cuda --prompt-tokens "${PROMPT:-128}" --new-tokens "${NEW:-16}" ${PROFILE:+--profile} ${TIMELINE:+--timeline $TIMELINE} \
  --iters ${ITERS:-5} --context "${CONTEXT:-512}" > "$OUT/bench_$ARCH.txt" 2>&1
grep -v "^luminal cuda:" "$OUT/bench_$ARCH.txt" | tail -n 40  # the GEMV timings (LUMINAL_CUDA_TUNE_LOG=1) stay in the file
if [ -n "${OVERLAP:-}" ]; then
  echo "== luminal --backend cuda, launches not overlapped (LUMINAL_CUDA_OVERLAP=0) [${SECONDS}s]"
  LUMINAL_CUDA_OVERLAP=0 "$BIN/luminal" bench --model "$MODELS/$ARCH" --backend cuda --prompt-tokens "${PROMPT:-128}" \
    --new-tokens "${NEW:-16}" --iters ${ITERS:-5} --context "${CONTEXT:-512}" 2>&1 | tail -n 1
fi
if [ -n "${BF16:-}" ]; then
  echo "== luminal --backend cuda --activations bf16 (prefill's tensor-core products on bf16 activations) [${SECONDS}s]"
  "$BIN/luminal" bench --model "$MODELS/$ARCH" --backend cuda --activations bf16 --prompt-tokens "${PROMPT:-128}" \
    --new-tokens "${NEW:-16}" --iters ${ITERS:-5} --context "${CONTEXT:-512}" ${PROFILE:+--profile} > "$OUT/bench_bf16_$ARCH.txt" 2>&1
  grep -v "^luminal cuda:" "$OUT/bench_bf16_$ARCH.txt" | tail -n 40
fi
if [ -n "${AB_ENV:-}" ] && { [ -z "${AB_ARCHS:-}" ] || [[ " $AB_ARCHS " == *" $SPEC "* ]]; }; then
  # The same benchmark with environment overrides (e.g. AB_ENV="LUMINAL_CUDA_WORDS=0"), for an
  # A/B in one call; several sets separated by ';' run in turn (LUMINAL_BIN=path in a set runs
  # that binary instead). With BF16, in both activation
  # modes (AB_MODES to choose: "f32" for a decode-only comparison).
  IFS=';' read -ra AB_SETS <<< "$AB_ENV"
  for I in "${!AB_SETS[@]}"; do
  for MODE in ${AB_MODES:-f32 ${BF16:+bf16}}; do
    echo "== luminal --backend cuda --activations $MODE with ${AB_SETS[$I]} [${SECONDS}s]"
    # A set may name another binary, LUMINAL_BIN=path (an older build carried beside this one).
    AB_BIN=$(sed -n 's/.*LUMINAL_BIN=\([^ ]*\).*/\1/p' <<< "${AB_SETS[$I]}")
    env ${AB_SETS[$I]} "${AB_BIN:-$BIN/luminal}" bench --model "$MODELS/$ARCH" --backend cuda --activations "$MODE" --prompt-tokens "${PROMPT:-128}" \
      --new-tokens "${NEW:-16}" --iters ${ITERS:-5} --context "${CONTEXT:-512}" ${PROFILE:+--profile} ${TIMELINE:+--timeline $TIMELINE} > "$OUT/bench_ab${I}_${MODE}_$ARCH.txt" 2>&1
    grep -v "^luminal cuda:" "$OUT/bench_ab${I}_${MODE}_$ARCH.txt" | tail -n ${AB_LINES:-40}
  done
  done
fi
if [ -n "${NCU_KERNEL:-}" ] && { [ -z "${NCU_ARCHS:-}" ] || [[ " $NCU_ARCHS " == *" $SPEC "* ]]; }; then
  # Nsight Compute on the kernels whose names match NCU_KERNEL (a regex; functions are named
  # lm_<node kind>_<hash>) in one prefill, with NCU_ARGS (default: bf16 activations).
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  echo "== ncu ($NCU) on kernels matching ${NCU_KERNEL} [${SECONDS}s]"
  env ${NCU_ENV:-} "$NCU" --kernel-name "regex:${NCU_KERNEL}" --launch-skip "${NCU_SKIP:-0}" --launch-count "${NCU_COUNT:-4}" ${NCU_CLOCKS:+--clock-control none} --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \
    "$BIN/luminal" bench --model "$MODELS/$ARCH" --backend cuda ${NCU_ARGS:---activations bf16} --prompt-tokens "${PROMPT:-128}" \
    --new-tokens "${NCU_NEW:-1}" --iters 1 --context "${CONTEXT:-512}" > "$OUT/ncu_$ARCH.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Ipc|Executed Instructions  |No Eligible|Stall" "$OUT/ncu_$ARCH.txt" | head -n 40
fi
if [ -n "${LOGITS:-}" ]; then
  echo "== logits against transformers (bf16 and f32), ${LOGITS} tokens [${SECONDS}s]"
  python3 benchmarks/logits_check.py --model-dir "$MODELS/$ARCH" --luminal "$BIN/luminal" --backend cuda --device cuda \
    --tokens "$LOGITS" 2>&1 | tail -n 1
fi
if [ -z "${SKIP_HF:-}" ]; then
echo "== transformers eager (bf16, cuda) [${SECONDS}s]"
python3 - "$MODELS/$ARCH" "${PROMPT:-128}" "${NEW:-16}" <<'EOF'
import sys, time, torch
from transformers import AutoModelForCausalLM
path, prompt, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map="cuda").eval()
vocab = m.config.vocab_size
ids = torch.tensor([[(i * 7919 + 13) % vocab for i in range(prompt)]], device="cuda")
def run():
    torch.cuda.synchronize(); t0 = time.perf_counter()
    with torch.no_grad():
        out = m(ids, use_cache=True)
        torch.cuda.synchronize(); ttft = time.perf_counter() - t0
        past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t1 = time.perf_counter()
        for _ in range(new):
            out = m(tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
    return ttft * 1e3, (time.perf_counter() - t1) / new * 1e3
run()
r = sorted(run() for _ in range(3))[1]
print(f"hf eager: ttft {r[0]:.2f} ms, tpot {r[1]:.2f} ms")
EOF
fi
if [ -n "${TORCH_COMPILE:-}" ]; then
  echo "== transformers, static KV cache, torch.compile(mode=reduce-overhead) [${SECONDS}s]"
  ( python3 - "$MODELS/$ARCH" "${PROMPT:-128}" "${NEW:-16}" <<'EOF'
import sys, time, torch
from transformers import AutoModelForCausalLM
path, prompt, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map="cuda").eval()
# A static cache makes generate() compile the decoding forward itself (transformers'
# CompileConfig: inductor, mode="reduce-overhead", i.e. CUDA graphs); the prefill runs eager.
m.generation_config.cache_implementation = "static"
vocab = m.config.vocab_size
ids = torch.tensor([[(i * 7919 + 13) % vocab for i in range(prompt)]], device="cuda")
def gen(n):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    with torch.no_grad():
        m.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3
# Prefill alone first (eager; its cache has another length), then compile, capture and time.
ttft = sorted(gen(1) for _ in range(3))[1]
for _ in range(2):
    gen(new)
total = sorted(gen(new) for _ in range(3))[1]
print(f"torch.compile: ttft {ttft:.2f} ms, tpot {(total - ttft) / (new - 1):.2f} ms")
EOF
  ) 2> "$OUT/torch_compile_$ARCH.err" || tail -n 5 "$OUT/torch_compile_$ARCH.err"
fi
# DROP_MODELS=1: each model is deleted after its runs (/dev/shm holds the 61 GB MoE only once
# the smaller models are gone, and the process loading it needs the rest of the memory).
if [ -n "${DROP_MODELS:-}" ]; then rm -rf "${MODELS:?}/$ARCH" "$MODELS/$ARCH.made"; fi
done
echo "== summary [${SECONDS}s]"
python3 benchmarks/cuda_bench_summary.py "$OUT"
