#include "runtime/scalar_ops.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"
#include "runtime/buffer.h"

namespace luminal {

float unary_op(OpKind op, float x) {
  switch (op) {
    case OpKind::Exp2: return std::exp2(x);
    case OpKind::Log2: return std::log2(x);
    case OpKind::Sin: return std::sin(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Recip: return 1.0f / x;
    default: LM_ASSERT(false, "not a unary op");
  }
}

double binary_op(OpKind op, DType t, double a, double b) {
  b = convert_value(b, t);  // the right operand takes the left's dtype
  if (op == OpKind::LessThan) return a < b ? 1 : 0;
  if (is_float(t)) {
    float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (op) {
      case OpKind::Add: return x + y;
      case OpKind::Mul: return x * y;
      case OpKind::Mod: return std::fmod(x, y);
      default: break;
    }
  } else if (t == DType::I32) {
    int32_t x = static_cast<int32_t>(a), y = static_cast<int32_t>(b);
    switch (op) {
      case OpKind::Add: return static_cast<int32_t>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
      case OpKind::Mul: return static_cast<int32_t>(static_cast<uint32_t>(x) * static_cast<uint32_t>(y));
      case OpKind::Mod: return (y == 0 || y == -1) ? 0 : x % y;  // truncated, like C and fmod
      default: break;
    }
  } else {  // bool: add is or, mul is and
    if (op == OpKind::Add) return (a != 0 || b != 0) ? 1 : 0;
    if (op == OpKind::Mul) return (a != 0 && b != 0) ? 1 : 0;
  }
  LM_ASSERT(false, std::string("unsupported binary op ") + op_name(op) + " on " + dtype_name(t));
}


ReduceAcc::ReduceAcc(bool sum, DType t)
    : sum_(sum), t_(t),
      m_(is_float(t) ? -std::numeric_limits<double>::infinity() : t == DType::I32 ? INT32_MIN : 0) {}

void ReduceAcc::add(double v) {
  if (sum_) {
    if (is_float(t_)) f_ += static_cast<float>(v);
    else i_ += static_cast<uint32_t>(static_cast<int32_t>(v));
  } else if (!std::isnan(m_) && (std::isnan(v) || v > m_)) {
    m_ = v;
  }
}

double ReduceAcc::result() const {
  if (!sum_) return m_;
  return convert_value(is_float(t_) ? f_ : static_cast<double>(static_cast<int32_t>(i_)), t_);
}

}  // namespace luminal
