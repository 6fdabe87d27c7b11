// Rotary and Where on the CPU backend against the reference kernels. Neither sums, so they
// must agree bit for bit.
#include "backends/cpu/rotary_where.h"

#include <limits>

#include "kernel_compare.h"

namespace luminal::cpu::testing {
namespace {

const Tolerance kExact{0, 0};

// x [s, h, d] with cos/sin [s, 1, d] broadcast over heads, as the models use them.
void check_rotary(int64_t s, int64_t h, int64_t d, bool transposed_x) {
  uint32_t seed = static_cast<uint32_t>(s * 1000 + h * 10 + d);
  KernelInput x = whole(random_f32({s, h, d}, seed));
  if (transposed_x) x = {random_f32({h, s, d}, seed), View::contiguous(exprs({h, s, d})).permute({1, 0, 2})};
  auto table = [&](uint32_t k) {
    return KernelInput{random_f32({s, 1, d}, seed + k, -1, 1), View::contiguous(exprs({s, 1, d})).expand(1, Expr(h))};
  };
  compare(kernel_node("Rotary"), {x, table(1), table(2)}, {s, h, d}, kExact);
}

TEST(RotaryWhere, RotaryMatchesReference) {
  for (int64_t d : {1, 2, 3, 16, 17, 24, 128})
    for (bool t : {false, true}) {
      check_rotary(1, 1, d, t);
      check_rotary(3, 2, d, t);
    }
  check_rotary(64, 8, 128, false);  // enough rows for every thread
  check_rotary(17, 16, 128, true);
}

// Rotary over a norm of the head dim (Qwen3's q_norm and k_norm before RoPE): the norm's sum
// runs in 8 lanes, so the tolerance is a sum's, not exact. A bf16 weight as the checkpoints
// store it; heads transposed out of their projection, as the decoder reads them.
TEST(RotaryWhere, RotaryOverANormMatchesReference) {
  const Tolerance kSum{1e-5, 1e-6};
  for (int64_t d : {2, 3, 16, 17, 128})
    for (bool t : {false, true})
      for (int64_t s : {1, 5}) {
        const int64_t h = 3;
        const uint32_t seed = static_cast<uint32_t>(s * 1000 + d * 10 + t);
        KernelInput x = whole(random_f32({s, h, d}, seed));
        if (t) x = {random_f32({h, s, d}, seed), View::contiguous(exprs({h, s, d})).permute({1, 0, 2})};
        KernelInput w{random_f32({d}, seed + 1).cast(DType::BF16), View::contiguous(exprs({d})).reshape(exprs({1, 1, d})).expand(0, Expr(s)).expand(1, Expr(h))};
        auto table = [&](uint32_t k) {
          return KernelInput{random_f32({s, 1, d}, seed + k, -1, 1), View::contiguous(exprs({s, 1, d})).expand(1, Expr(h))};
        };
        SCOPED_TRACE("d=" + std::to_string(d) + " s=" + std::to_string(s) + " transposed=" + std::to_string(t));
        compare(kernel_node("RMSNormRotary", 2, 1e-6f), {x, w, table(2), table(3)}, {s, h, d}, kSum);
      }
}

TEST(RotaryWhere, RotaryFallsBackOnAStridedLastAxis) {
  KernelInput x{random_f32({4, 6}, 1), View::contiguous(exprs({4, 6})).permute({1, 0})};
  KernelInput c = whole(random_f32({6, 4}, 2)), s = whole(random_f32({6, 4}, 3));
  compare(kernel_node("Rotary"), {x, c, s}, {6, 4}, kExact, false);
}

Buffer random_mask(std::vector<int64_t> shape, uint32_t seed, DType t) {
  Buffer m = random_f32(std::move(shape), seed, -1, 1);
  for (size_t i = 0; i < m.numel(); ++i) m.set(i, m.get(i) > 0 ? (t == DType::F32 ? m.get(i) : 1) : 0);
  return m.cast(t);
}

// The causal-mask pattern of the models: cond [s, k] broadcast over heads and flattened (a view
// of two layers, which the kernel reads element by element), scores, and a -inf scalar.
TEST(RotaryWhere, WhereMatchesReference) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (DType t : {DType::Bool, DType::I32, DType::F32})
    for (auto [h, s, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 3, 17}, {4, 17, 129}, {16, 1, 133}}) {
      int64_t n = h * s * k;
      Buffer mask = random_mask({s, k}, static_cast<uint32_t>(n), t);
      if (t == DType::F32) mask.set(0, std::nan(""));  // NaN is nonzero: picks a
      View cond = View::contiguous(exprs({s, k})).unsqueeze(0).expand(0, Expr(h)).reshape({Expr(n)});
      if (h > 1) {
        ASSERT_FALSE(Reader(mask, cond, {}).strided()) << "meant to test the element-by-element path";
      }
      KernelInput scores = whole(random_f32({n}, 7));
      KernelInput minus_inf{Buffer::f32({ninf}, {1}), View::contiguous({Expr(1)}).expand(0, Expr(n))};
      compare(kernel_node("Where"), {{mask, cond}, scores, minus_inf}, {n}, kExact);
      // The same, every input strided: cond [h, s, k] with stride 0 on h, b transposed.
      View cond3 = View::contiguous(exprs({s, k})).unsqueeze(0).expand(0, Expr(h));
      KernelInput b{random_f32({k, s, h}, 8), View::contiguous(exprs({k, s, h})).permute({2, 1, 0})};
      compare(kernel_node("Where"), {{mask, cond3}, whole(random_f32({h, s, k}, 9)), b}, {h, s, k}, kExact);
    }
}

TEST(RotaryWhere, WhereFallsBackForIntegerValues) {
  Buffer c = random_mask({5}, 1, DType::Bool);
  compare(kernel_node("Where"), {whole(c), whole(random_f32({5}, 2).cast(DType::I32)), whole(random_f32({5}, 3))}, {5}, kExact,
          false);
}

}  // namespace
}  // namespace luminal::cpu::testing
