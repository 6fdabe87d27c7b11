// Top-k ranks (backends/cuda/cuda_top_ranks.h): which counts are recognised, and on the GPU the
// routing group's warp rounds against the reference where ties, zeros of both signs, infinities
// and NaNs decide the order.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_top_ranks.h"
#include "backends/cuda/nvrtc.h"
#include "cuda/cuda_cases.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "runtime/interpreter.h"

namespace luminal::cuda {
namespace {

using testing::compiled;

// How a count orders a token's values: the routing's (larger, or equal at a lower index) and
// orders that look like it but are not top-k ranks.
enum class Order { TopK, NoTieBreak, HigherIndexFirst, BottomK, Bf16Compare, CountOut };

// The routing's choice without the router (src/models/decoder_graph.cpp, route()): each of n
// values' count of the values before it, chosen when under k, and the chosen values over their
// sum. CountOut stores the count itself as "chosen".
Graph ranks(int64_t n, int64_t k, Order order = Order::TopK) {
  Graph g;
  Tensor v = input(g, "v", DType::F32, {Expr::var("s"), n});
  Tensor cmp = order == Order::Bf16Compare ? cast(v, DType::BF16) : v;
  Tensor mine = unsqueeze(cmp, 2), other = unsqueeze(cmp, 1);
  Tensor row = unsqueeze(arange(g, 0, n), 1), col = unsqueeze(arange(g, 0, n), 0);  // [e, e'] as e and e'
  Tensor lower = lt(col, row), higher = lt(row, col);
  Tensor before;
  switch (order) {
    case Order::NoTieBreak: before = logical_or(gt(other, mine), eq(other, mine)); break;
    case Order::HigherIndexFirst: before = logical_or(gt(other, mine), logical_and(eq(other, mine), higher)); break;
    case Order::BottomK: before = logical_or(lt(other, mine), logical_and(eq(other, mine), lower)); break;
    default: before = logical_or(gt(other, mine), logical_and(eq(other, mine), lower));
  }
  Tensor count = sum(cast(before, DType::F32), {2});
  Tensor chosen = order == Order::CountOut ? count : cast(lt(count, full(g, {1}, static_cast<double>(k))), DType::F32);
  Tensor w = v * chosen;
  (w / sum(w, {-1}, true)).output("weights");
  chosen.output("chosen");
  return g;
}

// The plan's counts (FusedSum over [s, n, n]) and what top_ranks_of says of each.
std::vector<std::optional<TopRanks>> counts_of(const Graph& plan) {
  std::vector<std::optional<TopRanks>> r;
  for (NodeId id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(id);
    if (n.op == OpKind::Kernel && n.kernel == "FusedSum" && n.inputs[0].view.shape().size() == 3) r.push_back(top_ranks_of(plan, id));
  }
  return r;
}

TEST(CudaCodegen, TopRanksAreRecognisedWhereTheCountIsTopK) {
  for (int64_t n : {5, 16, 128, 1000}) {
    const std::vector<std::optional<TopRanks>> found = counts_of(compiled(ranks(n, 4)));
    ASSERT_EQ(found.size(), 1u) << n;
    ASSERT_TRUE(found[0].has_value()) << n;
    EXPECT_EQ(found[0]->values, n);
    EXPECT_EQ(found[0]->rounds, 4);
  }
  // k = n - 1: every count but the last maps to 1; k = 32, the most rounds.
  EXPECT_TRUE(counts_of(compiled(ranks(16, 15)))[0].has_value());
  EXPECT_EQ(counts_of(compiled(ranks(128, 32)))[0].value_or(TopRanks{}).rounds, 32);
}

TEST(CudaCodegen, CountsThatAreNotTopKRanksAreLeftToTheGenericCode) {
  // Ties counted both ways (no third input), the higher index first, the smallest first, the
  // values compared in bf16 (a rounding that makes distinct values tie), the count itself stored
  // (E rounds), and more rounds than a warp's argmax takes.
  for (Order o : {Order::NoTieBreak, Order::HigherIndexFirst, Order::BottomK, Order::Bf16Compare, Order::CountOut}) {
    const std::vector<std::optional<TopRanks>> found = counts_of(compiled(ranks(64, 8, o)));
    ASSERT_EQ(found.size(), 1u) << static_cast<int>(o);
    EXPECT_FALSE(found[0].has_value()) << static_cast<int>(o);
  }
  const std::vector<std::optional<TopRanks>> many = counts_of(compiled(ranks(128, 33)));
  ASSERT_EQ(many.size(), 1u);
  EXPECT_FALSE(many[0].has_value());
  // Not recognised, the group shares the count out as before.
  const Graph plan = compiled(ranks(128, 8, Order::HigherIndexFirst));
  const PlanKernels k = generate_plan_kernels(plan);
  ASSERT_EQ(k.small_groups.size(), 1u) << plan.dump();
  EXPECT_TRUE(k.small_groups[0].counter);
}

// A token's values where the order is decided by ties, zeros of both signs, infinities and NaNs
// (a NaN is before nothing and nothing is before it: rank 0, chosen).
std::vector<float> hard_values(int64_t n, int round) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    switch (round) {
      case 0: v[u] = 0.25f * static_cast<float>((i * 7) % 4); break;        // four values, many ties
      case 1: v[u] = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : -1.0f); break;  // -0 and +0 tie
      case 2: v[u] = i % 17 == 3 ? nan : i % 29 == 5 ? inf : i % 31 == 7 ? -inf : static_cast<float>((i * 37) % 11); break;
      case 3: v[u] = i < 5 ? static_cast<float>(i) : nan; break;  // fewer values than k, the rest NaN
      default: v[u] = nan;
    }
  }
  return v;
}

// One token: the group's one block (k rounds in a warp) gives the reference's chosen values
// exactly, and its weights; two tokens: the members launch one by one. With and without the
// warp rounds; recorded and replayed graphs.
TEST(CudaBackend, TopRanksMatchTheReference) {
  if (!unavailable_reason().empty() || !nvrtc_unavailable_reason().empty())
    GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  constexpr int64_t kValues = 128, kChosen = 8;
  const Graph g = ranks(kValues, kChosen);
  const Graph plan = compiled(g);
  for (bool top_ranks : {true, false}) {
    CudaExecutor cuda(plan, "", CudaOptions{.top_ranks_in_groups = top_ranks});
    for (int round = 0; round < 6; ++round) {
      const int64_t s = round == 5 ? 2 : 1;
      std::vector<float> v = hard_values(kValues, round);
      if (s == 2) {
        const std::vector<float> second = hard_values(kValues, 2);
        v.insert(v.end(), second.begin(), second.end());
      }
      const int64_t before = cuda.small_groups_run();
      const Buffer x = Buffer::f32(v, {s, kValues});
      Interpreter ref(g);
      ref.set_input("v", x);
      cuda.set_input("v", x);
      ref.run();
      for (int rep = 0; rep < 3; ++rep) {
        cuda.run();
        const Buffer want_c = ref.output("chosen"), got_c = cuda.output("chosen");
        const Buffer want_w = ref.output("weights"), got_w = cuda.output("weights");
        ASSERT_EQ(got_c.numel(), want_c.numel());
        for (size_t i = 0; i < want_c.numel(); ++i) {
          const std::string at = "[" + std::to_string(i) + "] round " + std::to_string(round) + " run " + std::to_string(rep + 1) +
                                 (top_ranks ? "" : " (top ranks off)");
          ASSERT_EQ(got_c.get(i), want_c.get(i)) << "chosen" << at;
          if (std::isnan(want_w.get(i)))
            ASSERT_TRUE(std::isnan(got_w.get(i))) << "weights" << at;
          else
            ASSERT_NEAR(got_w.get(i), want_w.get(i), 1e-6) << "weights" << at;
        }
      }
      if (round == 0) {
        EXPECT_GT(cuda.small_groups_run(), before);  // launched one by one before the graph is recorded
      }
    }
  }
}

}  // namespace
}  // namespace luminal::cuda
