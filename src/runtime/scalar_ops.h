#pragma once
// The value semantics of the elementwise primitives on one element (docs/ops.md), shared by
// the interpreter and the reference kernels so fused and unfused plans agree bit for bit.
#include "core/dtype.h"
#include "graph/op.h"

namespace luminal {

float unary_op(OpKind op, float x);  // Exp2, Log2, Sin, Sqrt, Recip in f32
// Add, Mul, Mod, LessThan with left-operand dtype t (b is converted to t first).
double binary_op(OpKind op, DType t, double a, double b);

}  // namespace luminal
