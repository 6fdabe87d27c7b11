#pragma once
// The primitive op set (HLIR). Every model reduces to these; see docs/ops.md for exact semantics.
#include <cstdint>
#include <string>

namespace luminal {

enum class OpKind : uint8_t {
  Input,      // a tensor set from outside: weights, tokens, caches
  Output,     // marks a graph result
  Constant,   // a scalar f32
  Iota,       // i32 tensor of n elements, element i = expr with the index variable bound to i
  Cast,       // convert to another dtype
  Exp2, Log2, Sin, Sqrt, Recip,  // elementwise float math
  Add, Mul, Mod,                 // elementwise; the right operand is converted to the left's dtype
  LessThan,                      // elementwise compare, bool result
  SumReduce, MaxReduce,          // reduce one axis (the axis is removed)
  Gather,     // out[i] = data[idx[i]]: flat logical index into data's view; out of range reads 0
  Scatter,    // copy of dest with out[idx[j]] = src[j]; out-of-range indices are skipped
  // LLIR only (never made by the frontend): a kernel chosen by the compiler, named by
  // Node::kernel, computing what the HLIR pattern it replaced computes (runtime/kernels.h).
  Kernel,
};

const char* op_name(OpKind op);
bool is_unary(OpKind op);   // Exp2 .. Recip
bool is_binary(OpKind op);  // Add, Mul, Mod, LessThan
bool is_reduce(OpKind op);  // SumReduce, MaxReduce

}  // namespace luminal
