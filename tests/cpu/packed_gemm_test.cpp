// The packed (cache-blocked) GEMM against a double-precision product, on shapes that cross
// every block boundary: k past KC (1024 values for the f32 tiles, 2048 for bf16 pairs), m past the 6- and 12-row
// tiles and MC = 144, n past the 16- and 32-column tiles and NC; each micro-kernel the CPU has. Also through weight_gemm / gemm_nn, which dispatch to it for larger m.
#include "backends/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_gemm.h"
#include "core/dtype.h"
#include "gemm_check.h"

namespace luminal::cpu {
namespace {

enum class Entry { Packed, PackedNN, Dispatch, DispatchNN };

// Fills A, B (as W [n, k] or, for the NN entries, B [k, n]) with padded strides, runs `entry`, and
// compares every output with the double product; the padding columns of C must stay untouched.
// bf16_act: the activations taken as bf16 (WeightGemm::bf16_activations), so with bf16 weights
// the double product is of A rounded to bf16.
void check(Entry entry, int64_t m, int64_t n, int64_t k, DType t, ThreadPool* pool, GemmKernel kernel = GemmKernel::Auto,
           bool bf16_act = false) {
  const bool nn = entry == Entry::PackedNN || entry == Entry::DispatchNN;
  // bf16 activations round A where the pair tile runs: asked for, or Auto's choice here.
  const bool rounds = bf16_act && t == DType::BF16 && !nn &&
                      (kernel == GemmKernel::Bf16Pairs || (kernel != GemmKernel::Avx2 && packed_gemm_pairs_bf16()));
  std::mt19937 rng(static_cast<uint32_t>(m * 1009 + n * 31 + k));
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t lda = k + 3, ldc = n + 5;
  const int64_t ldw = nn ? n + 7 : k + (t == DType::BF16 ? 9 : 1);
  const int64_t w_rows = nn ? k : n;
  std::vector<float> a(static_cast<size_t>(m * lda)), wf(static_cast<size_t>(w_rows * ldw)), c(static_cast<size_t>(m * ldc), -7.0f);
  std::vector<uint16_t> wb(wf.size());
  for (float& x : a) x = d(rng);
  for (size_t i = 0; i < wf.size(); ++i) {
    wb[i] = f32_to_bf16(d(rng));
    wf[i] = t == DType::BF16 ? bf16_to_f32(wb[i]) : d(rng);
  }
  WeightGemm g{a.data(), lda, t == DType::BF16 ? static_cast<const void*>(wb.data()) : wf.data(), ldw, t, c.data(), ldc, m, n, k, bf16_act};
  switch (entry) {
    case Entry::Packed: packed_weight_gemm(g, pool, kernel); break;
    case Entry::PackedNN: packed_gemm_nn(g, pool, kernel); break;
    case Entry::Dispatch: weight_gemm(g, pool); break;
    case Entry::DispatchNN: gemm_nn(g, pool); break;
  }
  testing::expect_double_product(
      c, ldc, m, n, k, -7.0f,
      [&](int64_t i, int64_t p) {
        const float x = a[static_cast<size_t>(i * lda + p)];
        return rounds ? bf16_to_f32(f32_to_bf16(x)) : x;
      },
      [&](int64_t p, int64_t j) { return nn ? wf[static_cast<size_t>(p * ldw + j)] : wf[static_cast<size_t>(j * ldw + p)]; },
      std::string(dtype_name(t)) + " kernel " + std::to_string(static_cast<int>(kernel)));
}

// Both micro-kernels, where the CPU has them: AVX2's 6×16 tile and AVX-512's 12×32.
std::vector<GemmKernel> kernels_here() {
  std::vector<GemmKernel> v{GemmKernel::Avx2};
  if (__builtin_cpu_supports("avx512f")) v.push_back(GemmKernel::Avx512);
  return v;
}

TEST(PackedGemm, OddShapesCrossingEveryBlock) {
  if (!weight_gemm_has_avx2()) GTEST_SKIP() << "packed GEMM needs AVX2 + FMA";
  ThreadPool pool(2), pool3(3);
  for (GemmKernel kern : kernels_here()) {
    for (DType t : {DType::BF16, DType::F32})
      for (int64_t m : {1, 5, 7, 13, 128, 130})
        for (int64_t n : {1, 17, 33, 1000})
          for (int64_t k : {1, 9, 193, 257, 513}) {
            check(Entry::Packed, m, n, k, t, nullptr, kern);
            check(Entry::Packed, m, n, k, t, &pool, kern);
          }
    // m past two MC blocks on one thread (B panels reused), split over rows by three threads (m > n),
    // and n past NC per thread.
    check(Entry::Packed, 300, 40, 70, DType::BF16, nullptr, kern);
    check(Entry::Packed, 300, 40, 70, DType::BF16, &pool3, kern);
    check(Entry::Packed, 13, 2100, 300, DType::F32, &pool3, kern);
    // k past one and two blocks of 1024 (split into equal blocks: 1025 -> 513 + 512).
    for (DType t : {DType::BF16, DType::F32})
      for (int64_t k : {1025, 2049}) {
        check(Entry::Packed, 13, 33, k, t, &pool, kern);
        check(Entry::Packed, 130, 40, k, t, &pool3, kern);
      }
  }
}

// bf16 activations on bf16 weights, on a CPU with AVX-512 BF16: the products of A rounded to bf16
// (pairs of k in one word; odd k leaves a last half pair, odd row strides a W that is not in
// whole words), summed in f32. Rows, columns and k cross every tile and block (KC = 2048 values).
TEST(PackedGemm, Bf16ActivationsMultiplyBf16Pairs) {
  if (!packed_gemm_can_pair_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  ThreadPool pool(2), pool3(3);
  for (int64_t m : {1, 5, 7, 13, 128, 130})
    for (int64_t n : {1, 17, 33, 1000})
      for (int64_t k : {1, 2, 9, 31, 32, 33, 385, 770, 1031}) {
        check(Entry::Packed, m, n, k, DType::BF16, nullptr, GemmKernel::Bf16Pairs, true);
        check(Entry::Packed, m, n, k, DType::BF16, &pool, GemmKernel::Bf16Pairs, true);
      }
  check(Entry::Packed, 300, 40, 70, DType::BF16, &pool3, GemmKernel::Bf16Pairs, true);
  for (int64_t k : {2049, 4099}) {  // past one and two blocks
    check(Entry::Packed, 13, 33, k, DType::BF16, &pool, GemmKernel::Bf16Pairs, true);
    check(Entry::Packed, 130, 40, k, DType::BF16, &pool3, GemmKernel::Bf16Pairs, true);
  }
  // f32 weights keep f32 activations: the plain product.
  check(Entry::Packed, 13, 33, 70, DType::F32, &pool, GemmKernel::Bf16Pairs, true);
}

TEST(PackedGemm, RowMajorB) {
  if (!weight_gemm_has_avx2()) GTEST_SKIP() << "packed GEMM needs AVX2 + FMA";
  ThreadPool pool(2);
  for (GemmKernel kern : kernels_here()) {
    for (int64_t m : {1, 5, 7, 13, 130})
      for (int64_t n : {1, 17, 33, 64, 1000})
        for (int64_t k : {1, 9, 257, 513}) {
          check(Entry::PackedNN, m, n, k, DType::F32, nullptr, kern);
          check(Entry::PackedNN, m, n, k, DType::F32, &pool, kern);
        }
    check(Entry::PackedNN, 300, 64, 300, DType::F32, &pool, kern);  // attention's probabilities × values
    check(Entry::PackedNN, 20, 64, 1100, DType::F32, &pool, kern);  // k past a block
  }
}

// The public entry points around the crossover to the packed path (and on non-AVX2 machines the
// portable loops).
TEST(PackedGemm, DispatchAroundTheCrossover) {
  ThreadPool pool(2);
  for (int64_t m : {3, 4, 5, 8, 16, 17, 64})
    for (DType t : {DType::BF16, DType::F32}) {
      check(Entry::Dispatch, m, 33, 300, t, &pool);
      check(Entry::Dispatch, m, 33, 300, t, nullptr);
    }
  for (int64_t m : {3, 4, 8, 16, 17, 64}) {
    check(Entry::DispatchNN, m, 70, 300, DType::F32, &pool);
    check(Entry::DispatchNN, m, 70, 300, DType::F32, nullptr);
  }
}

}  // namespace
}  // namespace luminal::cpu
