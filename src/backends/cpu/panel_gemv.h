#pragma once
// C = A · Wᵀ for a few rows of A (decode's one, a short prompt's few) with W read from its pair
// panels (weight_panels.h) instead of its rows: still one stream over W, now panel after panel.
// Each panel row of 32 words gives 32 outputs two values of k; the even values are the words
// shifted up, the odd ones the words with the low half cleared.
#include <cstdint>

#include "backends/cpu/weight_gemm.h"

namespace luminal::cpu {

// g.panels set, any g.m (meant for fewer than the packed GEMM's 16 rows); on `pool`, panels in
// chunks taken from a shared counter, as weight_gemm's GEMV does with W's rows.
void panel_gemv(const WeightGemm& g, ThreadPool* pool);

}  // namespace luminal::cpu
