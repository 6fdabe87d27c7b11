// The plan cache: a second compile of the same graph and options is a hit with the same plan;
// anything that changes the plan's inputs is a miss; a damaged entry is a miss, not an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/compile.h"
#include "compiler/plan_cache.h"
#include "frontend/ops.h"

using namespace luminal;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/luminal-cache-test-XXXXXX";
  return mkdtemp(tmpl);
}

Graph model(double scale) {
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("n"), 4});
  softmax(x * scale + 1.0, -1).output("y");
  return g;
}

}  // namespace

TEST(PlanCache, SecondCompileIsAHitWithTheSamePlan) {
  CompileOptions opts;
  opts.cache_dir = temp_dir();
  opts.search.limit = 3;
  CompileResult first = compile(model(2.0), opts);
  EXPECT_FALSE(first.cache_hit);
  CompileResult second = compile(model(2.0), opts);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.cache_key, first.cache_key);
  EXPECT_EQ(second.plan.dump(), first.plan.dump());
  std::filesystem::remove_all(opts.cache_dir);
}

TEST(PlanCache, ChangesToGraphOptionsOrTargetMiss) {
  CompileOptions opts;
  opts.cache_dir = temp_dir();
  std::string key = compile(model(2.0), opts).cache_key;
  EXPECT_NE(compile(model(3.0), opts).cache_key, key);  // another graph
  CompileOptions more = opts;
  more.search.limit = 5;
  EXPECT_FALSE(compile(model(2.0), more).cache_hit);
  CompileOptions gpu = opts;
  gpu.device = "cuda:0";
  EXPECT_FALSE(compile(model(2.0), gpu).cache_hit);
  EXPECT_TRUE(compile(model(2.0), opts).cache_hit);
  std::filesystem::remove_all(opts.cache_dir);
}

TEST(PlanCache, DamagedEntryIsAMiss) {
  CompileOptions opts;
  opts.cache_dir = temp_dir();
  CompileResult first = compile(model(2.0), opts);
  std::ofstream(PlanCache(opts.cache_dir).path(first.cache_key)) << "luminal-graph 1 3\nnode garbage";
  CompileResult again = compile(model(2.0), opts);
  EXPECT_FALSE(again.cache_hit);
  EXPECT_TRUE(compile(model(2.0), opts).cache_hit);  // the damaged entry was rewritten
  std::filesystem::remove_all(opts.cache_dir);
}
