#include "backends/cpu/amx_gemm.h"

// GCC 12's AVX-512 intrinsics fill their unused pass-through operands with a self-initialised
// "undefined" vector, which its own -Wuninitialized then reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/scratch.h"
#include "backends/cpu/thread_pool.h"

namespace luminal::cpu {

namespace {

#define LM_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16")))

// Linux hands out the 8 KB tile state only to processes that ask (arch/x86/include/uapi/asm/prctl.h).
constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;

// Tiles: 0-3 hold a 2×2 block of C sums (16 W rows × 16 tokens of f32 each), 4-5 two W blocks
// (16 rows × 32 k of bf16), 6-7 two blocks of 16 tokens' activations, hi and then lo (16 k pairs
// × 16 tokens, each a pair of bf16: the VNNI layout TDPBF16PS reads its second operand in). All
// 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TileConfig tile_config() {
  TileConfig t;
  for (int i = 0; i < 8; ++i) {
    t.colsb[i] = 64;
    t.rows[i] = 16;
  }
  return t;
}

// r[i] (16 rows of 16 32-bit lanes) → r[j] = column j, in registers: 32-bit, then 64-bit
// interleaves inside 128-bit lanes, then two lane shuffles. Bits move unchanged (bf16 pairs too).
// Unrolled so the 16-entry arrays stay in zmm registers (as loops they went through the stack).
LM_AMX inline __attribute__((always_inline)) void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {  // u[4i + c], lane L: rows 4i..4i+3 of column 4L + c
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 16
  for (int c = 0; c < 4; ++c) {
    __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

// Blocks [b0, b1) of 16 tokens of A [m, k] f32 → two buffers (hi, lo; lo only with `split`, the
// bf16-activation mode multiplies hi alone), each block laid out as
// [k/2][16 tokens][2]: the 1 KB at k pair 16·kb of a block is the tile operand for k block kb.
// Tokens past m are zero. Each token's 32 k values become 16 pairs in one register, and a 16 × 16
// transpose turns 16 tokens' registers into the 16 rows of the operand, stored whole (it was 32
// scalar stores per token and k block: 8% of a Qwen3 prefill's perf samples).
LM_AMX void pack_blocks(const WeightGemm& g, int64_t b0, int64_t b1, bool split, uint16_t* hi, uint16_t* lo) {
  const int64_t pairs = g.k / 2;
  for (int64_t b = b0; b < b1; ++b) {
    float* hb = reinterpret_cast<float*>(hi) + b * pairs * 16;
    float* lb = reinterpret_cast<float*>(lo) + b * pairs * 16;
    for (int64_t p0 = 0; p0 < g.k; p0 += 32) {
      __m512 h[16], l[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const int64_t t = b * 16 + i;
        if (t >= g.m) {
          h[i] = l[i] = _mm512_setzero_ps();
          continue;
        }
        const float* a = g.a + t * g.lda + p0;
        __m256i hp[2], lp[2];
        for (int half = 0; half < 2; ++half) {
          __m512 x = _mm512_loadu_ps(a + 16 * half);
          __m256bh xh = _mm512_cvtneps_pbh(x);
          hp[half] = (__m256i)xh;
          if (!split) continue;
          // hi as f32 (bf16 bits shifted up), then the exact remainder rounded again; where hi is
          // infinite or NaN the remainder is 0, so an infinite activation gives ±inf sums as in
          // the reference (inf - inf would make them NaN)
          __m512 back = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)xh), 16));
          const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_sub_ps(back, back), _mm512_setzero_ps(), _CMP_EQ_OQ);
          lp[half] = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_sub_ps(finite, x, back));
        }
        h[i] = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(hp[0]), hp[1], 1));
        if (split) l[i] = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lp[0]), lp[1], 1));
      }
      transpose16x16(h);
      float* hd = hb + (p0 / 2) * 16;
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) _mm512_store_ps(hd + 16 * q, h[q]);
      if (!split) continue;
      transpose16x16(l);
      float* ld = lb + (p0 / 2) * 16;
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) _mm512_store_ps(ld + 16 * q, l[q]);
    }
  }
}

// src[r][t] (16 × 16 floats, row stride ls) → dst[t][r] for the first `tokens` t (row stride ld).
LM_AMX void transpose16(const float* src, int64_t ls, float* dst, int64_t ld, int64_t tokens) {
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ls);
  transpose16x16(r);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t)
    if (t < tokens) _mm512_storeu_ps(dst + t * ld, r[t]);
}

// Blocking: W rows in chunks per thread, whose sums (Cᵀ: W rows × tokens, f32, at most
// kSumsBytes) stay in a buffer while k goes by in steps that keep every token's packed slice (hi
// and lo) within kPackedSliceBytes. Both then stay in L2 while the chunk's W blocks read the
// slice, instead of every 32 W rows streaming all of the packed activations again from L3
// (which held a 128-row 4096² GEMM to 9.5 ms; 6.7 ms blocked).
constexpr int64_t kSumsBytes = 256 * 1024, kPackedSliceBytes = 512 * 1024;

// W rows [j0, j1) (multiples of 32) against every token.
LM_AMX void amx_rows(const WeightGemm& g, const uint16_t* hi, const uint16_t* lo, bool split, int64_t blocks, int64_t j0, int64_t j1) {
  static const TileConfig config = tile_config();
  _tile_loadconfig(&config);
  const uint16_t* w = static_cast<const uint16_t*>(g.w);
  const long wstride = static_cast<long>(g.ldw * 2);
  const int64_t mpad = blocks * 16, block_elems = g.k * 16;  // bf16 elements per 16-token block of hi
  const int64_t kc = std::clamp<int64_t>(kPackedSliceBytes / (mpad * 4) / 32 * 32, 32, g.k);
  const int64_t chunk_rows = std::clamp<int64_t>(kSumsBytes / (mpad * 4) / 32 * 32, 32, 1024);
  static thread_local std::vector<float> sums_buf;
  float* sums = scratch(sums_buf, static_cast<size_t>(chunk_rows * mpad));
  const long sstride = static_cast<long>(mpad * 4);
  // The 16 × 16 sums at src (W rows from `row`, tokens of `block`) into C.
  auto out = [&](const float* src, int64_t row, int64_t block) {
    transpose16(src, mpad, g.c + block * 16 * g.ldc + row, g.ldc, std::min<int64_t>(16, g.m - block * 16));
  };
  for (int64_t jc = j0; jc < j1; jc += chunk_rows) {
    const int64_t jend = std::min(j1, jc + chunk_rows);
    for (int64_t k0 = 0; k0 < g.k; k0 += kc) {
      const int64_t kb0 = k0 / 32, kb1 = std::min(g.k, k0 + kc) / 32;
      // The next panel's W lines (32 rows of a k slice), prefetched into L2 a few per tile step
      // of this panel: a prefill reads W cold from memory, and the hardware prefetchers left its
      // 32 strided rows at memory latency. 2 threads, m = 128, bf16 activations, W rotating
      // through copies larger than the L3 (medians of 20): Qwen3's gate/up 1.69 -> 1.36 ms, q
      // 1.23 -> 0.98 ms. Prefetching two or three panels ahead did no better.
      const int64_t row_lines = kb1 - kb0, panel_lines = 32 * row_lines;  // a k block of a row: 64 bytes
      const int64_t panel_iters = (blocks + 1) / 2 * (kb1 - kb0), per_iter = (panel_lines + panel_iters - 1) / panel_iters;
      for (int64_t j = jc; j < jend; j += 32) {
        const uint16_t* w0 = w + j * g.ldw;
        const uint16_t* w1 = w0 + 16 * g.ldw;
        // The panel the loops take next: the next 32 rows, else this chunk's first rows in the
        // next k slice, else the next chunk's first rows.
        const uint16_t* np = j + 32 < jend ? w0 + 32 * g.ldw + k0 : k0 + kc < g.k ? w + jc * g.ldw + k0 + kc : jend < j1 ? w + jend * g.ldw : nullptr;
        const char* next = reinterpret_cast<const char*>(np);
        int64_t line = 0, next_row = 0, next_col = 0;
        float* s0 = sums + (j - jc) * mpad;  // W rows j..j+15; +16 rows: s0 + 16 * mpad
        for (int64_t b = 0; b < blocks; b += 2) {
          const int64_t b1 = std::min(b + 1, blocks - 1);  // an odd last block pairs with itself
          const uint16_t* h0 = hi + b * block_elems;
          const uint16_t* h1 = hi + b1 * block_elems;
          const uint16_t* l0 = lo + b * block_elems;
          const uint16_t* l1 = lo + b1 * block_elems;
          float* c00 = s0 + b * 16;
          float* c01 = s0 + b1 * 16;
          float* c10 = c00 + 16 * mpad;
          float* c11 = c01 + 16 * mpad;
          if (k0 == 0) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
          } else {
            _tile_loadd(0, c00, sstride);
            _tile_loadd(1, c01, sstride);
            _tile_loadd(2, c10, sstride);
            _tile_loadd(3, c11, sstride);
          }
          // Each load goes out as soon as the products still reading its tile have been issued,
          // so it overlaps the products on the other tiles: loading tiles 6 and 7 together
          // made each pair wait for all four products before it (one thread, n = 3072, k = 1024,
          // m = 128: 2.6-2.8 → 2.1 ms, best of 15, six alternating pairs).
          for (int64_t kb = kb0; kb < kb1; ++kb) {
            if (next)
              for (int64_t p = 0; p < per_iter && line < panel_lines; ++p, ++line) {
                _mm_prefetch(next + next_row * wstride + next_col * 64, _MM_HINT_T1);
                if (++next_col == row_lines) next_col = 0, ++next_row;
              }
            _tile_loadd(4, w0 + kb * 32, wstride);
            _tile_loadd(6, h0 + kb * 512, 64);
            _tile_loadd(5, w1 + kb * 32, wstride);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(7, h1 + kb * 512, 64);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(1, 4, 7);
            if (split) _tile_loadd(6, l0 + kb * 512, 64);
            _tile_dpbf16ps(3, 5, 7);
            if (!split) continue;
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(7, l1 + kb * 512, 64);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(3, 5, 7);
          }
          _tile_stored(0, c00, sstride);
          _tile_stored(1, c01, sstride);
          _tile_stored(2, c10, sstride);
          _tile_stored(3, c11, sstride);
          // After the last k slice the block's sums go out to C at once, while they are still
          // in L1 (transposing a whole chunk afterwards, reading it back from L2, took 11.6% of
          // a Qwen3 prefill's perf samples; this takes 2.2%).
          if (k0 + kc < g.k) continue;
          out(c00, j, b);
          out(c10, j + 16, b);
          if (b1 != b) {
            out(c01, j, b1);
            out(c11, j + 16, b1);
          }
        }
      }
    }
  }
  _tile_release();
}

bool amx_probe() {
  const char* env = std::getenv("LUMINAL_CPU_AMX");
  if (env && std::string(env) == "0") return false;
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("avx512bf16") ||
      !__builtin_cpu_supports("avx512bw"))
    return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

bool amx_available() {
  static const bool ok = amx_probe();
  return ok;
}

bool amx_bf16_activations() {
  static const bool on = [] {
    const char* env = std::getenv("LUMINAL_CPU_BF16_ACTIVATIONS");
    return env && std::string(env) == "1";
  }();
  return on;
}

LM_AMX void amx_rows_to_bf16(const float* src, int64_t src_stride, int64_t rows, int64_t cols, uint16_t* dst, int64_t dst_stride) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = src + i * src_stride;
    uint16_t* d = dst + i * dst_stride;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j)));
    for (; j < cols; ++j) d[j] = f32_to_bf16(s[j]);
  }
}

bool amx_fits(const WeightGemm& g) {
  return g.w_dtype == DType::BF16 && g.m >= 1 && g.n > 0 && g.n % 32 == 0 && g.k > 0 && g.k % 32 == 0;
}

void amx_weight_gemm(const WeightGemm& g, ThreadPool* pool, bool bf16_activations) {
  const int64_t blocks = (g.m + 15) / 16;
  // 64-byte aligned (tile loads do not need it, but the packing's rows then start on lines).
  // The packed activations, kept by the calling thread between calls (every element is written).
  static thread_local std::vector<uint16_t> packed;
  const size_t elems = static_cast<size_t>(blocks * 16 * g.k);
  uint16_t* hi = scratch(packed, 2 * elems);
  uint16_t* lo = hi + elems;
  const bool split = !bf16_activations;
  auto pack = [&](int64_t b0, int64_t b1) { pack_blocks(g, b0, b1, split, hi, lo); };
  auto rows = [&](int64_t b0, int64_t b1) { amx_rows(g, hi, lo, split, blocks, b0 * 32, b1 * 32); };
  if (pool) {
    pool->parallel_for(blocks, pack, 1);
    // Chunks of four 32-row panels from a shared counter, as the GEMV's: on this project's VM a
    // thread slowed by other work then takes fewer, where one range per thread left the other
    // waiting. Qwen3-shaped 128-token prefill with bf16 activations, 6 alternating runs of 3:
    // median TTFT 307.5 -> 298 ms (in an earlier round 332-353 -> 246-315); f32-faithful 409
    // -> 415.5 ms, within the noise.
    pool->parallel_for_dynamic(g.n / 32, rows, 4);
  } else {
    pack(0, blocks);
    rows(0, g.n / 32);
  }
}

}  // namespace luminal::cpu
