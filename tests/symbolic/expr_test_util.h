#pragma once
// Shared helpers for the symbolic expression tests: an independent reference evaluator and a
// seeded generator of random (unsimplified) expressions.
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "symbolic/expr.h"

namespace luminal {
// gtest prints failing Expr values as text instead of raw bytes.
inline void PrintTo(const Expr& e, std::ostream* os) { *os << e.to_string(); }
}  // namespace luminal

namespace luminal::testing {

// ---- reference evaluator --------------------------------------------------------------------
// Written from the definitions (floor: the largest q with b*q <= a for b > 0, ...), not from the
// library's formulas. Intermediates are __int128; anything beyond kLimit is flagged as overflow
// so callers can skip points where the int64 evaluators might overflow.

inline constexpr __int128 kLimit = 1'000'000'000'000;  // 1e12

struct RefResult {
  __int128 value = 0;
  bool div_by_zero = false;  // some division/modulo anywhere had a zero divisor
  bool overflow = false;     // some intermediate left [-kLimit, kLimit]
  bool ok() const { return !div_by_zero && !overflow; }
};

// floor(a / b): the q with q <= a/b < q + 1.
inline __int128 ref_floor_div(__int128 a, __int128 b) {
  __int128 q = a / b;  // truncation, then walk to the definition
  auto le = [&](__int128 q) { return b > 0 ? b * q <= a : b * q >= a; };  // q <= a/b
  while (!le(q)) --q;
  while (le(q + 1)) ++q;
  return q;
}
// ceil(a / b): the q with q - 1 < a/b <= q.
inline __int128 ref_ceil_div(__int128 a, __int128 b) {
  __int128 q = a / b;
  auto ge = [&](__int128 q) { return b > 0 ? b * q >= a : b * q <= a; };  // q >= a/b
  while (!ge(q)) ++q;
  while (ge(q - 1)) --q;
  return q;
}

inline RefResult ref_eval(const Expr& e, const DimMap& dims, int64_t index) {
  RefResult r;
  switch (e.kind()) {
    case ExprKind::Const: r.value = e.value(); return r;
    case ExprKind::Index: r.value = index; return r;
    case ExprKind::Var: r.value = dims.at(e.name()); return r;
    default: break;
  }
  // Both sides always, like the library: errors must not depend on operand order.
  RefResult x = ref_eval(e.lhs(), dims, index);
  RefResult y = ref_eval(e.rhs(), dims, index);
  r.div_by_zero = x.div_by_zero || y.div_by_zero;
  r.overflow = x.overflow || y.overflow;
  __int128 a = x.value, b = y.value;
  switch (e.kind()) {
    case ExprKind::Add: r.value = a + b; break;
    case ExprKind::Mul: r.value = a * b; break;
    case ExprKind::FloorDiv:
    case ExprKind::CeilDiv:
    case ExprKind::Mod:
      if (b == 0) {
        r.div_by_zero = true;
        r.value = 0;
      } else if (e.kind() == ExprKind::FloorDiv) {
        r.value = ref_floor_div(a, b);
      } else if (e.kind() == ExprKind::CeilDiv) {
        r.value = ref_ceil_div(a, b);
      } else {
        r.value = a - b * ref_floor_div(a, b);
      }
      break;
    case ExprKind::Min: r.value = a < b ? a : b; break;
    case ExprKind::Max: r.value = a > b ? a : b; break;
    case ExprKind::Lt: r.value = a < b; break;
    case ExprKind::Ge: r.value = a >= b; break;
    case ExprKind::And: r.value = (a != 0) && (b != 0); break;
    case ExprKind::Or: r.value = (a != 0) || (b != 0); break;
    default: break;
  }
  if (r.value > kLimit || r.value < -kLimit) r.overflow = true;
  if (r.overflow) r.value = 0;  // keep later products of flagged values from overflowing int128
  return r;
}

// ---- random expressions ---------------------------------------------------------------------

inline const std::vector<ExprKind>& binary_kinds() {
  static const std::vector<ExprKind> k = {
      ExprKind::Add, ExprKind::Mul, ExprKind::FloorDiv, ExprKind::CeilDiv, ExprKind::Mod,
      ExprKind::Min, ExprKind::Max, ExprKind::Lt,       ExprKind::Ge,      ExprKind::And,
      ExprKind::Or};
  return k;
}

class RandomExprGen {
 public:
  RandomExprGen(uint32_t seed, std::vector<std::string> dim_names)
      : rng_(seed), names_(std::move(dim_names)) {
    for (const auto& n : names_) vars_.push_back(Expr::var(n));
  }

  std::mt19937& rng() { return rng_; }
  const std::vector<std::string>& dim_names() const { return names_; }

  // A raw (unsimplified) tree of depth <= max_depth.
  Expr gen(int max_depth) {
    if (max_depth == 0 || uniform(0, 99) < 25) return leaf();
    const auto& kinds = binary_kinds();
    ExprKind k = kinds[uniform(0, static_cast<int>(kinds.size()) - 1)];
    Expr a = gen(max_depth - 1);
    Expr b;
    bool is_div = k == ExprKind::FloorDiv || k == ExprKind::CeilDiv || k == ExprKind::Mod;
    // Divisors: usually a small positive constant or a dim (where most rewrite rules live),
    // sometimes anything (negative, zero, compound).
    int pick = uniform(0, 99);
    if (is_div && pick < 45) {
      static const int64_t divs[] = {1, 2, 3, 4, 8, 16, -2, -3};
      b = Expr(divs[uniform(0, 7)]);
    } else if (is_div && pick < 60) {
      b = vars_[uniform(0, static_cast<int>(vars_.size()) - 1)];
    } else if (k == ExprKind::Mul && pick < 60) {
      b = leaf();  // keep products from growing too fast
    } else {
      b = gen(max_depth - 1);
    }
    // Operand order matters for the non-commutative kinds; swap divisions only rarely.
    if (uniform(0, 99) < (is_div ? 10 : 50)) std::swap(a, b);
    return Expr::raw(k, a, b);
  }

  Expr leaf() {
    int p = uniform(0, 99);
    if (p < 40) {
      static const int64_t consts[] = {-3, -2, -1, 0, 1, 1, 2, 2, 3, 4, 5, 7, 8, 16};
      return Expr(consts[uniform(0, 13)]);
    }
    if (p < 75) return vars_[uniform(0, static_cast<int>(vars_.size()) - 1)];
    return Expr::index();
  }

  DimMap dims(int64_t hi = 20) {
    DimMap m;
    for (const auto& n : names_) m[n] = uniform(0, static_cast<int>(hi));
    return m;
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

 private:
  std::mt19937 rng_;
  std::vector<std::string> names_;
  std::vector<Expr> vars_;
};

inline std::string dims_to_string(const DimMap& dims, int64_t index) {
  std::string s = "{";
  std::vector<std::pair<std::string, int64_t>> v(dims.begin(), dims.end());
  std::sort(v.begin(), v.end());
  for (const auto& [k, x] : v) s += k + "=" + std::to_string(x) + ", ";
  return s + "z=" + std::to_string(index) + "}";
}

}  // namespace luminal::testing
