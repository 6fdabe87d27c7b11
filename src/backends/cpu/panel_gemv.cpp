#include "backends/cpu/panel_gemv.h"

// GCC 12's AVX-512 intrinsics fill their unused pass-through operands with a self-initialised
// "undefined" vector, which its own -Wuninitialized then reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_panels.h"

namespace luminal::cpu {

namespace {

inline float panel_value(uint32_t w, bool odd) {
  const uint32_t u = panel_value_bits(w, odd);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Portable: rows [i0, i0 + rows) of C, the panel's `nr` existing columns.
void panel_rows_scalar(const WeightGemm& g, const uint32_t* panel, int64_t j0, int nr, int64_t i0, int rows) {
  const int64_t kq = panel_words(g.k);
  for (int64_t i = i0; i < i0 + rows; ++i) {
    const float* a = g.a + i * g.lda;
    for (int c = 0; c < nr; ++c) {
      float s = 0;
      for (int64_t q = 0; q < kq; ++q) {
        const uint32_t w = panel[q * kPanelWidth + c];
        s += a[2 * q] * panel_value(w, false);
        if (2 * q + 1 < g.k) s += a[2 * q + 1] * panel_value(w, true);
      }
      g.c[i * g.ldc + j0 + c] = s;
    }
  }
}

// R rows of A against one panel: per word row, two loads (32 columns), their even and odd
// values, and 4R FMAs into 4R accumulators (even and odd kept apart: enough chains to cover the
// FMA latency at one row, where the stream, not the FMAs, sets the pace). No software prefetch:
// the panels are one sequential stream, which the hardware prefetchers follow; asking for every
// line 1 KB ahead took 4-5% longer (benchmarks/panel_prefetch_study.cpp: 28 Qwen3-0.6B layers'
// panels, variants interleaved: none 0.94-0.96x the time of 1 KB, 2-4 KB 0.95-0.98x).
template <int R>
__attribute__((target("avx512f"))) void panel_rows_avx512(const WeightGemm& g, const uint32_t* panel, int64_t j0, int nr, int64_t i0) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const int64_t pairs = g.k / 2;  // whole words; an odd k's last word has only its even value
  const float* a[R];
  for (int r = 0; r < R; ++r) a[r] = g.a + (i0 + r) * g.lda;
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm512_setzero_ps();
  const uint32_t* pw = panel;
  for (int64_t q = 0; q < pairs; ++q, pw += kPanelWidth) {
    const __m512i w0 = _mm512_load_si512(pw), w1 = _mm512_load_si512(pw + 16);
    const __m512 e0 = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), e1 = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16));
    const __m512 o0 = _mm512_castsi512_ps(_mm512_and_si512(w0, high)), o1 = _mm512_castsi512_ps(_mm512_and_si512(w1, high));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 xe = _mm512_set1_ps(a[r][2 * q]), xo = _mm512_set1_ps(a[r][2 * q + 1]);
      acc[r][0] = _mm512_fmadd_ps(e0, xe, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(e1, xe, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(o0, xo, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(o1, xo, acc[r][3]);
    }
  }
  if (g.k % 2 != 0) {
    const __m512i w0 = _mm512_load_si512(pw), w1 = _mm512_load_si512(pw + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 xe = _mm512_set1_ps(a[r][g.k - 1]);
      acc[r][0] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), xe, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), xe, acc[r][1]);
    }
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xffff) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xffff) : nr <= 16 ? __mmask16(0) : __mmask16((1u << (nr - 16)) - 1);
  for (int r = 0; r < R; ++r) {
    float* c = g.c + (i0 + r) * g.ldc + j0;
    _mm512_mask_storeu_ps(c, m0, _mm512_add_ps(acc[r][0], acc[r][2]));
    _mm512_mask_storeu_ps(c + 16, m1, _mm512_add_ps(acc[r][1], acc[r][3]));
  }
}

// Panels [p0, p1): every row of A against each panel, four rows a pass (a panel of up to 1 MB,
// k = 16384, is read again from L2 by the next pass).
void panels_range(const WeightGemm& g, int64_t p0, int64_t p1) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  const int64_t kq = panel_words(g.k);
  for (int64_t p = p0; p < p1; ++p) {
    const uint32_t* panel = g.panels + p * kq * kPanelWidth;
    const int64_t j0 = p * kPanelWidth;
    const int nr = static_cast<int>(std::min<int64_t>(kPanelWidth, g.n - j0));
    for (int64_t i = 0; i < g.m;) {
      const int rows = static_cast<int>(std::min<int64_t>(4, g.m - i));
      if (!avx512) panel_rows_scalar(g, panel, j0, nr, i, rows);
      else if (rows == 4) panel_rows_avx512<4>(g, panel, j0, nr, i);
      else if (rows == 3) panel_rows_avx512<3>(g, panel, j0, nr, i);
      else if (rows == 2) panel_rows_avx512<2>(g, panel, j0, nr, i);
      else panel_rows_avx512<1>(g, panel, j0, nr, i);
      i += rows;
    }
  }
}

}  // namespace

void panel_gemv(const WeightGemm& g, ThreadPool* pool) {
  if (g.m <= 0 || g.n <= 0) return;
  const int64_t panels = (g.n + kPanelWidth - 1) / kPanelWidth;
  if (!pool || pool->size() == 1) return panels_range(g, 0, panels);
  // Chunks of panels taken from a shared counter, as weight_gemm's GEMV takes W's rows.
  const int64_t chunk = gemv_chunk_units(panels, panel_words(g.k) * kPanelWidth * 4, pool->size());
  pool->parallel_for_dynamic(panels, [&](int64_t b, int64_t e) { panels_range(g, b, e); }, chunk);
}

}  // namespace luminal::cpu
