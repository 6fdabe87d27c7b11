#pragma once
// GEMM outputs against the double-precision product of the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace luminal::cpu::testing {

// Every C[i][j] (row stride ldc) against the double sum over p of a(i, p) * b(p, j), within 1e-5
// of the sum of |products| plus 1e-6 (float sums in another order); columns n to ldc must still
// hold `pad` (nothing written past column n). `what` names the case in failures.
template <class A, class B>
void expect_double_product(const std::vector<float>& c, int64_t ldc, int64_t m, int64_t n, int64_t k, float pad, A a, B b,
                           const std::string& what = "") {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[static_cast<size_t>(i * ldc + j)];
      if (j >= n) {
        ASSERT_EQ(got, pad) << what << " wrote past column n at " << i << "," << j;
        continue;
      }
      double want = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double prod = static_cast<double>(a(i, p)) * static_cast<double>(b(p, j));
        want += prod;
        mag += std::abs(prod);
      }
      ASSERT_NEAR(got, want, 1e-5 * mag + 1e-6) << what << " m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
    }
}

}  // namespace luminal::cpu::testing
