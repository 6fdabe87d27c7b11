#pragma once
// Prefill GEMM on Intel AMX tiles (Sapphire Rapids and newer): C = A · Wᵀ for bf16 weights W
// [n, k] and f32 activations A [m, k]. The tiles multiply bf16 pairs into f32 sums, so A is
// split into bf16 hi + lo (hi = A rounded, lo = the remainder rounded) and both are multiplied:
// about 16 of A's 24 mantissa bits, the weights exact, sums in f32 — within the 1e-5 of the sum
// of |products| that the other GEMMs are held to, where bf16 activations alone would be 4e-3.
#include "backends/cpu/weight_gemm.h"

namespace luminal::cpu {

// Whether AMX runs here: the CPU has AMX-TILE and AMX-BF16 (and AVX512-BF16 for the packing),
// Linux granted this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), and
// LUMINAL_CPU_AMX is not 0. Checked once.
bool amx_available();

// LUMINAL_CPU_BF16_ACTIVATIONS=1: multiply the hi part only, as bf16 engines (PyTorch's bf16
// path) do: half the tile work, sums within about 4e-3 of the sum of |products|. Off by default.
bool amx_bf16_activations();

// dst[i * dst_stride + j] = bf16(src[i * src_stride + j]) for i < rows, j < cols (rounded to
// nearest even, as f32_to_bf16); needs amx_available().
void amx_rows_to_bf16(const float* src, int64_t src_stride, int64_t rows, int64_t cols, uint16_t* dst, int64_t dst_stride);

// Whether amx_weight_gemm takes this product: bf16 weights, n and k multiples of 32, m ≥ 1.
bool amx_fits(const WeightGemm& g);

// C = A · Wᵀ on AMX tiles; the caller checks amx_available() and amx_fits(g). Threads split W's
// rows in blocks of 32.
// bf16_activations: the hi part only (see amx_bf16_activations()).
void amx_weight_gemm(const WeightGemm& g, ThreadPool* pool, bool bf16_activations = amx_bf16_activations());

}  // namespace luminal::cpu
