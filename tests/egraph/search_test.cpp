// The genetic search: explores alternative plans, keeps the fastest by the profiler's measure,
// respects its limits, and rejects failing candidates without failing itself.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "compiler/compile.h"
#include "frontend/ops.h"
#include "runtime/interpreter.h"
#include "runtime/time_plan.h"

using namespace luminal;

namespace {

// A graph whose e-graph has alternatives: several foldable constant expressions.
Graph foldable_graph() {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr(4)});
  Tensor c = full(g, {Expr(4)}, 2.0) * 3.0 + 1.0;
  Tensor d = full(g, {Expr(4)}, 0.5) * 4.0;
  (x * c + d * 1.0).output("y");
  return g;
}

std::vector<float> run(const Graph& g, float xv) {
  Interpreter rt(g);
  rt.set_input("x", Buffer::f32({xv, xv + 1, xv + 2, xv + 3}, {4}));
  rt.run();
  return rt.output_f32("y");
}

}  // namespace

TEST(Search, FindsThePlanTheProfilerPrefersAndItIsCorrect) {
  Graph g = foldable_graph();
  // A profiler that likes big plans: the search must move away from the cost model's small one.
  CompileOptions opts;
  opts.search.limit = 40;
  opts.search.seed = 7;
  opts.profiler = [](const Graph& plan, const SearchOptions&) -> std::optional<double> {
    return 1000.0 / static_cast<double>(plan.size());
  };
  CompileResult big = compile(g, opts);
  CompileResult small = compile(g);  // no search: the cost model's plan
  EXPECT_GT(big.plan.size(), small.plan.size());
  EXPECT_LT(big.search.best_ms, big.search.initial_ms);
  EXPECT_LE(big.search.profiled, 40);
  // Whatever it picked computes the same thing.
  std::vector<float> want = run(g, 1.5f), a = run(big.plan, 1.5f), b = run(small.plan, 1.5f);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(a[i], want[i], 1e-5);
    EXPECT_NEAR(b[i], want[i], 1e-5);
  }
}

TEST(Search, RejectedCandidatesAreSkippedNotFatal) {
  Graph g = foldable_graph();
  CompileOptions opts;
  opts.search.limit = 20;
  int calls = 0;
  opts.profiler = [&](const Graph&, const SearchOptions&) -> std::optional<double> {
    // The first (cost-model) plan is fine; every other candidate "crashes".
    return calls++ == 0 ? std::optional<double>(1.0) : std::nullopt;
  };
  CompileResult r = compile(g, opts);
  EXPECT_EQ(r.search.rejected, r.search.profiled - 1);
  EXPECT_EQ(r.search.best_ms, 1.0);
  std::vector<float> want = run(g, 0.5f), got = run(r.plan, 0.5f);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

TEST(Search, InterpreterProfilerRejectsNonFiniteOutputs) {
  SearchOptions opts;
  opts.trials = 1;
  Graph bad;
  // Inputs are filled with ones, so log2(x - 1) is -inf.
  log2(input(bad, "x", DType::F32, {Expr(3)}) - 1.0).output("y");
  EXPECT_FALSE(profile_on_interpreter(bad, opts).has_value());
  Graph good;
  log2(input(good, "x", DType::F32, {Expr(3)}) + 1.0).output("y");
  auto t = profile_on_interpreter(good, opts);
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(*t, 0.0);
}

TEST(Search, InterpreterProfilerBindsDynamicDims) {
  Graph g;
  Expr s = Expr::var("s");
  sum(input(g, "x", DType::BF16, {s, Expr(4)}), {0}).output("y");
  SearchOptions opts;
  opts.profile_dims = {{"s", 5}};
  EXPECT_TRUE(profile_on_interpreter(g, opts).has_value());
}

TEST(Search, NoSearchMeansNoProfiling) {
  Graph g = foldable_graph();
  CompileOptions opts;  // limit 0
  opts.profiler = [](const Graph&, const SearchOptions&) -> std::optional<double> {
    ADD_FAILURE() << "profiled with limit 0";
    return 1.0;
  };
  CompileResult r = compile(g, opts);
  EXPECT_EQ(r.search.profiled, 0);
}

TEST(Search, CandidatesTheCostModelRulesOutAreNotProfiled) {
  Graph g = foldable_graph();
  CompileOptions opts;
  opts.search.limit = 20;
  opts.search.prune_cost_ratio = 1e-9;  // every candidate is "too costly"
  int calls = 0;
  opts.profiler = [&](const Graph&, const SearchOptions&) -> std::optional<double> { return ++calls; };
  CompileResult r = compile(g, opts);
  EXPECT_EQ(calls, 1);  // only the cost model's own plan
  EXPECT_GT(r.search.pruned, 0);
  opts.search.prune_cost_ratio = 0;  // off: candidates are profiled again
  calls = 0;
  EXPECT_GT(compile(g, opts).search.profiled, 1);
}

TEST(Search, EachGenerationIsPreparedBeforeItIsProfiled) {
  Graph g = foldable_graph();
  CompileOptions opts;
  opts.search.limit = 12;
  opts.search.generation_size = 4;
  std::set<std::string> prepared;
  int batches = 0, unprepared = 0, calls = 0;
  opts.prepare_candidates = [&](const std::vector<const Graph*>& plans) {
    ++batches;
    EXPECT_LE(plans.size(), 4u);
    for (const Graph* p : plans) prepared.insert(p->dump());
  };
  opts.profiler = [&](const Graph& plan, const SearchOptions&) -> std::optional<double> {
    if (calls++ > 0 && !prepared.count(plan.dump())) ++unprepared;  // the first is the cost model's
    return 1.0;
  };
  CompileResult r = compile(g, opts);
  EXPECT_GT(r.search.profiled, 1);
  EXPECT_GT(batches, 0);
  EXPECT_EQ(unprepared, 0);
}

TEST(Search, ACandidateFarSlowerThanTheBestGetsAShortTimeout) {
  Graph g = foldable_graph();
  CompileOptions opts;
  opts.search.limit = 10;
  opts.search.slow_ratio = 3;
  std::vector<double> timeouts;
  opts.profiler = [&](const Graph&, const SearchOptions& s) -> std::optional<double> {
    timeouts.push_back(s.candidate_timeout_ms);
    return 2.0;  // every plan takes 2 ms
  };
  compile(g, opts);
  ASSERT_GT(timeouts.size(), 1u);
  EXPECT_EQ(timeouts[0], opts.search.candidate_timeout_ms);  // nothing to compare with yet
  for (size_t i = 1; i < timeouts.size(); ++i) EXPECT_EQ(timeouts[i], 6.0);
}

TEST(Search, ProfilingSkipsUnreadInputsAndLendsFilledOnes) {
  Graph g;
  Tensor x = input(g, "x", DType::BF16, {Expr(64)});
  input(g, "passed_through", DType::F32, {Expr(int64_t(1) << 20), Expr(int64_t(1) << 20)});  // 4 TB if filled
  (x * 2.0).output("y");
  ProfileInputs pool;
  EXPECT_TRUE(time_plan(g, {}, 2, 1e9, nullptr, &pool).has_value());
  const Buffer a = pool.get("x", DType::BF16, {64}, false), b = pool.get("x", DType::BF16, {64}, false);
  EXPECT_TRUE(a.borrowed());
  EXPECT_EQ(a.bytes(), b.bytes());  // one filled buffer, lent twice
  for (size_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get(i), 1.0);
  const Buffer w = pool.get("x", DType::BF16, {64}, true);  // written in place: a private copy
  EXPECT_FALSE(w.borrowed());
  EXPECT_NE(w.bytes(), a.bytes());
  EXPECT_EQ(w.get(63), 1.0);
}
