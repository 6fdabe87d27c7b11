#pragma once
// Cache-blocked GEMM for prefill (m well above 1), in the GotoBLAS/BLIS style: B is packed in
// [KC × 16] column panels (bf16 widened to f32 while packing), A in [6 × KC] row panels, and a
// 6×16 AVX2/FMA micro-kernel keeps the C tile in twelve ymm registers. Needs AVX2 + FMA: the
// caller checks weight_gemm_has_avx2() first.
#include "backends/cpu/weight_gemm.h"

namespace luminal::cpu {

// C = A · Wᵀ with W [n, k] (f32 or bf16), as weight_gemm.
void packed_weight_gemm(const WeightGemm& g, ThreadPool* pool);

// C = A · B with B f32 [k, n] row-major, as gemm_nn.
void packed_gemm_nn(const WeightGemm& g, ThreadPool* pool);

}  // namespace luminal::cpu
