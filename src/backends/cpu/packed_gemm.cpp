#include "backends/cpu/packed_gemm.h"

// GCC 12's AVX-512 intrinsics fill their unused pass-through operands with a self-initialised
// "undefined" vector, which its own -Wuninitialized then reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/scratch.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_panels.h"
#include "core/dtype.h"
#include "core/error.h"

namespace luminal::cpu {

namespace {

// The micro-kernel's C tile is mr × nr, held in registers: AVX2 6 × 16 (12 ymm accumulators
// of 16), AVX-512 12 × 32 (24 zmm of 32). KC: a [KC × nr] B panel stays in L2 (see the tiles)
// while A panels stream past it. MC (a multiple of both mr): the packed [MC × KC] A block stays
// in L2. NC: the packed [KC × NC] B block lives in L2/L3.
constexpr int kMaxMR = 12;
constexpr int64_t MC = 144, NC = 512;
using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int mr, int nr);
struct Tile {
  int mr, nr;
  int64_t kc;
  MicroKernel kernel;
  // Panels of bf16 pairs (k and k + 1 in one 32-bit word, the layout VDPBF16PS reads) instead
  // of f32: A rounded to bf16, W's words as stored. A panel then holds ceil(kc / 2) words a row.
  bool pairs = false;
};
constexpr int64_t kPrefetch = 256;  // bytes ahead in each W row while packing

// Loop bounds that split [0, len) into ceil(len / max) near-equal blocks, each a multiple of
// `unit` except the last: odd k = 257 becomes 129 + 128, not 256 + 1.
int64_t block_size(int64_t len, int64_t max, int64_t unit) {
  int64_t blocks = (len + max - 1) / max;
  int64_t b = (len + blocks - 1) / blocks;
  return (b + unit - 1) / unit * unit;
}

// ---- packing ----

// A rows [i, i + mr) × cols [p0, p0 + kc) into dst[p * tile_mr + r], rows past mr zero.
__attribute__((noinline)) void pack_a(const float* a, int64_t lda, int mr, int64_t kc, float* dst, int tile_mr) {
  const float* rows[kMaxMR];
  for (int r = 0; r < tile_mr; ++r) rows[r] = a + (r < mr ? r : 0) * lda;
  int64_t p = 0;
  if (mr == tile_mr && tile_mr % 4 == 0) {
    // Whole panels four rows by four k values at a time, transposed in SSE registers: half the
    // instructions of one element at a time (perf had packing A at 6% of a prefill).
    for (; p + 4 <= kc; p += 4)
      for (int r = 0; r < tile_mr; r += 4) {
        __m128 x0 = _mm_loadu_ps(rows[r] + p), x1 = _mm_loadu_ps(rows[r + 1] + p), x2 = _mm_loadu_ps(rows[r + 2] + p),
               x3 = _mm_loadu_ps(rows[r + 3] + p);
        _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
        _mm_storeu_ps(dst + (p + 0) * tile_mr + r, x0);
        _mm_storeu_ps(dst + (p + 1) * tile_mr + r, x1);
        _mm_storeu_ps(dst + (p + 2) * tile_mr + r, x2);
        _mm_storeu_ps(dst + (p + 3) * tile_mr + r, x3);
      }
  }
  for (; p < kc; ++p)
    for (int r = 0; r < tile_mr; ++r) dst[p * tile_mr + r] = r < mr ? rows[r][p] : 0.0f;
}

// Eight consecutive W values widened to f32 (bf16 is the top half of an f32).
template <bool BF16>
__attribute__((target("avx2,fma"))) inline __m256 load8_w(const uint8_t* w) {
  if constexpr (BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))), 16));
  else
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w));
}

inline float load1_w(const uint8_t* w, bool bf16) {
  if (!bf16) return *reinterpret_cast<const float*>(w);
  uint32_t u = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(w)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Eight W rows (from `w`, `stride` bytes apart) × eight k values, transposed so that each k gets
// eight consecutive columns: dst[q * nr + c] = W[c, q]. Spelled out so that it stays in registers.
template <bool BF16>
__attribute__((target("avx2,fma"), always_inline)) inline void pack_8x8(const uint8_t* w, size_t stride, float* dst, int nr) {
  __m256 r0 = load8_w<BF16>(w), r1 = load8_w<BF16>(w + stride), r2 = load8_w<BF16>(w + 2 * stride),
         r3 = load8_w<BF16>(w + 3 * stride), r4 = load8_w<BF16>(w + 4 * stride), r5 = load8_w<BF16>(w + 5 * stride),
         r6 = load8_w<BF16>(w + 6 * stride), r7 = load8_w<BF16>(w + 7 * stride);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee), u2 = _mm256_shuffle_ps(t1, t3, 0x44),
         u3 = _mm256_shuffle_ps(t1, t3, 0xee), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_store_ps(dst + 0 * nr, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_store_ps(dst + 1 * nr, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_store_ps(dst + 2 * nr, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_store_ps(dst + 3 * nr, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_store_ps(dst + 4 * nr, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_store_ps(dst + 5 * nr, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_store_ps(dst + 6 * nr, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_store_ps(dst + 7 * nr, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// Bᵀ = W rows [j, j + nr) × cols [p0, p0 + kc) into dst[p * tile_nr + c] (bf16 widened), columns
// past nr zero. `w` points at W[j, p0]; ldw in elements.
template <bool BF16>
__attribute__((target("avx2,fma"), noinline)) void pack_b_transposed(const uint8_t* w, int64_t ldw, int nr, int64_t kc, float* dst,
                                                                  int tile_nr) {
  constexpr size_t es = BF16 ? 2 : 4;
  const size_t stride = static_cast<size_t>(ldw) * es;
  int64_t p = 0;
  if (nr == tile_nr) {
    // A line of each row at a time (64 / es values), eight rows at a time: W's rows are often a
    // multiple of 4 KiB apart, so a panel's rows share an L1 set, and this keeps fewer of their
    // lines live in it than reading a little of every row per step. A small gain: packing B went
    // from 15.1-15.8% to 14.4% of a warm Llama-shaped prefill's perf samples.
    constexpr int64_t line = 64 / es;
    for (; p + line <= kc; p += line) {
      // Sixteen or more rows read in step are more streams than the hardware prefetcher keeps
      // ahead of, and W comes from DRAM: ask for each row's lines a few steps ahead, running on
      // into the next panel's rows (prefetching past W's end is harmless).
      const int64_t q = p + kPrefetch / es;
      const uint8_t* ahead = q < kc ? w + q * es : w + tile_nr * stride + (q - kc) * es;
      for (int c = 0; c < tile_nr; ++c) _mm_prefetch(reinterpret_cast<const char*>(ahead + c * stride), _MM_HINT_T0);
      for (int c = 0; c < tile_nr; c += 8)
        for (int64_t s = 0; s < line; s += 8) pack_8x8<BF16>(w + c * stride + (p + s) * es, stride, dst + (p + s) * tile_nr + c, tile_nr);
    }
    for (; p + 8 <= kc; p += 8)
      for (int c = 0; c < tile_nr; c += 8) pack_8x8<BF16>(w + c * stride + p * es, stride, dst + p * tile_nr + c, tile_nr);
  }
  for (; p < kc; ++p)
    for (int c = 0; c < tile_nr; ++c) dst[p * tile_nr + c] = c < nr ? load1_w(w + c * stride + p * es, BF16) : 0.0f;
}

// B rows [p0, p0 + kc) × cols [j, j + nr) of a row-major [k, n] f32 or bf16 matrix (ldb in
// elements; bf16: a bf16 KV cache's values, widened exactly) into dst[p * tile_nr + c].
template <bool BF16>
__attribute__((target("avx2,fma"))) void pack_b_rows(const uint8_t* b, int64_t ldb, int nr, int64_t kc, float* dst, int tile_nr) {
  constexpr size_t es = BF16 ? 2 : 4;
  const size_t stride = static_cast<size_t>(ldb) * es;
  for (int64_t p = 0; p < kc; ++p, b += stride, dst += tile_nr) {
    if (nr == tile_nr) {
      for (int c = 0; c < tile_nr; c += 8) {
        if constexpr (BF16) {
          const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + c * es)));
          _mm256_store_ps(dst + c, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
        } else {
          _mm256_store_ps(dst + c, _mm256_loadu_ps(reinterpret_cast<const float*>(b) + c));
        }
      }
    } else {
      for (int c = 0; c < tile_nr; ++c) dst[c] = c < nr ? load1_w(b + c * es, BF16) : 0.0f;
    }
  }
}

// A rows [i, i + mr) × cols [p0, p0 + kc) rounded to bf16 (to nearest even), as pairs: word q of
// row r, (A[r, 2q], A[r, 2q + 1]) with the first in the low half, into dst[q * tile_mr + r];
// rows past mr and a last odd k's partner zero.
__attribute__((target("avx512f,avx512bf16"), noinline)) void pack_a_pairs(const float* a, int64_t lda, int mr, int64_t kc, uint32_t* dst,
                                                                       int tile_mr) {
  const int64_t kq = (kc + 1) / 2;
  for (int r = 0; r < tile_mr; ++r) {
    uint32_t* out = dst + r;
    if (r >= mr) {
      for (int64_t q = 0; q < kq; ++q) out[q * tile_mr] = 0;
      continue;
    }
    const float* row = a + r * lda;
    int64_t q = 0;
    for (; 2 * q + 32 <= kc; q += 16) {  // 32 values: VCVTNE2PS2BF16 puts the second operand's first
      alignas(64) uint32_t t[16];
      _mm512_store_si512(t, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 2 * q + 16), _mm512_loadu_ps(row + 2 * q)));
      for (int i = 0; i < 16; ++i) out[(q + i) * tile_mr] = t[i];
    }
    for (; q < kq; ++q)
      out[q * tile_mr] = f32_to_bf16(row[2 * q]) | (2 * q + 1 < kc ? static_cast<uint32_t>(f32_to_bf16(row[2 * q + 1])) << 16 : 0u);
  }
}

}  // namespace

void pack_b_pairs(const uint16_t* w, int64_t ldw, int nr, int64_t kc, uint32_t* dst, int tile_nr) {
  const int64_t kq = (kc + 1) / 2;
  int64_t q = 0;
  // W's own 32-bit words where rows and the start are even: the f32 packing moves them as they are.
  if (ldw % 2 == 0 && reinterpret_cast<uintptr_t>(w) % 4 == 0 && kc >= 2 && weight_gemm_has_avx2()) {
    q = kc / 2;
    pack_b_transposed<false>(reinterpret_cast<const uint8_t*>(w), ldw / 2, nr, q, reinterpret_cast<float*>(dst), tile_nr);
  }
  for (; q < kq; ++q)
    for (int c = 0; c < tile_nr; ++c) {
      const uint16_t* x = w + c * ldw + 2 * q;
      dst[q * tile_nr + c] = c >= nr ? 0u : x[0] | (2 * q + 1 < kc ? static_cast<uint32_t>(x[1]) << 16 : 0u);
    }
}

namespace {

// Whole pairs of k from word rows (32 words apart) into f32 rows of tile_nr (16 or 32) values:
// each word row's even values (shifted up) then its odd ones (low half cleared). Returns the
// values of k done (kc rounded down to even).
__attribute__((target("avx512f"))) int64_t widen_panel_rows(const uint32_t* words, int64_t kc, float* dst, int tile_nr) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  int64_t p = 0;
  for (; p + 2 <= kc; p += 2, words += kPanelWidth) {
    for (int c = 0; c < tile_nr; c += 16) {
      const __m512i w = _mm512_loadu_si512(words + c);
      _mm512_store_ps(dst + p * tile_nr + c, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
      _mm512_store_ps(dst + (p + 1) * tile_nr + c, _mm512_castsi512_ps(_mm512_and_si512(w, high)));
    }
  }
  return p;
}

// Bᵀ = W rows [j, j + tile_nr) × cols [p0, p0 + kc) widened to f32 from W's pair panels
// (weight_panels.h), into dst[p * tile_nr + c]: `words` is the panel's word row of k pair 0 at
// lane j % 32. No transpose: a word row holds two values of k for 32 columns. Columns past n are
// the panels' zeros.
void pack_b_from_panels(const uint32_t* words, int64_t p0, int64_t kc, float* dst, int tile_nr) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  int64_t p = 0;
  auto one = [&](int64_t at) {  // value k = p0 + at, every column
    const uint32_t* row = words + ((p0 + at) / 2) * kPanelWidth;
    const bool odd = (p0 + at) % 2 != 0;
    for (int c = 0; c < tile_nr; ++c) {
      const uint32_t u = panel_value_bits(row[c], odd);
      std::memcpy(dst + at * tile_nr + c, &u, 4);
    }
  };
  if (p0 % 2 != 0 && p < kc) one(p++);
  if (avx512) p = widen_panel_rows(words + ((p0 + p) / 2) * kPanelWidth, kc - p, dst + p * tile_nr, tile_nr) + p;
  for (; p < kc; ++p) one(p);
}

// ---- micro-kernel ----

// C's rows are far apart (a row is n floats): fetch the tile now so that the k loop hides it.
inline void prefetch_c_tile(const float* c, int64_t ldc, int mr, int tile_nr) {
  for (int r = 0; r < mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + tile_nr - 1), _MM_HINT_T0);
  }
}

// An edge tile's sums, stored row-major in t ([mr rows][tile_nr]), into the mr × nr part of C
// that exists: nothing is written past column n.
inline void store_edge_tile(const float* t, int tile_nr, float* c, int64_t ldc, bool accumulate, int mr, int nr) {
  for (int r = 0; r < mr; ++r, c += ldc)
    for (int j = 0; j < nr; ++j) c[j] = accumulate ? c[j] + t[r * tile_nr + j] : t[r * tile_nr + j];
}

// C[0:mr, 0:nr] (+)= A panel · B panel over kc. Twelve accumulators: two FMAs per broadcast of
// A, 12 FMAs per 8 loads, enough independent chains to cover the FMA latency on both ports.
__attribute__((target("avx2,fma"), noinline)) void kernel_6x16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                                                     bool accumulate, int mr, int nr) {
  constexpr int MR = 6, NR = 16;
  prefetch_c_tile(c, ldc, mr, NR);
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, a += MR, b += NR) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), x;
    x = _mm256_broadcast_ss(a + 0), c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + 1), c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2), c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3), c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a + 4), c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a + 5), c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; ++r, c += ldc) {
      if (accumulate) {
        acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_loadu_ps(c));
        acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_loadu_ps(c + 8));
      }
      _mm256_storeu_ps(c, acc[r][0]);
      _mm256_storeu_ps(c + 8, acc[r][1]);
    }
    return;
  }
  // Edge tile: through a buffer, writing only the mr × nr part that exists.
  alignas(32) float t[MR * NR];
  for (int r = 0; r < MR; ++r) {
    _mm256_store_ps(t + r * NR, acc[r][0]);
    _mm256_store_ps(t + r * NR + 8, acc[r][1]);
  }
  store_edge_tile(t, NR, c, ldc, accumulate, mr, nr);
}

// An AVX-512 tile's sums, R rows × 32 columns (two zmm a row), into C's mr × nr part: straight
// into C's rows where the tile is whole (12 × 32), else through a buffer, writing only the part
// that exists.
template <int R>
__attribute__((target("avx512f"), always_inline)) inline void store_tile_x32(const __m512 (&acc)[R][2], float* c, int64_t ldc, bool accumulate,
                                                                           int mr, int nr) {
  constexpr int NR = 32;
  if (R == 12 && mr == R && nr == NR) {
    for (int r = 0; r < R; ++r, c += ldc) {
      __m512 lo = acc[r][0], hi = acc[r][1];
      if (accumulate) {
        lo = _mm512_add_ps(lo, _mm512_loadu_ps(c));
        hi = _mm512_add_ps(hi, _mm512_loadu_ps(c + 16));
      }
      _mm512_storeu_ps(c, lo);
      _mm512_storeu_ps(c + 16, hi);
    }
    return;
  }
  alignas(64) float t[R * NR];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(t + r * NR, acc[r][0]);
    _mm512_store_ps(t + r * NR + 16, acc[r][1]);
  }
  store_edge_tile(t, NR, c, ldc, accumulate, mr, nr);
}

// The AVX-512 tile's last rows when they are R (4 or 8) or fewer: the same product over only
// R of the A panel's 12 rows (its stride stays 12), so a 128-row prefill's last tile (8 rows)
// does two thirds of a full tile's FMAs, not all of them.
template <int R>
__attribute__((target("avx512f"), noinline)) void kernel_rows_x32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                                                        bool accumulate, int mr, int nr) {
  constexpr int MR = 12, NR = 32;
  prefetch_c_tile(c, ldc, mr, NR);
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p, a += MR, b += NR) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  store_tile_x32<R>(acc, c, ldc, accumulate, mr, nr);
}

// C[0:mr, 0:nr] (+)= A panel · B panel over kc on AVX-512: 24 zmm accumulators (12 rows × 32
// columns), two B loads and twelve broadcasts of A per k for 24 FMAs.
__attribute__((target("avx512f"), noinline)) void kernel_12x32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                                                     bool accumulate, int mr, int nr) {
  constexpr int MR = 12, NR = 32;
  if (mr <= 4) return kernel_rows_x32<4>(kc, a, b, c, ldc, accumulate, mr, nr);
  if (mr <= 8) return kernel_rows_x32<8>(kc, a, b, c, ldc, accumulate, mr, nr);
  prefetch_c_tile(c, ldc, mr, NR);
#define LM_ACC(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
  LM_ACC(0) LM_ACC(1) LM_ACC(2) LM_ACC(3) LM_ACC(4) LM_ACC(5) LM_ACC(6) LM_ACC(7) LM_ACC(8) LM_ACC(9) LM_ACC(10) LM_ACC(11)
#undef LM_ACC
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p, a += MR, b += NR) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#define LM_FMA(r)                                  \
  {                                                \
    const __m512 x = _mm512_set1_ps(a[r]);         \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);     \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);     \
  }
    LM_FMA(0) LM_FMA(1) LM_FMA(2) LM_FMA(3) LM_FMA(4) LM_FMA(5) LM_FMA(6) LM_FMA(7) LM_FMA(8) LM_FMA(9) LM_FMA(10) LM_FMA(11)
#undef LM_FMA
  }
  const __m512 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41},   {c50, c51},
                             {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {c100, c101}, {c110, c111}};
  store_tile_x32<MR>(acc, c, ldc, accumulate, mr, nr);
}

// C[0:mr, 0:nr] (+)= A pairs · B pairs over kc values of k (ceil(kc / 2) words) with AVX-512
// BF16: per word of k, two B loads and R broadcasts of A for 2R VDPBF16PS, each 32 products
// (16 columns × 2 k) where an FMA makes 16. R (4, 8 or 12) of the panel's 12 rows.
template <int R>
__attribute__((target("avx512f,avx512bf16"), noinline)) void kernel_pairs_x32(int64_t kc, const float* ap, const float* bp, float* c,
                                                                           int64_t ldc, bool accumulate, int mr, int nr) {
  constexpr int MR = 12, NR = 32;
  const uint32_t* a = reinterpret_cast<const uint32_t*>(ap);
  const uint32_t* b = reinterpret_cast<const uint32_t*>(bp);
  prefetch_c_tile(c, ldc, mr, NR);
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t kq = (kc + 1) / 2;
#pragma GCC unroll 2
  for (int64_t q = 0; q < kq; ++q, a += MR, b += NR) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
  store_tile_x32<R>(acc, c, ldc, accumulate, mr, nr);
}

void kernel_pairs_12x32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int mr, int nr) {
  if (mr <= 4) return kernel_pairs_x32<4>(kc, a, b, c, ldc, accumulate, mr, nr);
  if (mr <= 8) return kernel_pairs_x32<8>(kc, a, b, c, ldc, accumulate, mr, nr);
  kernel_pairs_x32<12>(kc, a, b, c, ldc, accumulate, mr, nr);
}

// KC: B panels of 64-128 KiB, read from L2 by the micro-kernels, not panels that fit L1 beside
// the A panel (KC 256 / 192 / 384 until session 40). On a Zen 4 VM (32 KiB L1, 1 MiB L2) the
// 128-token prefills took 9-17% less time so (docs/cpu_backend.md, "Session 40"): perf had the
// pair kernel at about 89% of its peak against 80%, and packing B (W rows read in 2-4 KiB runs,
// not 384-768 bytes) faster too; C is summed into fewer times. The A block (MC × KC) stays
// within L2 at these sizes.
constexpr Tile kAvx2Tile{6, 16, 1024, kernel_6x16};
constexpr Tile kAvx512Tile{12, 32, 1024, kernel_12x32};
// The f32 tile's panel bytes: 1024 words of pairs, 2048 values of k.
constexpr Tile kBf16PairsTile{12, 32, 2048, kernel_pairs_12x32, true};

// LUMINAL_CPU_KC: values of k a block, for every tile (for measuring other sizes on a machine).
std::optional<int64_t> kc_override() {
  static const std::optional<int64_t> kc = []() -> std::optional<int64_t> {
    const char* env = std::getenv("LUMINAL_CPU_KC");
    if (!env || !*env) return std::nullopt;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (*end != '\0' || v < 2 || v > (1 << 20))
      throw Error(std::string("LUMINAL_CPU_KC must be a whole number of k values from 2 to 1048576, got '") + env + "'");
    return v;
  }();
  return kc;
}

// ---- blocked loops ----

struct Job {
  const WeightGemm& g;
  bool b_row_major;  // B [k, n] row-major (gemm_nn), else Bᵀ = W [n, k]
  const Tile& tile;
};

// C rows [i0, i1) × cols [j0, j1) on the calling thread.
__attribute__((target("avx2,fma"))) void run_block(const Job& job, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  static thread_local std::vector<float> a_buf, b_buf;
  const WeightGemm& g = job.g;
  const Tile& t = job.tile;
  const bool bf16 = g.w_dtype == DType::BF16;
  const size_t es = bf16 ? 2 : 4;
  // With one row block (a prefill of up to MC tokens) each B panel is used by every row panel
  // right after it is packed and never again: one panel's room serves them all, and the column
  // block is the whole range, so A is packed once per k block instead of once per NC columns
  // (perf had packing A at 4-6% of a prefill).
  const bool stream_b = i1 - i0 <= MC;
  // Pairs: k blocks even (but the last), so W's words stay whole; a panel's k column is a word.
  const int64_t kcb = block_size(g.k, t.kc, t.pairs ? 2 : 1), mcb = block_size(i1 - i0, MC, t.mr);
  const int64_t ncb = stream_b ? j1 - j0 : block_size(j1 - j0, NC, t.nr);
  auto words = [&](int64_t kc) { return t.pairs ? (kc + 1) / 2 : kc; };
  float* ap = scratch(a_buf, static_cast<size_t>(mcb * words(kcb)));
  float* bp = scratch(b_buf, static_cast<size_t>((stream_b ? t.nr : ncb) * words(kcb)));
  auto panel = [&](int64_t jr, int64_t kc) { return stream_b ? bp : bp + jr * words(kc); };
  const int64_t kq_all = panel_words(g.k);
  for (int64_t jc = j0; jc < j1; jc += ncb) {
    const int64_t nc = std::min(ncb, j1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += kcb) {
      const int64_t kc = std::min(kcb, g.k - pc);
      // W's own pair panel at these columns and k (weights packed at load), lane (jc + jr) % 32.
      auto loaded_panel = [&](int64_t jr) {
        const int64_t j = jc + jr;
        return g.panels + (j / kPanelWidth) * kq_all * kPanelWidth + j % kPanelWidth;
      };
      auto pack_b = [&](int64_t jr) {
        const int nr = static_cast<int>(std::min<int64_t>(t.nr, nc - jr));
        const uint8_t* w = static_cast<const uint8_t*>(g.w) + static_cast<size_t>((jc + jr) * g.ldw + pc) * es;
        if (g.panels) pack_b_from_panels(loaded_panel(jr), pc, kc, panel(jr, kc), t.nr);
        else if (job.b_row_major) {
          const uint8_t* b = static_cast<const uint8_t*>(g.w) + static_cast<size_t>(pc * g.ldw + jc + jr) * es;
          if (bf16) pack_b_rows<true>(b, g.ldw, nr, kc, panel(jr, kc), t.nr);
          else pack_b_rows<false>(b, g.ldw, nr, kc, panel(jr, kc), t.nr);
        }
        else if (t.pairs)
          pack_b_pairs(reinterpret_cast<const uint16_t*>(w), g.ldw, nr, kc, reinterpret_cast<uint32_t*>(panel(jr, kc)), t.nr);
        else if (bf16) pack_b_transposed<true>(w, g.ldw, nr, kc, panel(jr, kc), t.nr);
        else pack_b_transposed<false>(w, g.ldw, nr, kc, panel(jr, kc), t.nr);
      };
      for (int64_t ic = i0; ic < i1; ic += mcb) {
        const int64_t mc = std::min(mcb, i1 - ic);
        for (int64_t ir = 0; ir < mc; ir += t.mr) {
          const int rows = static_cast<int>(std::min<int64_t>(t.mr, mc - ir));
          if (t.pairs) pack_a_pairs(g.a + (ic + ir) * g.lda + pc, g.lda, rows, kc, reinterpret_cast<uint32_t*>(ap + ir * words(kc)), t.mr);
          else pack_a(g.a + (ic + ir) * g.lda + pc, g.lda, rows, kc, ap + ir * kc, t.mr);
        }
        for (int64_t jr = 0; jr < nc; jr += t.nr) {
          // B panels are packed during the first row block, right before their first use: the
          // panel is then still in L1, and its W reads overlap the kernels (few rows: memory-bound).
          // The pair tile reads panels packed at load as they are (k blocks start at even k).
          const bool in_place = g.panels && t.pairs;
          if (ic == i0 && !in_place) pack_b(jr);
          const float* b = in_place ? reinterpret_cast<const float*>(loaded_panel(jr) + (pc / 2) * kPanelWidth) : panel(jr, kc);
          for (int64_t ir = 0; ir < mc; ir += t.mr)
            t.kernel(kc, ap + ir * words(kc), b, g.c + (ic + ir) * g.ldc + jc + jr, g.ldc, pc > 0,
                     static_cast<int>(std::min<int64_t>(t.mr, mc - ir)), static_cast<int>(std::min<int64_t>(t.nr, nc - jr)));
        }
      }
    }
  }
}

// Auto's choice: AVX-512 where the CPU has it, unless LUMINAL_CPU_AVX512=0 (for comparing the two).
bool avx512_by_default() {
  static const bool on = [] {
    const char* env = std::getenv("LUMINAL_CPU_AVX512");
    return __builtin_cpu_supports("avx512f") && !(env && std::string(env) == "0");
  }();
  return on;
}

// Threads split the larger of m and n in whole micro-tiles; each packs the other operand in full,
// so splitting the bigger side duplicates only the smaller one's packing. The grain makes
// parallel_for use exactly `threads` chunks.
void run(const WeightGemm& g, bool b_row_major, ThreadPool* pool, GemmKernel kernel) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) {  // an empty sum: the k loop would never write C
    for (int64_t i = 0; i < g.m; ++i) std::fill(g.c + i * g.ldc, g.c + i * g.ldc + g.n, 0.0f);
    return;
  }
  if (kernel == GemmKernel::Bf16Pairs && !packed_gemm_can_pair_bf16()) throw Error("packed GEMM: this CPU has no AVX-512 BF16");
  // bf16 activations on bf16 weights: products of bf16 pairs where asked for or where they pay.
  const bool pairs = !b_row_major && g.bf16_activations && g.w_dtype == DType::BF16 &&
                     (kernel == GemmKernel::Bf16Pairs || (kernel != GemmKernel::Avx2 && packed_gemm_pairs_bf16()));
  if (kernel == GemmKernel::Auto || kernel == GemmKernel::Bf16Pairs) kernel = avx512_by_default() ? GemmKernel::Avx512 : GemmKernel::Avx2;
  if (kernel == GemmKernel::Avx512 && !__builtin_cpu_supports("avx512f")) throw Error("packed GEMM: this CPU has no AVX-512");
  Tile tile = pairs ? kBf16PairsTile : kernel == GemmKernel::Avx512 ? kAvx512Tile : kAvx2Tile;
  tile.kc = kc_override().value_or(tile.kc);
  const int64_t MR = tile.mr, NR = tile.nr;
  Job job{g, b_row_major, tile};
  // Waking a thread costs microseconds: give each at least ~0.25 MFLOP.
  const int64_t work = g.m * g.n * g.k;
  const int threads = pool ? static_cast<int>(std::min<int64_t>(pool->size(), std::max<int64_t>(1, work >> 17))) : 1;
  const int64_t tiles_m = (g.m + MR - 1) / MR, tiles_n = (g.n + NR - 1) / NR;
  if (threads == 1 || (tiles_m < 2 && tiles_n < 2)) return run_block(job, 0, g.m, 0, g.n);
  if ((g.m <= g.n && tiles_n >= threads) || tiles_m < threads)
    pool->parallel_for(tiles_n, [&](int64_t b, int64_t e) { run_block(job, 0, g.m, b * NR, std::min(g.n, e * NR)); },
                       tiles_n / threads);
  else
    pool->parallel_for(tiles_m, [&](int64_t b, int64_t e) { run_block(job, b * MR, std::min(g.m, e * MR), 0, g.n); },
                       tiles_m / threads);
}

}  // namespace

bool packed_gemm_can_pair_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
}

bool packed_gemm_pairs_bf16() {
  static const bool on = [] {
    const char* env = std::getenv("LUMINAL_CPU_BF16_PAIRS");
    if (!packed_gemm_can_pair_bf16() || (env && std::string(env) == "0")) return false;
    // AMD's Zen 4 ran the pairs at 1.4-1.7x its f32 tile (session 31); a Xeon without AMX at
    // about 0.8x (session 24): only AMD's by default.
    return (env && std::string(env) == "1") || __builtin_cpu_is("amd");
  }();
  return on;
}

void packed_weight_gemm(const WeightGemm& g, ThreadPool* pool, GemmKernel kernel) { run(g, false, pool, kernel); }

void packed_gemm_nn(const WeightGemm& g, ThreadPool* pool, GemmKernel kernel) { run(g, true, pool, kernel); }

}  // namespace luminal::cpu
