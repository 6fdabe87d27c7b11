#include "backends/cpu/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/thread_pool.h"

namespace luminal::cpu {

namespace {

constexpr int MR = 6, NR = 16;  // micro-tile: 6 rows × 2 ymm = 12 accumulators of 16 registers
// KC: a [KC × 16] B panel (16 KiB) stays in L1 while A panels stream past it. MC: the packed
// [MC × KC] A block (144 KiB) stays in L2. NC: the packed [KC × NC] B block lives in L2/L3.
constexpr int64_t KC = 256, MC = 144, NC = 512;
constexpr int64_t kPrefetch = 256;  // bytes ahead in each W row while packing

// Loop bounds that split [0, len) into ceil(len / max) near-equal blocks, each a multiple of
// `unit` except the last: odd k = 257 becomes 129 + 128, not 256 + 1.
int64_t block_size(int64_t len, int64_t max, int64_t unit) {
  int64_t blocks = (len + max - 1) / max;
  int64_t b = (len + blocks - 1) / blocks;
  return (b + unit - 1) / unit * unit;
}

// A per-thread buffer of at least n floats, 64-byte aligned, reused across calls (the pool's
// threads live as long as the pool).
float* scratch(std::vector<float>& v, size_t n) {
  if (v.size() < n + 16) v.resize(n + 16);
  uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
}

// ---- packing ----

// A rows [i, i + mr) × cols [p0, p0 + kc) into dst[p * 6 + r], rows past mr zero.
__attribute__((noinline)) void pack_a(const float* a, int64_t lda, int mr, int64_t kc, float* dst) {
  if (mr == MR) {
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int64_t p = 0; p < kc; ++p, dst += MR) {
      dst[0] = a0[p], dst[1] = a1[p], dst[2] = a2[p], dst[3] = a3[p], dst[4] = a4[p], dst[5] = a5[p];
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p, dst += MR)
    for (int r = 0; r < MR; ++r) dst[r] = r < mr ? a[r * lda + p] : 0.0f;
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
// eight consecutive columns: dst[q * 16 + c] = W[c, q]. Spelled out so that it stays in registers.
template <bool BF16>
__attribute__((target("avx2,fma"))) inline void pack_8x8(const uint8_t* w, size_t stride, float* dst) {
  __m256 r0 = load8_w<BF16>(w), r1 = load8_w<BF16>(w + stride), r2 = load8_w<BF16>(w + 2 * stride),
         r3 = load8_w<BF16>(w + 3 * stride), r4 = load8_w<BF16>(w + 4 * stride), r5 = load8_w<BF16>(w + 5 * stride),
         r6 = load8_w<BF16>(w + 6 * stride), r7 = load8_w<BF16>(w + 7 * stride);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee), u2 = _mm256_shuffle_ps(t1, t3, 0x44),
         u3 = _mm256_shuffle_ps(t1, t3, 0xee), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_store_ps(dst + 0 * NR, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_store_ps(dst + 1 * NR, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_store_ps(dst + 2 * NR, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_store_ps(dst + 3 * NR, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_store_ps(dst + 4 * NR, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_store_ps(dst + 5 * NR, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_store_ps(dst + 6 * NR, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_store_ps(dst + 7 * NR, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// Bᵀ = W rows [j, j + nr) × cols [p0, p0 + kc) into dst[p * 16 + c] (bf16 widened), columns past
// nr zero. `w` points at W[j, p0]; ldw in elements.
template <bool BF16>
__attribute__((target("avx2,fma"), noinline)) void pack_b_transposed(const uint8_t* w, int64_t ldw, int nr, int64_t kc, float* dst) {
  constexpr size_t es = BF16 ? 2 : 4;
  const size_t stride = static_cast<size_t>(ldw) * es;
  int64_t p = 0;
  if (nr == NR) {
    for (; p + 8 <= kc; p += 8) {
      // Sixteen rows read in step are more streams than the hardware prefetcher keeps ahead of,
      // and W comes from DRAM: ask for each row's lines a few steps ahead, running on into the
      // next panel's rows (prefetching past W's end is harmless).
      if (p % (64 / es) == 0) {
        const int64_t q = p + kPrefetch / es;
        const uint8_t* ahead = q < kc ? w + q * es : w + NR * stride + (q - kc) * es;
        for (int c = 0; c < NR; ++c) _mm_prefetch(reinterpret_cast<const char*>(ahead + c * stride), _MM_HINT_T0);
      }
      pack_8x8<BF16>(w + p * es, stride, dst + p * NR);
      pack_8x8<BF16>(w + 8 * stride + p * es, stride, dst + p * NR + 8);
    }
  }
  for (; p < kc; ++p)
    for (int c = 0; c < NR; ++c) dst[p * NR + c] = c < nr ? load1_w(w + c * stride + p * es, BF16) : 0.0f;
}

// B rows [p0, p0 + kc) × cols [j, j + nr) of a row-major [k, n] f32 matrix into dst[p * 16 + c].
__attribute__((target("avx2,fma"))) void pack_b_rows(const float* b, int64_t ldb, int nr, int64_t kc, float* dst) {
  for (int64_t p = 0; p < kc; ++p, b += ldb, dst += NR) {
    if (nr == NR) {
      _mm256_store_ps(dst, _mm256_loadu_ps(b));
      _mm256_store_ps(dst + 8, _mm256_loadu_ps(b + 8));
    } else {
      for (int c = 0; c < NR; ++c) dst[c] = c < nr ? b[c] : 0.0f;
    }
  }
}

// ---- micro-kernel ----

// C[0:mr, 0:nr] (+)= A panel · B panel over kc. Twelve accumulators: two FMAs per broadcast of
// A, 12 FMAs per 8 loads, enough independent chains to cover the FMA latency on both ports.
__attribute__((target("avx2,fma"), noinline)) void kernel_6x16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                                                     bool accumulate, int mr, int nr) {
  // C's rows are far apart (a row is n floats): fetch the tile now so that the k loop hides it.
  for (int r = 0; r < mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + NR - 1), _MM_HINT_T0);
  }
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
  for (int r = 0; r < mr; ++r, c += ldc)
    for (int j = 0; j < nr; ++j) c[j] = accumulate ? c[j] + t[r * NR + j] : t[r * NR + j];
}

// ---- blocked loops ----

struct Job {
  const WeightGemm& g;
  bool b_row_major;  // B [k, n] row-major (gemm_nn), else Bᵀ = W [n, k]
};

// C rows [i0, i1) × cols [j0, j1) on the calling thread.
__attribute__((target("avx2,fma"))) void run_block(const Job& job, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  static thread_local std::vector<float> a_buf, b_buf;
  const WeightGemm& g = job.g;
  const bool bf16 = g.w_dtype == DType::BF16;
  const size_t es = bf16 ? 2 : 4;
  const int64_t kcb = block_size(g.k, KC, 1), mcb = block_size(i1 - i0, MC, MR), ncb = block_size(j1 - j0, NC, NR);
  float* ap = scratch(a_buf, static_cast<size_t>(mcb * kcb));
  float* bp = scratch(b_buf, static_cast<size_t>(ncb * kcb));
  for (int64_t jc = j0; jc < j1; jc += ncb) {
    const int64_t nc = std::min(ncb, j1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += kcb) {
      const int64_t kc = std::min(kcb, g.k - pc);
      auto pack_b = [&](int64_t jr) {
        const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
        const uint8_t* w = static_cast<const uint8_t*>(g.w) + static_cast<size_t>((jc + jr) * g.ldw + pc) * es;
        if (job.b_row_major) pack_b_rows(static_cast<const float*>(g.w) + pc * g.ldw + jc + jr, g.ldw, nr, kc, bp + jr * kc);
        else if (bf16) pack_b_transposed<true>(w, g.ldw, nr, kc, bp + jr * kc);
        else pack_b_transposed<false>(w, g.ldw, nr, kc, bp + jr * kc);
      };
      for (int64_t ic = i0; ic < i1; ic += mcb) {
        const int64_t mc = std::min(mcb, i1 - ic);
        for (int64_t ir = 0; ir < mc; ir += MR)
          pack_a(g.a + (ic + ir) * g.lda + pc, g.lda, static_cast<int>(std::min<int64_t>(MR, mc - ir)), kc, ap + ir * kc);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          // B panels are packed during the first row block, right before their first use: the
          // panel is then still in L1, and its W reads overlap the kernels (few rows: memory-bound).
          if (ic == i0) pack_b(jr);
          for (int64_t ir = 0; ir < mc; ir += MR)
            kernel_6x16(kc, ap + ir * kc, bp + jr * kc, g.c + (ic + ir) * g.ldc + jc + jr, g.ldc, pc > 0,
                        static_cast<int>(std::min<int64_t>(MR, mc - ir)), static_cast<int>(std::min<int64_t>(NR, nc - jr)));
        }
      }
    }
  }
}

// Threads split the larger of m and n in whole micro-tiles; each packs the other operand in full,
// so splitting the bigger side duplicates only the smaller one's packing. The grain makes
// parallel_for use exactly `threads` chunks.
void run(const WeightGemm& g, bool b_row_major, ThreadPool* pool) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) {  // an empty sum: the k loop would never write C
    for (int64_t i = 0; i < g.m; ++i) std::fill(g.c + i * g.ldc, g.c + i * g.ldc + g.n, 0.0f);
    return;
  }
  Job job{g, b_row_major};
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

void packed_weight_gemm(const WeightGemm& g, ThreadPool* pool) { run(g, false, pool); }

void packed_gemm_nn(const WeightGemm& g, ThreadPool* pool) { run(g, true, pool); }

}  // namespace luminal::cpu
