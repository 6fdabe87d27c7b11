#pragma once
// C = A · Wᵀ for a weight matrix W stored row-major as [n, k] in f32 or bf16 (how checkpoints
// store linear layers), A f32 [m, k], C f32 [m, n], accumulating in f32. Decode (m = 1) is a
// stream over W, so it is memory-bound: W is read once, converted in registers, never copied.
// Prefill reuses each loaded block of W across four rows of A.
#include <cstdint>

#include "core/dtype.h"

namespace luminal::cpu {

class ThreadPool;

struct WeightGemm {
  const float* a;        // [m, k], row stride lda
  int64_t lda;
  const void* w;         // [n, k], row stride ldw (elements)
  int64_t ldw;
  DType w_dtype;         // F32 or BF16
  float* c;              // [m, n], row stride ldc
  int64_t ldc;
  int64_t m, n, k;
  // AMX: the activations as one bf16 part, not hi + lo (half the products; see amx_gemm.h).
  bool bf16_activations = false;
  // bf16 W packed at load as pair panels (weight_panels.h: [ceil(n / 32)][ceil(k / 2)][32]
  // words), read instead of `w` when set.
  const uint32_t* panels = nullptr;
};

// Runs on `pool` (nullptr: the calling thread only), splitting W's rows across threads.
void weight_gemm(const WeightGemm& g, ThreadPool* pool);

// C = A · B with B f32 or bf16 [k, n] row-major (rows contiguous along n): attention's
// probabilities times values (bf16: a bf16 KV cache's). Same fields; `w` is B with row stride ldw.
void gemm_nn(const WeightGemm& g, ThreadPool* pool);

// A decode GEMV's chunk, in units of `unit_bytes` of W, that threads take from a shared counter:
// W / (2 x threads) within 1-4 MB (each chunk a new stream for the hardware prefetchers, so long
// ones), at most a thread's even share. For weight_gemm's rows and panel_gemv's panels.
int64_t gemv_chunk_units(int64_t units, int64_t unit_bytes, int threads);

// Whether the AVX2 + FMA path runs on this machine (else a portable loop does).
bool weight_gemm_has_avx2();

}  // namespace luminal::cpu
