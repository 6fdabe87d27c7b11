// The AMX GEMM against a double-precision product: token counts around its 16-token blocks (and
// an odd number of blocks, which pairs the last with itself), W rows in one or many 32-row blocks,
// k from one 32-wide step to many, padded strides, one thread and a pool. Skipped where the CPU
// or the kernel does not offer AMX.
#include "backends/cpu/amx_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "core/dtype.h"
#include "gemm_check.h"

namespace luminal::cpu {
namespace {

// Runs C = A · Wᵀ through `run` and checks every output against the double product within 1e-5
// of the sum of |products|. Activations rounded to bf16 alone (no lo part) miss that by far
// (about 2e-3). C's padding columns must stay untouched.
template <class Run>
void check(int64_t m, int64_t n, int64_t k, Run run, bool bf16_a = false) {
  std::mt19937 rng(static_cast<uint32_t>(m * 7919 + n * 31 + k));
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t lda = k + 3, ldw = k + 16, ldc = n + 5;
  std::vector<float> a(static_cast<size_t>(m * lda)), c(static_cast<size_t>(m * ldc), -7.0f);
  std::vector<uint16_t> w(static_cast<size_t>(n * ldw));
  for (float& x : a) x = d(rng) * (1 + 1000 * (d(rng) > 0.9f));  // some large values: the split must scale
  for (uint16_t& x : w) x = f32_to_bf16(d(rng));
  WeightGemm g{a.data(), lda, w.data(), ldw, DType::BF16, c.data(), ldc, m, n, k};
  ASSERT_TRUE(amx_fits(g));
  run(g);
  testing::expect_double_product(
      c, ldc, m, n, k, -7.0f,
      [&](int64_t i, int64_t p) {
        const float x = a[static_cast<size_t>(i * lda + p)];
        return bf16_a ? bf16_to_f32(f32_to_bf16(x)) : x;  // bf16_a: what the hi part alone holds
      },
      [&](int64_t p, int64_t j) { return bf16_to_f32(w[static_cast<size_t>(j * ldw + p)]); });
}

TEST(AmxGemm, MatchesTheDoubleProduct) {
  if (!amx_available()) GTEST_SKIP() << "no AMX here (CPU, kernel permission, or LUMINAL_CPU_AMX=0)";
  ThreadPool pool(2), pool3(3);
  for (int64_t m : {1, 15, 16, 17, 33, 48, 130})
    for (int64_t n : {32, 96, 320})
      for (int64_t k : {32, 64, 352}) {
        check(m, n, k, [](const WeightGemm& g) { amx_weight_gemm(g, nullptr, false); });
        check(m, n, k, [&](const WeightGemm& g) { amx_weight_gemm(g, &pool3, false); });
      }
  check(128, 1024, 1024, [&](const WeightGemm& g) { amx_weight_gemm(g, &pool, false); });
  // k in several slices (the packed activations' 512 KB budget: 896 k for 130 rows, 416 for 300),
  // the last one partial, and W rows in several chunks of sums (192 rows for 300 tokens): the
  // sums go out to C only after their last slice.
  check(130, 96, 2048, [&](const WeightGemm& g) { amx_weight_gemm(g, &pool, false); });
  check(300, 320, 1024, [&](const WeightGemm& g) { amx_weight_gemm(g, &pool3, false); });
  check(300, 320, 1024, [](const WeightGemm& g) { amx_weight_gemm(g, nullptr, true); }, true);
  // Through weight_gemm, which takes AMX from 8 rows when the shape fits.
  for (int64_t m : {8, 12, 16, 17, 64}) check(m, 64, 96, [&](const WeightGemm& g) { weight_gemm(g, &pool); });
}

// LUMINAL_CPU_BF16_ACTIVATIONS' mode: exactly the product of A rounded to bf16 (to f32 sums).
TEST(AmxGemm, Bf16ActivationsAreTheProductOfTheRoundedActivations) {
  if (!amx_available()) GTEST_SKIP() << "no AMX here (CPU, kernel permission, or LUMINAL_CPU_AMX=0)";
  ThreadPool pool(2);
  for (int64_t m : {16, 33})
    for (int64_t k : {64, 352}) check(m, 96, k, [&](const WeightGemm& g) { amx_weight_gemm(g, &pool, true); }, true);
}

// An infinite activation gives infinite sums (of its product's sign), not NaN from inf - inf in
// the hi/lo split; a NaN one gives NaN.
TEST(AmxGemm, InfiniteAndNanActivationsPropagateAsInTheReference) {
  if (!amx_available()) GTEST_SKIP() << "no AMX here (CPU, kernel permission, or LUMINAL_CPU_AMX=0)";
  const int64_t m = 16, n = 32, k = 32;
  std::vector<float> a(m * k, 0.5f), c(m * n);
  std::vector<uint16_t> w(n * k, f32_to_bf16(0.25f));
  a[0] = std::numeric_limits<float>::infinity();
  a[k] = -std::numeric_limits<float>::infinity();
  a[2 * k] = std::nanf("");
  for (int64_t j = 0; j < n; ++j) w[j * k] = f32_to_bf16(j % 2 ? 1.0f : -1.0f);
  amx_weight_gemm(WeightGemm{a.data(), k, w.data(), k, DType::BF16, c.data(), n, m, n, k}, nullptr, false);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(c[j], j % 2 ? INFINITY : -INFINITY) << j;
    EXPECT_EQ(c[n + j], j % 2 ? -INFINITY : INFINITY) << j;
    EXPECT_TRUE(std::isnan(c[2 * n + j])) << j;
    EXPECT_FLOAT_EQ(c[3 * n + j], (j % 2 ? 0.5f : -0.5f) + 31 * 0.125f) << j;
  }
}

TEST(AmxGemm, TakesOnlyBf16WeightsWithWholeBlocks) {
  float a = 0, c = 0;
  uint16_t w = 0;
  auto fits = [&](int64_t n, int64_t k, DType t) { return amx_fits(WeightGemm{&a, k, &w, k, t, &c, n, 16, n, k}); };
  EXPECT_TRUE(fits(32, 32, DType::BF16));
  EXPECT_TRUE(fits(4096, 14336, DType::BF16));
  EXPECT_FALSE(fits(32, 32, DType::F32));
  EXPECT_FALSE(fits(48, 32, DType::BF16));
  EXPECT_FALSE(fits(32, 40, DType::BF16));
}

}  // namespace
}  // namespace luminal::cpu
