// The weight GEMM against a double-precision product of the same (bf16-rounded) values.
#include "backends/cpu/weight_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "core/dtype.h"
#include "gemm_check.h"

namespace luminal::cpu {
namespace {

// w_pad: W's row stride past k (default 5 for bf16, 1 for f32).
void check(int64_t m, int64_t n, int64_t k, DType t, ThreadPool* pool, int64_t w_pad = -1) {
  std::mt19937 rng(static_cast<uint32_t>(m * 131 + n * 7 + k));
  std::uniform_real_distribution<float> d(-1, 1);
  int64_t lda = k + 3, ldw = k + (w_pad >= 0 ? w_pad : t == DType::BF16 ? 5 : 1), ldc = n + 2;  // padded rows
  std::vector<float> a(static_cast<size_t>(m * lda)), wf(static_cast<size_t>(n * ldw)), c(static_cast<size_t>(m * ldc), -7.0f);
  std::vector<uint16_t> wb(wf.size());
  for (float& x : a) x = d(rng);
  for (size_t i = 0; i < wf.size(); ++i) {
    wb[i] = f32_to_bf16(d(rng));
    wf[i] = t == DType::BF16 ? bf16_to_f32(wb[i]) : d(rng);
  }
  WeightGemm g{a.data(), lda, t == DType::BF16 ? static_cast<const void*>(wb.data()) : wf.data(), ldw, t, c.data(), ldc, m, n, k};
  weight_gemm(g, pool);
  testing::expect_double_product(
      c, ldc, m, n, k, -7.0f, [&](int64_t i, int64_t p) { return a[static_cast<size_t>(i * lda + p)]; },
      [&](int64_t p, int64_t j) { return wf[static_cast<size_t>(j * ldw + p)]; });
}

// m: the GEMV, the few-row path's pairs, odd last rows and slices of 8, and the packed GEMM (16);
// k = 520 crosses the few-row path's 256-wide chunks and ends in a tail.
TEST(WeightGemm, OddShapesBothDtypesWithAndWithoutThreads) {
  ThreadPool pool(3);
  for (DType t : {DType::BF16, DType::F32})
    for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 15, 16})
      for (int64_t n : {1, 2, 3, 17, 64})
        for (int64_t k : {1, 7, 8, 33, 100, 520}) {
          check(m, n, k, t, nullptr);
          check(m, n, k, t, &pool);
        }
}

// Decode's GEMV of bf16 weights: rows in whole 32-bit words (even strides) or not, k short of,
// at and past the 16-value steps and odd, groups of four rows and fewer; rows shorter than a
// page (one row at a time, with AVX-512) and longer (four at a time).
TEST(WeightGemm, GemvOfBf16WeightsWithEvenAndOddRowStrides) {
  ThreadPool pool(3);
  for (int64_t pad : {0, 2, 5})
    for (int64_t n : {1, 3, 4, 5, 17, 64})
      for (int64_t k : {2, 3, 30, 31, 32, 33, 64, 100, 520, 1031, 2047, 2048, 2100}) {
        check(1, n, k, DType::BF16, nullptr, pad);
        check(1, n, k, DType::BF16, &pool, pad);
      }
}

// Short rows (k a multiple of 16 up to 256: decode attention's keys, f32 or a bf16 cache's) with
// one to four rows of A take their own AVX-512 path: four W rows at a time and a tail of one to
// three; also rows packed tightly (stride k, as a KV cache holds them) and k just past the path
// (272, 264).
TEST(WeightGemm, ShortRowsOfAttentionKeys) {
  ThreadPool pool(2);
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t m : {1, 2, 3, 4, 5})
      for (int64_t n : {1, 3, 4, 7, 176})
        for (int64_t k : {16, 48, 64, 128, 256, 264, 272}) {
          check(m, n, k, t, nullptr);
          check(m, n, k, t, &pool, 0);
        }
}

TEST(WeightGemm, DecodeShapeOfARealLayer) {
  ThreadPool pool(2);
  check(1, 576, 1536, DType::BF16, &pool);
  check(7, 300, 576, DType::BF16, &pool);
}

// Weights of 8-16 MB, which the threads take in several 1-4 MB chunks, with a last chunk short of
// the others and a last group of fewer than four rows.
TEST(WeightGemm, WeightsOfSeveralChunks) {
  ThreadPool pool(3);
  check(1, 4103, 1024, DType::BF16, &pool);
  check(3, 4103, 1024, DType::BF16, &pool);
  check(1, 2051, 2048, DType::F32, &pool);
}

}  // namespace
}  // namespace luminal::cpu

namespace luminal::cpu {
namespace {

TEST(GemmNN, RowMajorBAgainstDoubleProduct) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t m : {1, 3, 6})
    for (int64_t n : {1, 8, 13, 64, 70})
      for (int64_t k : {1, 5, 40}) {
        int64_t lda = k + 1, ldb = n + 3, ldc = n;
        std::vector<float> a(static_cast<size_t>(m * lda)), b(static_cast<size_t>(k * ldb)), c(static_cast<size_t>(m * ldc));
        for (float& x : a) x = d(rng);
        for (float& x : b) x = d(rng);
        gemm_nn({a.data(), lda, b.data(), ldb, DType::F32, c.data(), ldc, m, n, k}, &pool);
        testing::expect_double_product(
            c, ldc, m, n, k, 0.0f, [&](int64_t i, int64_t p) { return a[i * lda + p]; }, [&](int64_t p, int64_t j) { return b[p * ldb + j]; });
      }
}

// Head-dim widths (16-128 in steps of 16 take two rows at a time in AVX-512 where the CPU has
// it; 144 does not), one to five rows (odd last rows), padded rows of A, B and C, and a decode's
// 176 keys.
TEST(GemmNN, AttentionValueWidthsAgainstDoubleProduct) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t m : {1, 2, 3, 5})
    for (int64_t n : {16, 48, 128, 144})
      for (int64_t k : {1, 7, 176}) {
        int64_t lda = k + 2, ldb = n + 5, ldc = n + 2;
        std::vector<float> a(static_cast<size_t>(m * lda)), b(static_cast<size_t>(k * ldb)), c(static_cast<size_t>(m * ldc), -7.0f);
        for (float& x : a) x = d(rng);
        for (float& x : b) x = d(rng);
        gemm_nn({a.data(), lda, b.data(), ldb, DType::F32, c.data(), ldc, m, n, k}, m > 2 ? &pool : nullptr);
        testing::expect_double_product(
            c, ldc, m, n, k, -7.0f, [&](int64_t i, int64_t p) { return a[i * lda + p]; }, [&](int64_t p, int64_t j) { return b[p * ldb + j]; });
      }
}

// bf16 B (a bf16 KV cache's values): the AVX-512 rows read it in place (few rows, widths
// 16-128), anything else widens it first (144 wide; 16 and 20 rows, which the packed GEMM takes).
TEST(GemmNN, Bf16ValuesAgainstDoubleProduct) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t m : {1, 2, 3, 5, 16, 20})
    for (int64_t n : {16, 48, 128, 144})
      for (int64_t k : {1, 7, 176}) {
        int64_t lda = k + 2, ldb = n + 5, ldc = n + 2;
        std::vector<float> a(static_cast<size_t>(m * lda)), c(static_cast<size_t>(m * ldc), -7.0f);
        std::vector<uint16_t> b(static_cast<size_t>(k * ldb));
        for (float& x : a) x = d(rng);
        for (uint16_t& x : b) x = f32_to_bf16(d(rng));
        gemm_nn({a.data(), lda, b.data(), ldb, DType::BF16, c.data(), ldc, m, n, k}, m > 2 ? &pool : nullptr);
        testing::expect_double_product(
            c, ldc, m, n, k, -7.0f, [&](int64_t i, int64_t p) { return a[i * lda + p]; },
            [&](int64_t p, int64_t j) { return bf16_to_f32(b[p * ldb + j]); });
      }
}

}  // namespace
}  // namespace luminal::cpu
