// bf16 weights packed at load into pair panels (weight_panels.h): the layout word by word, and
// every product that reads them (the panel GEMV for few rows, the packed GEMM's f32 tiles and
// bf16-pair tile for many) against a double-precision product of the same values, on shapes
// that cut panels (n not a multiple of 32), pairs (odd k) and the GEMM's k blocks.
#include "backends/cpu/weight_panels.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_gemm.h"
#include "core/dtype.h"
#include "gemm_check.h"

namespace luminal::cpu {
namespace {

struct Weight {
  int64_t n, k, ldw;
  std::vector<uint16_t> bits;  // [n, ldw]
  float at(int64_t j, int64_t p) const { return bf16_to_f32(bits[static_cast<size_t>(j * ldw + p)]); }
};

Weight random_weight(int64_t n, int64_t k, int64_t ldw, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  Weight w{n, k, ldw, std::vector<uint16_t>(static_cast<size_t>(n * ldw))};
  for (uint16_t& b : w.bits) b = f32_to_bf16(d(rng));
  return w;
}

TEST(WeightPanels, HoldEachPairOfKInOneWordAndZerosPastTheEdges) {
  ThreadPool pool(2);
  for (int64_t n : {1, 31, 32, 33, 70})
    for (int64_t k : {1, 2, 7, 64}) {
      const Weight w = random_weight(n, k, k + 3, static_cast<uint32_t>(n * 100 + k));
      const WeightPanels p = WeightPanels::pack(w.bits.data(), n, k, w.ldw, &pool);
      ASSERT_EQ(p.n(), n);
      ASSERT_EQ(p.k(), k);
      const int64_t panels = (n + 31) / 32, kq = (k + 1) / 2;
      ASSERT_GE(p.bytes(), static_cast<size_t>(panels * kq * 32 * 4));
      for (int64_t j = 0; j < panels * 32; ++j)
        for (int64_t q = 0; q < kq; ++q) {
          uint32_t want = 0;
          if (j < n) {
            want = w.bits[static_cast<size_t>(j * w.ldw + 2 * q)];
            if (2 * q + 1 < k) want |= static_cast<uint32_t>(w.bits[static_cast<size_t>(j * w.ldw + 2 * q + 1)]) << 16;
          }
          ASSERT_EQ(p.word(j, q), want) << "n=" << n << " k=" << k << " at " << j << "," << q;
        }
    }
}

TEST(WeightPanels, AreFoundByTheWeightsAddress) {
  const Weight a = random_weight(40, 10, 10, 1), b = random_weight(8, 4, 4, 2);
  PackedWeights packed;
  packed.add(a.bits.data(), WeightPanels::pack(a.bits.data(), 40, 10, 10, nullptr));
  ASSERT_NE(packed.find(a.bits.data()), nullptr);
  EXPECT_EQ(packed.find(a.bits.data())->n(), 40);
  EXPECT_EQ(packed.find(b.bits.data()), nullptr);
  EXPECT_EQ(packed.find(a.bits.data() + 1), nullptr);
  EXPECT_EQ(packed.count(), 1u);
  EXPECT_GE(packed.bytes(), size_t(2 * 5 * 32 * 4));
}

enum class Path { Dispatch, Avx2Tile, Avx512Tile, PairsTile };

// C = A · Wᵀ with W's panels set (and W's rows garbage, so nothing reads them), against the
// double product; C's padding columns stay untouched. bf16_act rounds A where the pair tile runs.
void check(Path path, int64_t m, int64_t n, int64_t k, ThreadPool* pool, bool bf16_act = false) {
  const Weight w = random_weight(n, k, k + 5, static_cast<uint32_t>(m * 7919 + n * 31 + k));
  const WeightPanels panels = WeightPanels::pack(w.bits.data(), n, k, w.ldw, pool);
  std::vector<uint16_t> garbage(w.bits.size(), 0x7fc0);  // NaN: a read of W's rows would show
  std::mt19937 rng(static_cast<uint32_t>(m + n + k));
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t lda = k + 3, ldc = n + 5;
  std::vector<float> a(static_cast<size_t>(m * lda)), c(static_cast<size_t>(m * ldc), -7.0f);
  for (float& x : a) x = d(rng);
  WeightGemm g{a.data(), lda, garbage.data(), w.ldw, DType::BF16, c.data(), ldc, m, n, k, bf16_act};
  g.panels = panels.words();
  bool rounds = false;
  switch (path) {
    case Path::Dispatch:
      weight_gemm(g, pool);
      rounds = bf16_act && m >= 16 && packed_gemm_pairs_bf16();
      break;
    case Path::Avx2Tile: packed_weight_gemm(g, pool, GemmKernel::Avx2); break;
    case Path::Avx512Tile: packed_weight_gemm(g, pool, GemmKernel::Avx512); break;
    case Path::PairsTile:
      packed_weight_gemm(g, pool, GemmKernel::Bf16Pairs);
      rounds = bf16_act;
      break;
  }
  testing::expect_double_product(
      c, ldc, m, n, k, -7.0f,
      [&](int64_t i, int64_t p) {
        const float x = a[static_cast<size_t>(i * lda + p)];
        return rounds ? bf16_to_f32(f32_to_bf16(x)) : x;
      },
      [&](int64_t p, int64_t j) { return w.at(j, p); }, "path " + std::to_string(static_cast<int>(path)));
}

// Few rows through weight_gemm: the panel GEMV, one to four rows a pass over each panel.
TEST(WeightPanels, GemvAndFewRowsMatchTheProduct) {
  ThreadPool pool(2), pool3(3);
  for (int64_t m : {1, 2, 3, 4, 5, 9, 15})
    for (int64_t n : {1, 17, 32, 33, 100})
      for (int64_t k : {1, 2, 9, 31, 64, 257}) {
        check(Path::Dispatch, m, n, k, nullptr);
        check(Path::Dispatch, m, n, k, &pool);
      }
  // Enough panels that the threads take several chunks; a long k.
  check(Path::Dispatch, 1, 4100, 300, &pool3);
  check(Path::Dispatch, 2, 70, 4099, &pool);
}

// Many rows: the packed GEMM reading the panels, each tile the CPU has, k across its blocks
// (odd k blocks for the f32 tiles: 1025 = 513 + 512).
TEST(WeightPanels, PackedGemmTilesMatchTheProduct) {
  if (!weight_gemm_has_avx2()) GTEST_SKIP() << "packed GEMM needs AVX2 + FMA";
  ThreadPool pool(2), pool3(3);
  std::vector<Path> paths{Path::Dispatch, Path::Avx2Tile};
  if (__builtin_cpu_supports("avx512f")) paths.push_back(Path::Avx512Tile);
  for (Path path : paths)
    for (int64_t m : {16, 17, 130})
      for (int64_t n : {1, 17, 33, 100})
        for (int64_t k : {1, 9, 257, 1025}) {
          check(path, m, n, k, &pool);
          check(path, m, n, k, nullptr);
        }
  check(Path::Dispatch, 300, 40, 70, &pool3);  // rows split across threads, past MC
  check(Path::Dispatch, 20, 1100, 2049, &pool3);
}

TEST(WeightPanels, PairTileReadsThemInPlace) {
  if (!packed_gemm_can_pair_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  ThreadPool pool(2), pool3(3);
  for (int64_t m : {16, 17, 130})
    for (int64_t n : {1, 17, 33, 100})
      for (int64_t k : {1, 2, 9, 31, 770, 2049, 4099}) check(Path::PairsTile, m, n, k, &pool, true);
  check(Path::PairsTile, 300, 40, 70, &pool3, true);
  check(Path::PairsTile, 17, 33, 70, nullptr, true);
}

// The pair tile over panels is the same products in the same order as over W's rows: equal.
TEST(WeightPanels, PairTileGivesTheSameSumsAsPackingPerCall) {
  if (!packed_gemm_can_pair_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  ThreadPool pool(2);
  const int64_t m = 40, n = 70, k = 2055;
  const Weight w = random_weight(n, k, k, 9);
  const WeightPanels panels = WeightPanels::pack(w.bits.data(), n, k, k, &pool);
  std::vector<float> a(static_cast<size_t>(m * k)), c1(static_cast<size_t>(m * n)), c2(c1.size());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& x : a) x = d(rng);
  WeightGemm g{a.data(), k, w.bits.data(), k, DType::BF16, c1.data(), n, m, n, k, true};
  packed_weight_gemm(g, &pool, GemmKernel::Bf16Pairs);
  g.c = c2.data();
  g.panels = panels.words();
  packed_weight_gemm(g, &pool, GemmKernel::Bf16Pairs);
  EXPECT_EQ(c1, c2);
}

}  // namespace
}  // namespace luminal::cpu
