// RMSNorm, LayerNorm and Softmax on the CPU backend against the reference kernels: odd sizes,
// views with transposed outer axes, broadcast rows and offsets, and the views they leave alone.
#include "backends/cpu/row_kernels.h"

#include <cmath>
#include <limits>

#include "backends/cpu/simd8.h"
#include "kernel_compare.h"

namespace luminal::cpu::testing {
namespace {

const Tolerance kSum{4e-6, 1e-7};  // the native kernels sum in 8 lanes, the reference in order

// Views of the same logical [rows..., len] shape, read through different strides.
std::vector<KernelInput> layouts(const std::vector<int64_t>& shape, uint32_t seed) {
  std::vector<KernelInput> r;
  r.push_back(whole(random_f32(shape, seed)));
  size_t rank = shape.size();
  if (rank >= 3) {  // buffer [b, a, len] read as [a, b, len]
    std::vector<int64_t> t = shape;
    std::swap(t[0], t[1]);
    Buffer b = random_f32(t, seed + 1);
    std::vector<size_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = i;
    std::swap(perm[0], perm[1]);
    r.push_back({b, View::contiguous(exprs(t)).permute(perm)});
  }
  if (rank >= 2) {
    // One row broadcast over the first axis (stride 0).
    std::vector<int64_t> one = shape;
    one[0] = 1;
    r.push_back({random_f32(one, seed + 2), View::contiguous(exprs(one)).expand(0, Expr(shape[0]))});
    // A window of a wider buffer: an offset and a row stride larger than the row.
    std::vector<int64_t> wide = shape;
    wide[rank - 1] += 5;
    wide[0] += 1;
    View v = View::contiguous(exprs(wide)).slice(rank - 1, Expr(3), Expr(3 + shape[rank - 1])).slice(0, Expr(1), Expr(1 + shape[0]));
    r.push_back({random_f32(wide, seed + 3), v});
  }
  return r;
}

const std::vector<std::vector<int64_t>> kShapes = {{17}, {1, 1}, {3, 17}, {5, 1}, {2, 3, 129}, {4, 3, 8},
                                                   {40, 1024}, {300, 128}, {2, 16, 7, 33}};

TEST(RowKernels, RmsNormMatchesReference) {
  uint32_t seed = 1;
  for (const auto& shape : kShapes)
    for (const KernelInput& in : layouts(shape, seed += 10))
      compare(kernel_node("RMSNorm", shape.size() - 1, 1e-6f), {in}, shape, kSum);
}

// RMSNorm times a weight row (bf16 as checkpoints store it, or f32) broadcast over the rows;
// a weight that varies along the rows is left to the reference.
TEST(RowKernels, RmsNormMulMatchesReference) {
  uint32_t seed = 3;
  for (const auto& shape : kShapes)
    for (DType wt : {DType::BF16, DType::F32}) {
      const int64_t len = shape.back();
      std::vector<int64_t> row = {len};
      View wv = View::contiguous(exprs(row));
      for (size_t d = 0; d + 1 < shape.size(); ++d) wv = wv.unsqueeze(0);
      wv = wv.broadcast_to(exprs(shape));
      for (const KernelInput& in : layouts(shape, seed += 10))
        compare(kernel_node("RMSNormMul", shape.size() - 1, 1e-6f), {in, {random_f32(row, seed + 7).cast(wt), wv}}, shape, kSum);
    }
  compare(kernel_node("RMSNormMul", 1, 1e-6f), {whole(random_f32({3, 17}, 1)), whole(random_f32({3, 17}, 2))}, {3, 17}, kSum, false);
}

TEST(RowKernels, LayerNormMatchesReference) {
  uint32_t seed = 2;
  // The centring cancels, so compare on the output's scale (it is about 1).
  for (const auto& shape : kShapes)
    for (const KernelInput& in : layouts(shape, seed += 10))
      compare(kernel_node("LayerNorm", shape.size() - 1, 1e-5f), {in}, shape, {1e-5, 1e-5});
}

TEST(RowKernels, SoftmaxMatchesReference) {
  uint32_t seed = 3;
  for (const auto& shape : kShapes)
    for (const KernelInput& in : layouts(shape, seed += 10)) compare(kernel_node("Softmax", shape.size() - 1), {in}, shape, kSum);
}

// Masked scores: -inf entries, a row of only -inf (NaN in the reference: -inf - -inf), a row
// with a NaN and a row with +inf (NaN too: inf - inf).
TEST(RowKernels, SoftmaxInfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t len : {1, 7, 8, 17, 129}) {
    Buffer b = random_f32({6, len}, static_cast<uint32_t>(len));
    for (int64_t k = 0; k < len; ++k) {
      b.set(static_cast<size_t>(k), -inf);                                // row 0: all -inf
      if (k % 3 == 1) b.set(static_cast<size_t>(len + k), -inf);          // row 1: some -inf
      if (k > 0) b.set(static_cast<size_t>(2 * len + k), -inf);           // row 2: one finite
    }
    b.set(static_cast<size_t>(3 * len + len / 2), std::nan(""));            // row 3: a NaN
    b.set(static_cast<size_t>(4 * len + len - 1), inf);                     // row 4: +inf
    compare(kernel_node("Softmax", 1), {whole(b)}, {6, len}, kSum);
  }
}

// Softmax's vector exp2 against std::exp2: within 2 ulp on normal results, within one step on
// subnormal ones, and exact at the ends (-inf, +inf, NaN, overflow, underflow).
TEST(RowKernels, VectorExp2IsAccurate) {
  std::vector<float> xs = {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                           std::nanf(""), -1000.0f, 1000.0f, 0.0f, -0.0f, 1.0f, -126.0f, -149.0f, -150.0f, 127.99f, 128.0f};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-155, 130);
  for (int i = 0; i < 100000; ++i) xs.push_back(d(rng));
  for (float x = -1; x <= 1; x += 1.0f / 1024) xs.push_back(x);
  while (xs.size() % 8) xs.push_back(0);
  for (size_t i = 0; i < xs.size(); i += 8) {
    simd8::f8 v = simd8::exp2(simd8::load(xs.data() + i));
    for (int k = 0; k < 8; ++k) {
      float want = std::exp2(xs[i + k]), got = v[k];
      if (std::isnan(want) || std::isinf(want) || want == 0) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << "exp2(" << xs[i + k] << ") = " << got;
        continue;
      }
      float ulp = std::nextafter(want, std::numeric_limits<float>::infinity()) - want;
      float allowed = want < std::numeric_limits<float>::min() ? ulp : 2 * ulp;
      ASSERT_LE(std::abs(got - want), allowed) << "exp2(" << xs[i + k] << ") = " << got << ", std::exp2 " << want;
    }
  }
}

// What the kernels leave to the reference: an axis that is not the last, a last axis with a
// stride, a padded (masked) view, a non-f32 input.
TEST(RowKernels, FallsBackOutsideTheFastCase) {
  Buffer b = random_f32({17, 5}, 9);
  for (const char* k : {"RMSNorm", "LayerNorm", "Softmax"}) {
    compare(kernel_node(k, 0, 1e-6f), {whole(b)}, {17, 5}, kSum, false);
    compare(kernel_node(k, 1, 1e-6f), {{b, View::contiguous(exprs({17, 5})).permute({1, 0})}}, {5, 17}, kSum, false);
    compare(kernel_node(k, 1, 1e-6f), {{b, View::contiguous(exprs({17, 5})).pad(1, Expr(1), Expr(2))}}, {17, 8}, kSum,
            false);
    compare(kernel_node(k, 1, 1e-6f), {whole(b.cast(DType::BF16))}, {17, 5}, kSum, false);
  }
}

}  // namespace
}  // namespace luminal::cpu::testing
