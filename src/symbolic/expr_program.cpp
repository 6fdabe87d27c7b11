#include "symbolic/expr_program.h"

#include <algorithm>

#include "core/error.h"

namespace luminal {

ExprProgram::ExprProgram(const Expr& e, const DimMap& dims) {
  // Substitute dims first so constant parts fold away before evaluation.
  std::map<std::string, Expr> bound;
  for (const std::string& d : e.dims()) {
    auto it = dims.find(d);
    if (it == dims.end())
      throw Error("dynamic dim '" + d + "' is not bound: bind it before running (set_dim(\"" + d + "\", value))");
    bound.emplace(d, Expr(it->second));
  }
  emit(bound.empty() ? e.simplify() : e.substitute(bound), dims, 1);
}

void ExprProgram::emit(const Expr& e, const DimMap& dims, size_t depth) {
  max_stack_ = std::max(max_stack_, depth);
  switch (e.kind()) {
    case ExprKind::Const: code_.push_back({Op::Push, e.kind(), e.value()}); return;
    case ExprKind::Index: code_.push_back({Op::Index, e.kind(), 0}); return;
    case ExprKind::Var: code_.push_back({Op::Push, e.kind(), e.eval(dims)}); return;
    default: break;
  }
  emit(e.lhs(), dims, depth);
  emit(e.rhs(), dims, depth + 1);
  code_.push_back({Op::Bin, e.kind(), 0});
}

static int64_t checked_floor_div(int64_t a, int64_t b) {
  if (b == 0) throw Error("division by zero while evaluating an index expression");
  return floor_div(a, b);
}

int64_t ExprProgram::operator()(int64_t index) const {
  int64_t local[64];  // not zeroed: this runs once per element read
  local[0] = 0;
  std::vector<int64_t> heap;  // only for unusually deep expressions
  int64_t* stack = local;
  if (max_stack_ > 64) {
    heap.resize(max_stack_);
    stack = heap.data();
  }
  size_t sp = 0;
  for (const Instr& in : code_) {
    if (in.op == Op::Push) { stack[sp++] = in.value; continue; }
    if (in.op == Op::Index) { stack[sp++] = index; continue; }
    int64_t b = stack[--sp];
    int64_t& a = stack[sp - 1];
    switch (in.kind) {
      case ExprKind::Add: a = a + b; break;
      case ExprKind::Mul: a = a * b; break;
      case ExprKind::FloorDiv: a = checked_floor_div(a, b); break;
      case ExprKind::CeilDiv: a = -checked_floor_div(-a, b); break;
      case ExprKind::Mod: a = a - b * checked_floor_div(a, b); break;
      case ExprKind::Min: a = std::min(a, b); break;
      case ExprKind::Max: a = std::max(a, b); break;
      case ExprKind::Lt: a = a < b; break;
      case ExprKind::Ge: a = a >= b; break;
      case ExprKind::And: a = (a != 0 && b != 0); break;
      case ExprKind::Or: a = (a != 0 || b != 0); break;
      default: LM_ASSERT(false, "bad instruction");
    }
  }
  return stack[0];
}

}  // namespace luminal
