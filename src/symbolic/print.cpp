// Printing expressions: readable text and C/CUDA source.
#include <climits>

#include "symbolic/expr.h"

namespace luminal {
namespace {

int precedence(ExprKind k) {
  switch (k) {
    case ExprKind::Or: return 1;
    case ExprKind::And: return 2;
    case ExprKind::Lt: case ExprKind::Ge: return 3;
    case ExprKind::Add: return 4;
    case ExprKind::Mul: case ExprKind::FloorDiv: case ExprKind::Mod: return 5;
    default: return 9;  // leaves and function-call forms
  }
}

std::string text(const Expr& e, int parent_prec) {
  std::string s;
  ExprKind k = e.kind();
  switch (k) {
    case ExprKind::Const: {
      s = std::to_string(e.value());
      return (e.value() < 0 && parent_prec > 4) ? "(" + s + ")" : s;
    }
    case ExprKind::Var: return e.name();
    case ExprKind::Index: return "z";
    case ExprKind::Min: return "min(" + text(e.lhs(), 0) + ", " + text(e.rhs(), 0) + ")";
    case ExprKind::Max: return "max(" + text(e.lhs(), 0) + ", " + text(e.rhs(), 0) + ")";
    case ExprKind::CeilDiv: return "ceildiv(" + text(e.lhs(), 0) + ", " + text(e.rhs(), 0) + ")";
    case ExprKind::Add: {
      Expr r = e.rhs();
      if (r.is_const() && r.value() < 0) {
        s = text(e.lhs(), 4) + " - " + std::to_string(-r.value());
      } else if (r.kind() == ExprKind::Mul && r.lhs().is_const() && r.lhs().value() < 0) {
        int64_t c = -r.lhs().value();
        s = text(e.lhs(), 4) + " - " + (c == 1 ? "" : std::to_string(c) + "*") + text(r.rhs(), 6);
      } else {
        s = text(e.lhs(), 4) + " + " + text(r, 5);
      }
      break;
    }
    default: {
      int p = precedence(k);
      std::string op = expr_kind_name(k);
      std::string sep = (k == ExprKind::Mul) ? op : " " + op + " ";
      bool compare = k == ExprKind::Lt || k == ExprKind::Ge;  // never print a chain like a < b < c
      s = text(e.lhs(), compare ? p + 1 : p) + sep + text(e.rhs(), p + 1);
      break;
    }
  }
  return precedence(k) < parent_prec ? "(" + s + ")" : s;
}

bool nonneg(const Expr& e) {
  ExprRange r = range_of(e);
  return r.lo && *r.lo >= 0;
}
bool positive(const Expr& e) {
  ExprRange r = range_of(e);
  return r.lo && *r.lo >= 1;
}

std::string c_code(const Expr& e, const std::string& z) {
  auto c = [&](const Expr& x) { return c_code(x, z); };
  auto call = [&](const char* f) { return std::string(f) + "(" + c(e.lhs()) + ", " + c(e.rhs()) + ")"; };
  switch (e.kind()) {
    case ExprKind::Const: {
      int64_t v = e.value();
      std::string s = std::to_string(v);
      if (v > INT_MAX || v < INT_MIN) s += "LL";
      return v < 0 ? "(" + s + ")" : s;
    }
    case ExprKind::Var: return e.name();
    case ExprKind::Index: return z;
    case ExprKind::Add: return "(" + c(e.lhs()) + " + " + c(e.rhs()) + ")";
    case ExprKind::Mul: return "(" + c(e.lhs()) + " * " + c(e.rhs()) + ")";
    case ExprKind::FloorDiv:
      if (nonneg(e.lhs()) && positive(e.rhs())) return "(" + c(e.lhs()) + " / " + c(e.rhs()) + ")";
      return call("lm_floordiv");
    case ExprKind::Mod:
      if (nonneg(e.lhs()) && positive(e.rhs())) return "(" + c(e.lhs()) + " % " + c(e.rhs()) + ")";
      return call("lm_mod");
    case ExprKind::CeilDiv: return call("lm_ceildiv");
    case ExprKind::Min: return call("lm_min");
    case ExprKind::Max: return call("lm_max");
    case ExprKind::Lt: return "(long long)(" + c(e.lhs()) + " < " + c(e.rhs()) + ")";
    case ExprKind::Ge: return "(long long)(" + c(e.lhs()) + " >= " + c(e.rhs()) + ")";
    case ExprKind::And: return "(long long)(" + c(e.lhs()) + " && " + c(e.rhs()) + ")";
    case ExprKind::Or: return "(long long)(" + c(e.lhs()) + " || " + c(e.rhs()) + ")";
  }
  return "";
}

}  // namespace

std::string Expr::to_string() const { return text(*this, 0); }

std::string Expr::to_c(const std::string& index_name) const { return c_code(*this, index_name); }

std::string Expr::c_prelude() {
  return R"(#ifndef LM_EXPR_PRELUDE
#define LM_EXPR_PRELUDE
#ifdef __CUDACC__
#define LM_EXPR_FN __host__ __device__ __forceinline__
#else
#define LM_EXPR_FN static inline
#endif
// Index math is nearly always on non-negative values below 2^31: there a 32-bit unsigned
// division gives the same result, and costs a fraction of a 64-bit one (on a GPU, a 64-bit
// division is a call of about a hundred instructions).
LM_EXPR_FN int lm_small(long long a, long long b) { return ((unsigned long long)a | (unsigned long long)b) <= 0x7fffffffULL && b != 0; }
// A divisor of 1 (a decode's sequence length) skips the division altogether.
LM_EXPR_FN long long lm_floordiv(long long a, long long b) {
  if (b == 1) return a;
  if (lm_small(a, b)) return (long long)((unsigned)a / (unsigned)b);
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
LM_EXPR_FN long long lm_mod(long long a, long long b) {
  if (b == 1) return 0;
  if (lm_small(a, b)) return (long long)((unsigned)a % (unsigned)b);
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
LM_EXPR_FN long long lm_ceildiv(long long a, long long b) { return -lm_floordiv(-a, b); }
LM_EXPR_FN long long lm_min(long long a, long long b) { return a < b ? a : b; }
LM_EXPR_FN long long lm_max(long long a, long long b) { return a > b ? a : b; }
#endif
)";
}

}  // namespace luminal
