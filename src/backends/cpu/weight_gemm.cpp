#include "backends/cpu/weight_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/amx_gemm.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/panel_gemv.h"
#include "backends/cpu/thread_pool.h"
#include "core/error.h"

namespace luminal::cpu {

namespace {

// From this many rows of A the packed, cache-blocked GEMM (packed_gemm.cpp) beats the unpacked
// few-row tiles below: packing W costs about one extra pass over it, which pays once each W value
// serves enough rows. Measured with 2 threads on a 4096² bf16 weight (gemv_bench): 12 rows 6.6 ms
// unpacked against 10.6 packed, 16 rows even, 24 rows 16.3 against 8.5. f32 weights, twice the
// bytes per flop, are no less memory-bound. For gemm_nn, the row loop stays ahead on small
// attention blocks (measured with 2 threads on 4096², 1024², 576×1536 and k = 64 shapes).
constexpr int64_t kPackedMinRowsBF16 = 16, kPackedMinRowsF32 = 16, kPackedNNMinRows = 16, kPackedNNMinK = 128;
// From 8 rows a bf16 GEMM goes to AMX where it fits: the few-row AVX2 path is compute-bound there
// (4096² bf16, 2 threads, three alternating runs: 8 rows 3.8-4.6 ms against 2.9-4.6 on AMX, 12
// rows 5.4-6.8 against 3.0-4.1), while below 5 rows it streams W faster than AMX's 32 strided
// W rows a panel do (2 rows 1.6-2.0 ms against 2.7-3.1).
constexpr int64_t kAmxMinRows = 8;

inline float bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Portable path: one output at a time.
void gemm_rows_scalar(const WeightGemm& g, int64_t n0, int64_t n1) {
  for (int64_t j = n0; j < n1; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      const float* a = g.a + i * g.lda;
      float s = 0;
      if (g.w_dtype == DType::BF16) {
        const uint16_t* w = static_cast<const uint16_t*>(g.w) + j * g.ldw;
        for (int64_t p = 0; p < g.k; ++p) s += a[p] * bf16_value(w[p]);
      } else {
        const float* w = static_cast<const float*>(g.w) + j * g.ldw;
        for (int64_t p = 0; p < g.k; ++p) s += a[p] * w[p];
      }
      g.c[i * g.ldc + j] = s;
    }
}

__attribute__((target("avx2,fma"))) inline __m256 load8(const void* w, DType t, int64_t p) {
  if (t == DType::BF16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  return _mm256_loadu_ps(static_cast<const float*>(w) + p);
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

inline float tail_value(const void* w, DType t, int64_t p) {
  return t == DType::BF16 ? bf16_value(static_cast<const uint16_t*>(w)[p]) : static_cast<const float*>(w)[p];
}

// One row of W against one row of A, with four accumulators to hide the FMA latency (decode's
// odd last row).
__attribute__((target("avx2,fma"))) float dot_row(const float* a, const void* w, DType t, int64_t k) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), load8(w, t, p), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), load8(w, t, p + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 16), load8(w, t, p + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 24), load8(w, t, p + 24), s3);
  }
  for (; p + 8 <= k; p += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), load8(w, t, p), s0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; p < k; ++p) s += a[p] * tail_value(w, t, p);
  return s;
}

// Decode's GEMV: four W rows at a time, so each load of x serves four rows and four streams
// are in flight, with a software prefetch of the next four rows at the same column. Measured
// on a 2-core EPYC: 15.4 GB/s against 11.3 for one row with four accumulators, at or above a
// plain summing read of the same bytes (benchmarks/gemv_bench).
template <bool kBF16>
__attribute__((target("avx2,fma"))) void gemv_rows4(const WeightGemm& g, int64_t n0, int64_t n1) {
  const int64_t k = g.k, ldw = g.ldw, es = kBF16 ? 2 : 4;
  const float* x = g.a;
  int64_t j = n0;
  for (; j + 4 <= n1; j += 4) {
    const uint8_t* r[4];
    for (int q = 0; q < 4; ++q) r[q] = static_cast<const uint8_t*>(g.w) + (j + q) * ldw * es;
    const int64_t ahead = 4 * ldw * es;  // the same column four rows on
    __m256 a[4], b[4];
    for (int q = 0; q < 4; ++q) a[q] = b[q] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
      for (int q = 0; q < 4; ++q) _mm_prefetch(reinterpret_cast<const char*>(r[q] + p * es + ahead), _MM_HINT_T0);
      __m256 xa = _mm256_loadu_ps(x + p), xb = _mm256_loadu_ps(x + p + 8);
      for (int q = 0; q < 4; ++q) {
        a[q] = _mm256_fmadd_ps(xa, load8(r[q], kBF16 ? DType::BF16 : DType::F32, p), a[q]);
        b[q] = _mm256_fmadd_ps(xb, load8(r[q], kBF16 ? DType::BF16 : DType::F32, p + 8), b[q]);
      }
    }
    for (int q = 0; q < 4; ++q) {
      float s = hsum(_mm256_add_ps(a[q], b[q]));
      for (int64_t t = p; t < k; ++t) s += x[t] * tail_value(r[q], kBF16 ? DType::BF16 : DType::F32, t);
      g.c[j + q] = s;
    }
  }
  for (; j < n1; ++j) g.c[j] = dot_row(x, static_cast<const uint8_t*>(g.w) + j * ldw * es, g.w_dtype, k);
}

// Decode's GEMV on AVX-512 for bf16 weights: one W row at a time, in address order, so a
// chunk's rows are one sequential stream (rows of 1024 values are half a page: four rows at a
// time are four streams that each enter a new page every 2 KB). x comes from L1 for each row;
// four accumulators of 16 lanes hide the FMA latency; one software prefetch a 64-byte line,
// kSeqAhead bytes on (Qwen3-0.6B decode, three rounds: 512 bytes 63.4-64.9 ms, 1024 60.8-61.4,
// 2048 64.7-68.4).
constexpr int64_t kSeqAhead = 1024;

__attribute__((target("avx512f,avx512bw"))) inline __m512 bf16x16(const uint16_t* w) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w))), 16));
}

__attribute__((target("avx512f,avx512bw"))) void gemv_seq_bf16_avx512(const WeightGemm& g, int64_t n0, int64_t n1) {
  const int64_t k = g.k, ldw = g.ldw;
  const float* x = g.a;
  for (int64_t j = n0; j < n1; ++j) {
    const uint16_t* r = static_cast<const uint16_t*>(g.w) + j * ldw;
    const char* line = reinterpret_cast<const char*>(r) + kSeqAhead;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) {  // 128 bytes of W, two lines
      _mm_prefetch(line + 2 * p, _MM_HINT_T0);
      _mm_prefetch(line + 2 * p + 64, _MM_HINT_T0);
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + p), bf16x16(r + p), s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + p + 16), bf16x16(r + p + 16), s1);
      s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + p + 32), bf16x16(r + p + 32), s2);
      s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + p + 48), bf16x16(r + p + 48), s3);
    }
    for (; p + 16 <= k; p += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + p), bf16x16(r + p), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    for (; p < k; ++p) s += x[p] * bf16_value(r[p]);
    g.c[j] = s;
  }
}

// LUMINAL_CPU_GEMV_SEQ=0: the four-row GEMV (for measuring), read once.
bool gemv_seq_on() {
  static const bool on = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && [] {
    const char* e = std::getenv("LUMINAL_CPU_GEMV_SEQ");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// A few rows of A (2 <= m < the packed GEMM's threshold, or AMX's where it takes them; in
// slices of kFewMaxRows): still a stream over W, so W must be read from memory once, in several
// streams. Four W rows at a time, k in chunks of kFewChunk:
// the chunk of W (2 KB in bf16) stays in L1 while every pair of A rows passes over it, and the
// partial sums wait in `acc` between chunks. The first pass prefetches the next four rows, as
// the GEMV does. 4×2 tiles of 8 accumulators plus 4 W and 2 A registers fit AVX2's 16.
constexpr int64_t kFewChunk = 256, kFewMaxRows = 8;

template <bool kBF16, bool kPrefetch>
__attribute__((target("avx2,fma"))) inline void few_rows_pass(const float* a0, const float* a1, const uint8_t* const r[4], int64_t ahead,
                                                              int64_t p0, int64_t p1, __m256* acc0, __m256* acc1) {
  const DType t = kBF16 ? DType::BF16 : DType::F32;
  const int64_t es = kBF16 ? 2 : 4;
  __m256 c0 = acc0[0], c1 = acc0[1], c2 = acc0[2], c3 = acc0[3];
  __m256 d0 = acc1[0], d1 = acc1[1], d2 = acc1[2], d3 = acc1[3];
  for (int64_t p = p0; p < p1; p += 8) {
    if (kPrefetch && (p & 15) == 0)
      for (int q = 0; q < 4; ++q) _mm_prefetch(reinterpret_cast<const char*>(r[q] + p * es + ahead), _MM_HINT_T0);
    __m256 x = _mm256_loadu_ps(a0 + p), y = _mm256_loadu_ps(a1 + p);
    __m256 w0 = load8(r[0], t, p), w1 = load8(r[1], t, p), w2 = load8(r[2], t, p), w3 = load8(r[3], t, p);
    c0 = _mm256_fmadd_ps(x, w0, c0), d0 = _mm256_fmadd_ps(y, w0, d0);
    c1 = _mm256_fmadd_ps(x, w1, c1), d1 = _mm256_fmadd_ps(y, w1, d1);
    c2 = _mm256_fmadd_ps(x, w2, c2), d2 = _mm256_fmadd_ps(y, w2, d2);
    c3 = _mm256_fmadd_ps(x, w3, c3), d3 = _mm256_fmadd_ps(y, w3, d3);
  }
  acc0[0] = c0, acc0[1] = c1, acc0[2] = c2, acc0[3] = c3;
  acc1[0] = d0, acc1[1] = d1, acc1[2] = d2, acc1[3] = d3;
}

// The odd last row of A against the same four W rows (already in L1).
template <bool kBF16>
__attribute__((target("avx2,fma"))) inline void few_rows_pass1(const float* a0, const uint8_t* const r[4], int64_t p0, int64_t p1,
                                                               __m256* acc) {
  const DType t = kBF16 ? DType::BF16 : DType::F32;
  __m256 c0 = acc[0], c1 = acc[1], c2 = acc[2], c3 = acc[3];
  for (int64_t p = p0; p < p1; p += 8) {
    __m256 x = _mm256_loadu_ps(a0 + p);
    c0 = _mm256_fmadd_ps(x, load8(r[0], t, p), c0);
    c1 = _mm256_fmadd_ps(x, load8(r[1], t, p), c1);
    c2 = _mm256_fmadd_ps(x, load8(r[2], t, p), c2);
    c3 = _mm256_fmadd_ps(x, load8(r[3], t, p), c3);
  }
  acc[0] = c0, acc[1] = c1, acc[2] = c2, acc[3] = c3;
}

template <bool kBF16>
__attribute__((target("avx2,fma"))) void gemm_few_rows(const WeightGemm& g, int64_t n0, int64_t n1) {
  const int64_t k = g.k, m = g.m, es = kBF16 ? 2 : 4, k8 = k & ~int64_t(7);
  const DType t = kBF16 ? DType::BF16 : DType::F32;
  alignas(32) __m256 acc[kFewMaxRows][4];
  int64_t j = n0;
  for (; j + 4 <= n1; j += 4) {
    const uint8_t* r[4];
    for (int q = 0; q < 4; ++q) r[q] = static_cast<const uint8_t*>(g.w) + (j + q) * g.ldw * es;
    const int64_t ahead = 4 * g.ldw * es;
    for (int64_t i = 0; i < m; ++i)
      for (int q = 0; q < 4; ++q) acc[i][q] = _mm256_setzero_ps();
    for (int64_t p0 = 0; p0 < k8; p0 += kFewChunk) {
      const int64_t p1 = std::min(k8, p0 + kFewChunk);
      int64_t i = 0;
      for (; i + 2 <= m; i += 2) {
        const float* a0 = g.a + i * g.lda;
        if (i == 0) few_rows_pass<kBF16, true>(a0, a0 + g.lda, r, ahead, p0, p1, acc[i], acc[i + 1]);
        else few_rows_pass<kBF16, false>(a0, a0 + g.lda, r, ahead, p0, p1, acc[i], acc[i + 1]);
      }
      if (i < m) few_rows_pass1<kBF16>(g.a + i * g.lda, r, p0, p1, acc[i]);
    }
    for (int64_t i = 0; i < m; ++i) {
      const float* a = g.a + i * g.lda;
      for (int q = 0; q < 4; ++q) {
        float s = hsum(acc[i][q]);
        for (int64_t p = k8; p < k; ++p) s += a[p] * tail_value(r[q], t, p);
        g.c[i * g.ldc + j + q] = s;
      }
    }
  }
  for (; j < n1; ++j)
    for (int64_t i = 0; i < m; ++i) g.c[i * g.ldc + j] = dot_row(g.a + i * g.lda, static_cast<const uint8_t*>(g.w) + j * g.ldw * es, t, k);
}

// One or two rows of A against short f32 or bf16 W rows (k a multiple of 16, at most 256: decode
// attention's keys, a head's 128 values each, and the query rows of its group of heads): one W
// row after another, strictly in address order, each sum reduced at its row's end. Reading four
// W rows in step (64 bytes of each in turn, as the few-row path does) ran at 20 GB/s on two
// threads where this runs at 33-35, the rate of the values' product over as many bytes (a
// scratch study of 28 layers x 8 heads x 1024 keys on the Zen 4 VM); so does two rows in step.
// More rows of A go in passes of two (the keys then come again from L2 for a cache of up to
// ~1K positions): four rows in one pass ran at 19-20 GB/s there, FMA- and load-bound.
constexpr int64_t kShortRowMax = 256;

// 16 values widened to f32: f32 as they are, bf16 exactly (a bf16 is the high half of its f32).
__attribute__((target("avx512f"))) inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) inline __m512 load16(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

// T: f32 W rows, or uint16_t for bf16 ones (a bf16 KV cache's keys: half the bytes).
template <int R, class T>
__attribute__((target("avx512f"))) void short_rows_avx512(const float* a, int64_t lda, const T* w, int64_t ldw, int64_t k, float* c,
                                                          int64_t ldc, int64_t n0, int64_t n1) {
  for (int64_t j = n0; j < n1; ++j) {
    const T* row = w + j * ldw;
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 32 <= k; p += 32) {
      const __m512 w0 = load16(row + p), w1 = load16(row + p + 16);
      for (int r = 0; r < R; ++r) {
        acc[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * lda + p), w0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * lda + p + 16), w1, acc[r][1]);
      }
    }
    if (p < k) {  // k = 16 mod 32
      const __m512 w0 = load16(row + p);
      for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * lda + p), w0, acc[r][0]);
    }
    for (int r = 0; r < R; ++r) c[r * ldc + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
  }
}

template <class T>
void short_rows_of(const WeightGemm& g, int64_t n0, int64_t n1) {
  const T* w = static_cast<const T*>(g.w);
  for (int64_t i = 0; i < g.m; i += 2) {
    if (i + 2 <= g.m) short_rows_avx512<2>(g.a + i * g.lda, g.lda, w, g.ldw, g.k, g.c + i * g.ldc, g.ldc, n0, n1);
    else short_rows_avx512<1>(g.a + i * g.lda, g.lda, w, g.ldw, g.k, g.c + i * g.ldc, g.ldc, n0, n1);
  }
}

bool short_rows(const WeightGemm& g, int64_t n0, int64_t n1) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 || g.k % 16 != 0 || g.k > kShortRowMax || g.m > 4) return false;
  if (g.w_dtype == DType::F32) short_rows_of<float>(g, n0, n1);
  else short_rows_of<uint16_t>(g, n0, n1);
  return true;
}

__attribute__((target("avx2,fma"))) void gemm_rows_avx2(const WeightGemm& g, int64_t n0, int64_t n1) {
  if (short_rows(g, n0, n1)) return;
  if (g.m == 1) {
    // Rows shorter than a 4 KB page in one stream; longer ones keep four streams, each a page
    // long before it moves on (4096² bf16, 8 KB rows: 24.2-25.2 GB/s four at a time, 23.3-23.4 one).
    if (g.w_dtype == DType::BF16 && g.k * 2 < 4096 && gemv_seq_on()) gemv_seq_bf16_avx512(g, n0, n1);
    else if (g.w_dtype == DType::BF16) gemv_rows4<true>(g, n0, n1);
    else gemv_rows4<false>(g, n0, n1);
    return;
  }
  // Slices of kFewMaxRows rows, each one stream over W.
  for (int64_t i0 = 0; i0 < g.m; i0 += kFewMaxRows) {
    WeightGemm s = g;
    s.a += i0 * g.lda, s.c += i0 * g.ldc, s.m = std::min(kFewMaxRows, g.m - i0);
    if (g.w_dtype == DType::BF16) gemm_few_rows<true>(s, n0, n1);
    else gemm_few_rows<false>(s, n0, n1);
  }
}

// One row of C: c = sum_p a[p] * B[p, :], eight columns per register.
__attribute__((target("avx2,fma"))) void nn_row_avx2(const float* a, const float* b, int64_t ldb, int64_t n, int64_t k, float* c) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t p = 0; p < k; ++p) {
      __m256 x = _mm256_set1_ps(a[p]);
      const float* row = b + p * ldb + j;
      s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(row), s0);
      s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(row + 8), s1);
      s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(row + 16), s2);
      s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(row + 24), s3);
    }
    _mm256_storeu_ps(c + j, s0);
    _mm256_storeu_ps(c + j + 8, s1);
    _mm256_storeu_ps(c + j + 16, s2);
    _mm256_storeu_ps(c + j + 24, s3);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 s0 = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p) s0 = _mm256_fmadd_ps(_mm256_set1_ps(a[p]), _mm256_loadu_ps(b + p * ldb + j), s0);
    _mm256_storeu_ps(c + j, s0);
  }
  for (; j < n; ++j) {
    float s = 0;
    for (int64_t p = 0; p < k; ++p) s += a[p] * b[p * ldb + j];
    c[j] = s;
  }
}

// Two rows of A against B [k, 16 × kBlocks] read row by row, so B is one sequential stream
// (decode attention's values: a head's rows of the cache, 512 bytes each at head_dim 128), both
// rows' sums in registers. Each lane sums over p in order, as nn_row_avx2 does. Measured on a
// Qwen3-0.6B layer's decode values (8 heads of 176 keys, 2 rows each, from memory, 2 threads):
// 37.5 µs against 43 for nn_row_avx2's 32-column strips.
// T: f32, or uint16_t for bf16 B rows (a bf16 KV cache's values), widened in registers.
template <int kBlocks, class T>
__attribute__((target("avx512f"))) void nn_rows2_avx512(const float* a0, const float* a1, const T* b, int64_t ldb, int64_t k,
                                                        float* c0, float* c1) {
  __m512 s0[kBlocks], s1[kBlocks];
  for (int j = 0; j < kBlocks; ++j) s0[j] = s1[j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const T* row = b + p * ldb;
    for (int j = 0; j < kBlocks; ++j) _mm_prefetch(reinterpret_cast<const char*>(row + 8 * ldb + 16 * j), _MM_HINT_T0);
    const __m512 x0 = _mm512_set1_ps(a0[p]), x1 = _mm512_set1_ps(a1[p]);
    for (int j = 0; j < kBlocks; ++j) {
      const __m512 w = load16(row + 16 * j);
      s0[j] = _mm512_fmadd_ps(x0, w, s0[j]);
      s1[j] = _mm512_fmadd_ps(x1, w, s1[j]);
    }
  }
  for (int j = 0; j < kBlocks; ++j) {
    _mm512_storeu_ps(c0 + 16 * j, s0[j]);
    if (c1) _mm512_storeu_ps(c1 + 16 * j, s1[j]);
  }
}

// Rows [i0, i1) of C by nn_rows2_avx512 where n is 16-128 in steps of 16 (false otherwise: past
// 128 the two rows' sums no longer fit the 32 registers); an odd last row goes with itself as
// its pair, its copy not stored.
template <class T>
void nn_rows_avx512_of(const WeightGemm& g, int64_t i0, int64_t i1) {
  using Fn = void (*)(const float*, const float*, const T*, int64_t, int64_t, float*, float*);
  static constexpr Fn kFns[] = {nn_rows2_avx512<1, T>, nn_rows2_avx512<2, T>, nn_rows2_avx512<3, T>, nn_rows2_avx512<4, T>,
                                nn_rows2_avx512<5, T>, nn_rows2_avx512<6, T>, nn_rows2_avx512<7, T>, nn_rows2_avx512<8, T>};
  const Fn fn = kFns[g.n / 16 - 1];
  const T* b = static_cast<const T*>(g.w);
  for (int64_t i = i0; i < i1; i += 2) {
    const bool pair = i + 1 < i1;
    const float* a0 = g.a + i * g.lda;
    fn(a0, pair ? a0 + g.lda : a0, b, g.ldw, g.k, g.c + i * g.ldc, pair ? g.c + (i + 1) * g.ldc : nullptr);
  }
}

bool nn_rows_avx512_fits(const WeightGemm& g) {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && g.n % 16 == 0 && g.n >= 16 && g.n <= 128;
}

bool nn_rows_avx512(const WeightGemm& g, int64_t i0, int64_t i1) {
  if (!nn_rows_avx512_fits(g)) return false;
  if (g.w_dtype == DType::BF16) nn_rows_avx512_of<uint16_t>(g, i0, i1);
  else nn_rows_avx512_of<float>(g, i0, i1);
  return true;
}

void nn_row_scalar(const float* a, const float* b, int64_t ldb, int64_t n, int64_t k, float* c) {
  for (int64_t j = 0; j < n; ++j) {
    float s = 0;
    for (int64_t p = 0; p < k; ++p) s += a[p] * b[p * ldb + j];
    c[j] = s;
  }
}

}  // namespace

void gemm_nn(const WeightGemm& g, ThreadPool* pool) {
  if (g.w_dtype != DType::F32 && g.w_dtype != DType::BF16) throw Error(std::string("gemm_nn: B must be f32 or bf16, got ") + dtype_name(g.w_dtype));
  if (g.m <= 0 || g.n <= 0) return;
  // bf16 B (a bf16 KV cache's values) is widened where it is read: while packing, or in the
  // AVX-512 rows' registers.
  if (g.m >= kPackedNNMinRows && g.k >= kPackedNNMinK && weight_gemm_has_avx2()) return packed_gemm_nn(g, pool);
  if (g.w_dtype == DType::BF16 && !nn_rows_avx512_fits(g)) {  // else: B widened once, O(k·n) beside O(m·k·n)
    std::vector<float> wide(static_cast<size_t>(g.k * g.n));
    const uint16_t* b = static_cast<const uint16_t*>(g.w);
    for (int64_t p = 0; p < g.k; ++p)
      for (int64_t j = 0; j < g.n; ++j) wide[static_cast<size_t>(p * g.n + j)] = bf16_to_f32(b[p * g.ldw + j]);
    WeightGemm f = g;
    f.w = wide.data(), f.ldw = g.n, f.w_dtype = DType::F32;
    return gemm_nn(f, pool);
  }
  const float* b = static_cast<const float*>(g.w);
  auto rows = [&](int64_t i0, int64_t i1) {
    if (nn_rows_avx512(g, i0, i1)) return;
    for (int64_t i = i0; i < i1; ++i) {
      if (weight_gemm_has_avx2()) nn_row_avx2(g.a + i * g.lda, b, g.ldw, g.n, g.k, g.c + i * g.ldc);
      else nn_row_scalar(g.a + i * g.lda, b, g.ldw, g.n, g.k, g.c + i * g.ldc);
    }
  };
  if (pool && g.m > 1) pool->parallel_for(g.m, rows, 4);
  else rows(0, g.m);
}

int64_t gemv_chunk_units(int64_t units, int64_t unit_bytes, int threads) {
  const int64_t chunk_bytes = std::clamp<int64_t>(units * unit_bytes / (2 * threads), int64_t(1) << 20, int64_t(4) << 20);
  return std::min((units + threads - 1) / threads, std::max<int64_t>(1, chunk_bytes / unit_bytes));
}

bool weight_gemm_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void weight_gemm(const WeightGemm& g, ThreadPool* pool) {
  if (g.w_dtype != DType::F32 && g.w_dtype != DType::BF16)
    throw Error(std::string("weight_gemm: weights must be f32 or bf16, got ") + dtype_name(g.w_dtype));
  if (g.m <= 0 || g.n <= 0) return;
  if (g.panels) {  // W packed at load (only bf16, and not where AMX runs)
    if (g.m >= kPackedMinRowsBF16 && weight_gemm_has_avx2()) return packed_weight_gemm(g, pool);
    return panel_gemv(g, pool);
  }
  // AMX tiles where the CPU has them: bf16 weights only (f32 ones would need splitting too).
  if (g.m >= kAmxMinRows && amx_fits(g) && amx_available()) return amx_weight_gemm(g, pool, g.bf16_activations || amx_bf16_activations());
  if (g.m >= (g.w_dtype == DType::BF16 ? kPackedMinRowsBF16 : kPackedMinRowsF32) && weight_gemm_has_avx2())
    return packed_weight_gemm(g, pool);
  auto rows = [&](int64_t n0, int64_t n1) {
    if (weight_gemm_has_avx2()) gemm_rows_avx2(g, n0, n1);
    else gemm_rows_scalar(g, n0, n1);
  };
  // Chunks of 4-row groups taken from a shared counter: on a shared machine a thread slowed by
  // other work takes fewer chunks instead of holding the other at the end. Each chunk is a new
  // stream for the hardware prefetchers, so chunks are long: W / (2 x threads), within 1-4 MB
  // (a matrix of 2 MB or less is split in halves, a vocabulary head in 4 MB pieces). Chunks of
  // 32 groups (256 KB of a Qwen3-0.6B layer's 2 KB rows) cost 4-5% of its decode
  // (docs/cpu_backend.md).
  if (pool) {
    const int64_t groups = (g.n + 3) / 4;
    const int64_t chunk = gemv_chunk_units(groups, 4 * g.ldw * static_cast<int64_t>(dtype_size(g.w_dtype)), pool->size());
    pool->parallel_for_dynamic(groups, [&](int64_t b, int64_t e) { rows(4 * b, std::min(g.n, 4 * e)); }, chunk);
  } else {
    rows(0, g.n);
  }
}

}  // namespace luminal::cpu
