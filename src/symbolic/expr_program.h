#pragma once
// An expression flattened into a postfix program for fast repeated evaluation over the index
// variable (the interpreter evaluates view index expressions once per element).
#include <cstdint>
#include <vector>

#include "symbolic/expr.h"

namespace luminal {

class ExprProgram {
 public:
  ExprProgram() = default;
  // Dims are looked up now; only the index variable stays free. Throws Error for unbound dims.
  ExprProgram(const Expr& e, const DimMap& dims);
  int64_t operator()(int64_t index) const;
  bool is_const() const { return code_.size() == 1 && code_[0].op == Op::Push; }

 private:
  enum class Op : uint8_t { Push, Index, Bin };
  struct Instr {
    Op op;
    ExprKind kind;
    int64_t value;
  };
  std::vector<Instr> code_;
  size_t max_stack_ = 0;
  void emit(const Expr& e, const DimMap& dims, size_t depth);
};

}  // namespace luminal
