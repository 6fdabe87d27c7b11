// The cpu backend's kernels against the reference kernels on the same plan: every shape and
// layout the models produce (linear layers in f32 and bf16, attention scores over a cache view,
// batched heads, dynamic dims, odd sizes), within float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "compiler/compile.h"
#include "frontend/ops.h"
#include "plan_check.h"

using namespace luminal;

namespace {

void expect_backend_matches_reference(const Graph& g, const DimMap& dims) {
  CompileResult r = compile(g);
  Interpreter ref(r.plan), fast(r.plan);
  cpu::ThreadPool pool(3);
  fast.set_kernel_hook(cpu::cpu_kernels(pool));
  plancheck::fill_random(ref, g, dims, 11, 1.0f);
  plancheck::fill_random(fast, g, dims, 11, 1.0f);
  for (auto& [k, v] : dims) ref.set_dim(k, v), fast.set_dim(k, v);
  ref.run();
  fast.run();
  for (NodeId id : r.plan.outputs()) {
    const std::string& name = r.plan.node(id).name;
    std::vector<float> a = ref.output_f32(name), b = fast.output_f32(name);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(a[i]))) << name << "[" << i << "]";
  }
}

}  // namespace

TEST(CpuBackend, LinearLayersInF32AndBf16) {
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t s : {1, 3, 9}) {
      Graph g;
      Tensor x = input(g, "x", DType::F32, {Expr::var("s"), 37});
      Tensor w = input(g, "w", t, {19, 37});
      linear(x, cast(w, DType::F32), std::nullopt).output("y");
      matmul(x, transpose(cast(w, DType::F32), 0, 1)).output("y2");
      SCOPED_TRACE(std::string(dtype_name(t)) + " s=" + std::to_string(s));
      expect_backend_matches_reference(g, {{"s", s}});
    }
}

TEST(CpuBackend, AttentionScoresOverACacheSlice) {
  Graph g;
  Expr s = Expr::var("s"), past = Expr::var("past");
  Tensor q = input(g, "q", DType::F32, {2, 3 * s, 16});
  Tensor cache = input(g, "cache", DType::F32, {2, 40, 16});
  Tensor k = slice(cache, 1, 0, past + s);
  matmul(q, transpose(k, 1, 2)).output("scores");            // B rows contiguous: the cpu kernel
  matmul(softmax(matmul(q, transpose(k, 1, 2)), -1), k).output("mixed");  // B = k itself: reference
  expect_backend_matches_reference(g, {{"s", 2}, {"past", 5}});
}

TEST(CpuBackend, FusedElementwiseThroughBroadcastAndPermutedViews) {
  for (int64_t s : {1, 5, 300}) {  // 300 rows: several blocks, split over threads
    Graph g;
    Expr sd = Expr::var("s");
    Tensor x = input(g, "x", DType::F32, {sd, 24});
    Tensor w = input(g, "w", DType::BF16, {24});
    Tensor t = input(g, "t", DType::F32, {24, sd});
    // rms-norm-like with a broadcast weight, gelu-like chain, and a transposed operand.
    Tensor y = x * rsqrt(mean(x * x, {-1}, true) + 1e-6) * (cast(w, DType::F32) + 1.0);
    (gelu_tanh(y) * transpose(t, 0, 1) + exp(y) * 0.5).output("z");
    (sin(x) + sqrt(abs(x) + 1.0)).output("u");
    SCOPED_TRACE(s);
    expect_backend_matches_reference(g, {{"s", s}});
  }
}

// 40 x 16 bf16 values, every one distinct from its neighbours.
static Buffer table_values() {
  Buffer t(DType::BF16, {40, 16});
  for (size_t i = 0; i < t.numel(); ++i) t.set(i, std::sin(static_cast<double>(i)) * 3);
  return t;
}

// An embedding lookup as the models build it, run by the backend and by the reference.
TEST(CpuBackend, EmbeddingGatherMatchesTheReference) {
  Graph g;
  Tensor ids = input(g, "ids", DType::I32, {Expr::var("s")});
  Tensor table = input(g, "table", DType::BF16, {40, 16});
  embedding(table, ids).output("rows");
  Graph plan = compile(g).plan;
  cpu::ThreadPool pool(2);
  Interpreter ref(plan), fast(plan);
  fast.set_kernel_hook(cpu::cpu_kernels(pool));
  Buffer t = table_values();
  Buffer ids_buf(DType::I32, {5});
  const int32_t values[] = {4, 39, 0, 4, 17};
  for (int i = 0; i < 5; ++i) ids_buf.set(i, values[i]);
  for (Interpreter* it : {&ref, &fast}) {
    it->set_input("table", t);
    it->set_input("ids", ids_buf);
    it->run();
  }
  const Buffer &a = ref.output("rows"), &b = fast.output("rows");
  ASSERT_EQ(a.numel(), 5u * 16u);
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(std::memcmp(a.bytes(), b.bytes(), a.numel() * dtype_size(a.dtype())), 0);
}

