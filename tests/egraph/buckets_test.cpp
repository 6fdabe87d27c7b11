// Dynamic-dim buckets: one plan per range, each profiled inside its range, and a runtime that
// picks the plan by the bound value.
#include <gtest/gtest.h>

#include "compiler/buckets.h"
#include "core/error.h"
#include "frontend/ops.h"

using namespace luminal;

namespace {

Graph model() {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("seq"), 4});
  Tensor w = input(g, "w", DType::F32, {3, 4});
  softmax(linear(x, w, std::nullopt) * 2.0 * 1.0, -1).output("y");
  return g;
}

}  // namespace

TEST(Buckets, OnePlanPerRangeProfiledInside) {
  CompileOptions opts;
  opts.search.limit = 2;
  std::vector<int64_t> profiled_at;
  opts.profiler = [&](const Graph&, const SearchOptions& so) -> std::optional<double> {
    profiled_at.push_back(so.profile_dims.at("seq"));
    return 1.0;
  };
  BucketedPlans plans = compile_buckets(model(), {{"seq", {{1, 1}, {2, 64}, {65, 4096}}}}, opts);
  ASSERT_EQ(plans.plans.size(), 3u);
  ASSERT_FALSE(profiled_at.empty());
  for (int64_t v : profiled_at) EXPECT_TRUE(v == 1 || (v >= 2 && v <= 64) || (v >= 65 && v <= 4096)) << v;
  EXPECT_EQ(plans.select({{"seq", 1}}), 0u);
  EXPECT_EQ(plans.select({{"seq", 30}}), 1u);
  EXPECT_EQ(plans.select({{"seq", 4096}}), 2u);
  try {
    plans.select({{"seq", 5000}});
    FAIL() << "5000 is in no bucket";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seq=5000"), std::string::npos) << e.what();
  }
}

TEST(Buckets, RuntimeDispatchesAndMatchesTheReference) {
  Graph g = model();
  BucketedRuntime rt(compile_buckets(g, {{"seq", {{1, 1}, {2, 8}}}}));
  Interpreter ref(g);
  std::vector<float> w = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, 0.6f, -0.7f, 0.8f, 0.9f, 1.0f, 1.1f, -1.2f};
  rt.set_input("w", Buffer::f32(w, {3, 4}));
  ref.set_input("w", Buffer::f32(w, {3, 4}));
  for (int64_t seq : {1, 5, 1, 8}) {
    std::vector<float> x(static_cast<size_t>(seq) * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    rt.set_input("x", Buffer::f32(x, {seq, 4}));
    ref.set_input("x", Buffer::f32(x, {seq, 4}));
    rt.run();
    ref.run();
    EXPECT_EQ(rt.last_plan(), seq == 1 ? 0u : 1u);
    std::vector<float> a = rt.output_f32("y"), b = ref.output_f32("y");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  }
}

TEST(Buckets, BadRangesAreErrors) {
  EXPECT_THROW(compile_buckets(model(), {{"seq", {{1, 10}, {5, 20}}}}), Error);
  EXPECT_THROW(compile_buckets(model(), {{"seq", {{10, 1}}}}), Error);
  EXPECT_THROW(compile_buckets(model(), {{"seq", {}}}), Error);
}
