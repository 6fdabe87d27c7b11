// SumReduce and MaxReduce: every axis against naive loops, accumulation dtype, NaN, empty axes.
#include <climits>
#include <cmath>

#include "graph/hlir_test_util.h"

using namespace hlirtest;

namespace {

// Reduces input "x" of `shape` along `axis`; returns the output buffer.
Buffer reduce(OpKind op, DType t, const Shape& shape, Buffer x, size_t axis) {
  return run_unary_graph(t, shape, std::move(x), [&](Graph& g, NodeId in) { return g.reduce(op, edge(g, in), axis); })
      .output("out");
}

// Naive reduction of a row-major [outer, len, inner] array in double, then `finish`.
template <class Acc, class F>
std::vector<Acc> naive(const std::vector<float>& x, const Shape& shape, size_t axis, Acc init, F step) {
  int64_t outer = 1, inner = 1, len = shape[axis];
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<Acc> r;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      Acc acc = init;
      for (int64_t k = 0; k < len; ++k) acc = step(acc, x[(o * len + k) * inner + i]);
      r.push_back(acc);
    }
  return r;
}

}  // namespace

TEST(GraphReduce, SumEveryAxisOfRank3) {
  Shape s{2, 3, 4};
  std::vector<float> x = random_floats(24, -5, 5, 21);
  for (size_t axis = 0; axis < 3; ++axis) {
    Buffer r = reduce(OpKind::SumReduce, DType::F32, s, Buffer::f32(x, s), axis);
    Shape want_shape = s;
    want_shape.erase(want_shape.begin() + axis);
    EXPECT_EQ(r.shape(), want_shape);
    EXPECT_FLOATS_SAME(r.to_f32(), naive<float>(x, s, axis, 0.0f, [](float a, float v) { return a + v; })) << axis;
  }
}

TEST(GraphReduce, MaxEveryAxisOfRank3) {
  Shape s{3, 2, 5};
  std::vector<float> x = random_floats(30, -5, 5, 22);
  for (size_t axis = 0; axis < 3; ++axis) {
    Buffer r = reduce(OpKind::MaxReduce, DType::F32, s, Buffer::f32(x, s), axis);
    EXPECT_FLOATS_SAME(r.to_f32(), naive<float>(x, s, axis, -INFINITY, [](float a, float v) { return std::max(a, v); }));
  }
}

TEST(GraphReduce, ReduceToScalar) {
  Shape s{5};
  Buffer r = reduce(OpKind::SumReduce, DType::F32, s, Buffer::f32({1, 2, 3, 4, 5.5f}, s), 0);
  EXPECT_EQ(r.shape(), Shape{});
  EXPECT_FLOATS_SAME(r.to_f32(), std::vector<float>{15.5f});
}

TEST(GraphReduce, FloatSumsAccumulateInF32) {
  // In f32, 2^24 + 1 == 2^24, so adding sixteen ones one at a time changes nothing;
  // a double accumulator would give 2^24 + 16.
  std::vector<float> x(17, 1.0f);
  x[0] = 16777216.0f;
  Shape s{17};
  EXPECT_FLOATS_SAME(reduce(OpKind::SumReduce, DType::F32, s, Buffer::f32(x, s), 0).to_f32(), std::vector<float>{16777216.0f});
  // bf16 inputs accumulate in f32 and round once: 300 ones sum to 300 (exact in bf16), while a
  // bf16 accumulator would stick at 256.
  Shape s2{300};
  Buffer r = reduce(OpKind::SumReduce, DType::BF16, s2, Buffer::f32(std::vector<float>(300, 1.0f), s2), 0);
  EXPECT_EQ(r.dtype(), DType::BF16);
  EXPECT_FLOATS_SAME(r.to_f32(), std::vector<float>{300});
  // f16 partial sums may leave the f16 range: 60000 + 60000 - 60000 = 60000, not Inf.
  Shape s4{3};
  EXPECT_FLOATS_SAME(reduce(OpKind::SumReduce, DType::F16, s4, Buffer::f32({60000, 60000, -60000}, s4), 0).to_f32(),
                     std::vector<float>{60000});
  // f16: the result is rounded to f16 at the end (1000 + f16(0.3) = 1000.29993 -> 1000.5).
  Shape s3{2};
  EXPECT_FLOATS_SAME(reduce(OpKind::SumReduce, DType::F16, s3, Buffer::f32({1000, 0.3f}, s3), 0).to_f32(),
                     std::vector<float>{1000.5f});
}

TEST(GraphReduce, I32SumWrapsAndMaxIsExact) {
  Shape s{2, 3};
  Buffer x = Buffer::i32({INT_MAX, 1, 5, -4, INT_MIN, -1}, s);
  Buffer sum = reduce(OpKind::SumReduce, DType::I32, s, x, 1);
  EXPECT_EQ(sum.dtype(), DType::I32);
  EXPECT_EQ(sum.to_i32(), (std::vector<int32_t>{static_cast<int32_t>(0x80000005u), INT_MAX - 4}));
  Buffer mx = reduce(OpKind::MaxReduce, DType::I32, s, x, 0);
  EXPECT_EQ(mx.to_i32(), (std::vector<int32_t>{INT_MAX, 1, 5}));
  // 16777217 is not an f32: an i32 max must not go through float.
  Shape s1{2};
  EXPECT_EQ(reduce(OpKind::MaxReduce, DType::I32, s1, Buffer::i32({16777217, 16777216}, s1), 0).to_i32(),
            std::vector<int32_t>{16777217});
}

TEST(GraphReduce, MaxPropagatesNaN) {
  Shape s{4, 3};
  Buffer x = Buffer::f32({NAN, 1, 2, /**/ 5, 1, -INFINITY, /**/ 3, NAN, -INFINITY, /**/ 4, 0, NAN}, s);
  Buffer r = reduce(OpKind::MaxReduce, DType::F32, s, x, 1);
  EXPECT_FLOATS_SAME(r.to_f32(), (std::vector<float>{NAN, 5, NAN, NAN}));
  EXPECT_FLOATS_SAME(reduce(OpKind::MaxReduce, DType::F32, s, x, 0).to_f32(), (std::vector<float>{NAN, NAN, NAN}));
  // A sum with a NaN is NaN too.
  EXPECT_FLOATS_SAME(reduce(OpKind::SumReduce, DType::F32, s, x, 1).to_f32(), (std::vector<float>{NAN, -INFINITY, NAN, NAN}));
}

TEST(GraphReduce, EmptyAxis) {
  Shape s{3, 0};
  EXPECT_FLOATS_SAME(reduce(OpKind::MaxReduce, DType::F32, s, Buffer::f32({}, s), 1).to_f32(),
                     (std::vector<float>{-INFINITY, -INFINITY, -INFINITY}));
  EXPECT_FLOATS_SAME(reduce(OpKind::SumReduce, DType::F32, s, Buffer::f32({}, s), 1).to_f32(), (std::vector<float>{0, 0, 0}));
  EXPECT_FLOATS_SAME(reduce(OpKind::MaxReduce, DType::BF16, s, Buffer::f32({}, s), 1).to_f32(),
                     (std::vector<float>{-INFINITY, -INFINITY, -INFINITY}));
  EXPECT_EQ(reduce(OpKind::MaxReduce, DType::I32, s, Buffer::i32({}, s), 1).to_i32(), (std::vector<int32_t>{INT_MIN, INT_MIN, INT_MIN}));
  // Reducing the non-empty axis of [3, 0] gives an empty [0].
  Buffer r = reduce(OpKind::SumReduce, DType::F32, s, Buffer::f32({}, s), 0);
  EXPECT_EQ(r.shape(), Shape{0});
}

TEST(GraphReduce, BoolMaxIsAnyAndBoolSumIsRejected) {
  Shape s{2, 2};
  Buffer r = reduce(OpKind::MaxReduce, DType::Bool, s, Buffer::boolean({false, true, false, false}, s), 1);
  EXPECT_EQ(r.dtype(), DType::Bool);
  EXPECT_EQ(r.to_i32(), (std::vector<int32_t>{1, 0}));
  Graph g;
  NodeId x = g.input("x", DType::Bool, exprs(s));
  EXPECT_LM_ERROR(g.reduce(OpKind::SumReduce, edge(g, x), 0), "SumReduce", "bool");
}

TEST(GraphReduce, AxisOutOfRangeIsRejected) {
  Graph g;
  NodeId x = g.input("x", DType::F32, exprs({2, 3}));
  EXPECT_LM_ERROR(g.reduce(OpKind::SumReduce, edge(g, x), 2), "SumReduce", "axis 2", "[2, 3]");
  EXPECT_LM_ERROR(g.reduce(OpKind::MaxReduce, edge(g, x), 7), "MaxReduce", "axis 7");
  NodeId c = g.constant(1);
  EXPECT_LM_ERROR(g.reduce(OpKind::SumReduce, edge(g, c), 0), "axis 0");
}
