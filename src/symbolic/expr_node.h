#pragma once
// The interned node behind an Expr. Private to src/symbolic.
#include <atomic>
#include <cstdint>
#include <string>

#include "symbolic/expr.h"

namespace luminal {

struct ExprNode {
  ExprKind kind;
  int64_t value = 0;     // Const
  std::string name;      // Var
  const ExprNode* a = nullptr;
  const ExprNode* b = nullptr;
  uint64_t hash = 0;     // structural, deterministic
  bool has_index = false;
  // Memo of simplify(); a node that is already simple points to itself.
  mutable std::atomic<const ExprNode*> simplified{nullptr};
};

Expr intern_expr(ExprKind kind, int64_t value, std::string_view name, const ExprNode* a,
                 const ExprNode* b);

}  // namespace luminal
