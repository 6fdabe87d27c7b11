#pragma once
// Cache-blocked GEMM for prefill (m well above 1), in the GotoBLAS/BLIS style: B is packed in
// [KC × nr] column panels (bf16 widened to f32 while packing), A in [mr × KC] row panels, and a
// micro-kernel keeps the mr × nr C tile in registers: 6×16 in twelve ymm (AVX2/FMA), or 12×32 in
// 24 zmm where the CPU has AVX-512 (twice the FMA width and twice the tile). Needs AVX2 + FMA:
// the caller checks weight_gemm_has_avx2() first.
#include "backends/cpu/weight_gemm.h"

namespace luminal::cpu {

// Which micro-kernel: Auto takes AVX-512 where the CPU has it (and LUMINAL_CPU_AVX512 is not 0);
// asking for Avx512 on a CPU without it is an error. Bf16Pairs: the bf16-pair tile for bf16
// activations on bf16 weights wherever the CPU has AVX-512 BF16 (else an error), Auto's
// choice otherwise.
enum class GemmKernel { Auto, Avx2, Avx512, Bf16Pairs };

// C = A · Wᵀ with W [n, k] (f32 or bf16), as weight_gemm. With g.bf16_activations and bf16 W,
// where the bf16-pair tile runs (packed_gemm_pairs_bf16, or GemmKernel::Bf16Pairs), A is
// rounded to bf16 (to nearest even) and the products of bf16 pairs summed in f32 (VDPBF16PS):
// twice the products an instruction, as PyTorch runs a bf16 model; otherwise A stays f32.
bool packed_gemm_can_pair_bf16();  // the CPU has AVX-512 BF16
// Whether Auto takes the pair tile for bf16 activations: on AMD CPUs that can (where it measured
// faster than the f32 tile; not on a Xeon), or as LUMINAL_CPU_BF16_PAIRS=0/1 says.
bool packed_gemm_pairs_bf16();
void packed_weight_gemm(const WeightGemm& g, ThreadPool* pool, GemmKernel kernel = GemmKernel::Auto);

// Bᵀ = bf16 W rows [j, j + nr) × k values [0, kc) as pairs of k (from `w` = &W[j, 0], row
// stride ldw): dst[q * tile_nr + c] = the word (W[c, 2q], W[c, 2q + 1]), first in the low half;
// columns past nr and a last odd k's partner zero. The GEMM's B panels, and weight_panels.h's.
void pack_b_pairs(const uint16_t* w, int64_t ldw, int nr, int64_t kc, uint32_t* dst, int tile_nr);

// C = A · B with B f32 [k, n] row-major, as gemm_nn.
void packed_gemm_nn(const WeightGemm& g, ThreadPool* pool, GemmKernel kernel = GemmKernel::Auto);

}  // namespace luminal::cpu
