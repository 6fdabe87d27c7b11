// Interval bounds of an expression, assuming every dim and the index variable is >= 0.
// The simplifier uses them to drop provably redundant min/max, mod and comparisons.
#include <algorithm>

#include "symbolic/expr.h"

namespace luminal {
namespace {

using Bound = std::optional<int64_t>;

Bound add_b(Bound a, Bound b) {
  int64_t r;
  if (!a || !b || __builtin_add_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}

Bound mul_b(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

ExprRange mul_range(const ExprRange& x, const ExprRange& y) {
  if (x.lo && x.hi && y.lo && y.hi) {
    Bound c[4] = {mul_b(*x.lo, *y.lo), mul_b(*x.lo, *y.hi), mul_b(*x.hi, *y.lo), mul_b(*x.hi, *y.hi)};
    for (auto& v : c)
      if (!v) return {};
    return {std::min({*c[0], *c[1], *c[2], *c[3]}), std::max({*c[0], *c[1], *c[2], *c[3]})};
  }
  // One side unbounded: only sign-definite cases are tracked.
  if (x.lo && *x.lo >= 0 && y.lo && *y.lo >= 0) {
    ExprRange r{mul_b(*x.lo, *y.lo), std::nullopt};
    return r;
  }
  auto scaled = [](const ExprRange& v, int64_t k) -> ExprRange {  // v * constant k
    Bound lo = v.lo ? mul_b(*v.lo, k) : std::nullopt;
    Bound hi = v.hi ? mul_b(*v.hi, k) : std::nullopt;
    if (k >= 0) return {lo, hi};
    return {hi, lo};
  };
  if (x.lo && x.hi && *x.lo == *x.hi) return scaled(y, *x.lo);
  if (y.lo && y.hi && *y.lo == *y.hi) return scaled(x, *y.lo);
  return {};
}

}  // namespace

ExprRange range_of(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const: return {e.value(), e.value()};
    case ExprKind::Var:
    case ExprKind::Index: return {0, std::nullopt};
    case ExprKind::Lt:
    case ExprKind::Ge:
    case ExprKind::And:
    case ExprKind::Or: return {0, 1};
    default: break;
  }
  ExprRange a = range_of(e.lhs());
  ExprRange b = range_of(e.rhs());
  bool b_const = b.lo && b.hi && *b.lo == *b.hi;
  switch (e.kind()) {
    case ExprKind::Add: return {add_b(a.lo, b.lo), add_b(a.hi, b.hi)};
    case ExprKind::Mul: return mul_range(a, b);
    case ExprKind::FloorDiv:
    case ExprKind::CeilDiv: {
      if (b_const && *b.lo > 0) {
        int64_t k = *b.lo;
        bool ceil = e.kind() == ExprKind::CeilDiv;
        auto d = [&](Bound v) -> Bound {
          if (!v) return std::nullopt;
          return ceil ? -floor_div(-*v, k) : floor_div(*v, k);
        };
        return {d(a.lo), d(a.hi)};
      }
      if (b.lo && *b.lo >= 1 && a.lo && *a.lo >= 0) return {0, a.hi};
      return {};
    }
    case ExprKind::Mod: {
      if (b.lo && *b.lo >= 1) {
        Bound hi = b.hi ? Bound(*b.hi - 1) : std::nullopt;
        if (a.lo && *a.lo >= 0 && a.hi) hi = hi ? std::min(*hi, *a.hi) : *a.hi;
        return {0, hi};
      }
      return {};
    }
    case ExprKind::Min: {
      Bound lo = (a.lo && b.lo) ? Bound(std::min(*a.lo, *b.lo)) : std::nullopt;
      Bound hi = a.hi && b.hi ? Bound(std::min(*a.hi, *b.hi)) : (a.hi ? a.hi : b.hi);
      return {lo, hi};
    }
    case ExprKind::Max: {
      Bound lo = a.lo && b.lo ? Bound(std::max(*a.lo, *b.lo)) : (a.lo ? a.lo : b.lo);
      Bound hi = (a.hi && b.hi) ? Bound(std::max(*a.hi, *b.hi)) : std::nullopt;
      return {lo, hi};
    }
    default: return {};
  }
}

}  // namespace luminal
