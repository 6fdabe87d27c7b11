#pragma once
// The value semantics of the elementwise primitives on one element (docs/ops.md), shared by
// the interpreter and the reference kernels so fused and unfused plans agree bit for bit.
#include <cstdint>

#include "core/dtype.h"
#include "graph/op.h"

namespace luminal {

float unary_op(OpKind op, float x);  // Exp2, Log2, Sin, Sqrt, Recip in f32
// Add, Mul, Mod, LessThan with left-operand dtype t (b is converted to t first).
double binary_op(OpKind op, DType t, double a, double b);

// One output of SumReduce / MaxReduce over dtype t: float sums accumulate in f32 in order,
// i32 sums wrap, max propagates NaN and starts at the dtype's lowest value (-inf, INT32_MIN,
// false).
class ReduceAcc {
 public:
  ReduceAcc(bool sum, DType t);
  void add(double v);
  double result() const;  // in dtype t

 private:
  bool sum_;
  DType t_;
  float f_ = 0;
  uint32_t i_ = 0;
  double m_;
};

}  // namespace luminal
