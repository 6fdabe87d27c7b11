// The Matmul kernel reads its operands through any view (strided, transposed, sliced, padded,
// reshaped into a second layer, broadcast over batches) and computes bit for bit what the
// primitive Mul + SumReduce graph computes: each product rounded to f32, summed in k order.
#include <gtest/gtest.h>

#include "compiler/compile.h"
#include "frontend/ops.h"
#include "plan_check.h"

using namespace luminal;

namespace {

int matmuls(const Graph& plan) { return plancheck::count_kernels(plan, "Matmul"); }

void check_bitwise(const Graph& g, const DimMap& dims = {}) {
  CompileResult r = compile(g);
  ASSERT_GE(matmuls(r.plan), 1) << r.plan.dump();
  plancheck::expect_same_outputs(g, r.plan, dims, 0.0);
}

}  // namespace

TEST(MatmulViews, OddSizesBothLayouts) {
  for (int64_t n : {1, 3, 4, 5, 9}) {
    Graph g;
    Tensor a = input(g, "a", DType::F32, {7, 13});
    Tensor w = input(g, "w", DType::F32, {n, 13});
    linear(a, w, std::nullopt).output("y");               // B transposed (stride k along n)
    matmul(a, transpose(w, 0, 1)).output("y2");
    matmul(transpose(a, 0, 1), a).output("gram");         // A transposed
    SCOPED_TRACE(n);
    check_bitwise(g);
  }
}

TEST(MatmulViews, SlicedPaddedAndMultiLayerOperands) {
  Graph g;
  Tensor a = input(g, "a", DType::F32, {6, 10});
  Tensor b = input(g, "b", DType::F32, {12, 5});
  Tensor a_sliced = slice(a, 1, 2, 9);                                   // offset + stride
  Tensor b_padded = pad(slice(b, 0, 0, 5), {{1, 1}, {0, 0}});             // masked rows: 7 x 5
  matmul(a_sliced, b_padded).output("c");
  Tensor a_merged = reshape(permute(reshape(a, {6, 2, 5}), {1, 0, 2}), {12, 5});  // a second layer
  matmul(a_merged, transpose(b_padded, 0, 1)).output("d");
  check_bitwise(g);
}

TEST(MatmulViews, BroadcastBatchesAndDynamicDims) {
  Graph g;
  Expr s = Expr::var("s");
  Tensor q = input(g, "q", DType::F32, {4, s, 8});
  Tensor k = input(g, "k", DType::F32, {2, s, 8});
  Tensor k_per_head = reshape(expand(unsqueeze(k, 1), {2, 2, s, 8}), {4, s, 8});  // grouped heads
  matmul(q, transpose(k_per_head, 1, 2)).output("scores");
  for (int64_t sv : {1, 3, 6}) {
    SCOPED_TRACE(sv);
    check_bitwise(g, {{"s", sv}});
  }
}
