// The simplifier: bottom-up rewriting into a canonical form.
//
// Sums are kept as linear combinations of monomials with integer coefficients (terms sorted
// by Expr::compare, constant last); products as a coefficient times sorted factors. On top of
// that: constant folding, identities (x*1, x+0, (x*a)/a, (x%a)%a, x%a + a*(x/a) = x), nested
// floor divisions, gcd reduction of divisions, and range-based removal of min/max, mod,
// division and comparisons whose outcome is provable.
#include <map>
#include <numeric>

#include "core/error.h"
#include "symbolic/expr.h"
#include "symbolic/expr_node.h"

namespace luminal {
namespace {

struct ExprLess {
  bool operator()(const Expr& a, const Expr& b) const { return Expr::compare(a, b) < 0; }
};

// sum of coef * monomial, plus a constant
struct Lin {
  std::map<Expr, int64_t, ExprLess> terms;
  int64_t c = 0;
  void add(const Expr& m, int64_t k) {
    if (k == 0) return;
    auto [it, fresh] = terms.emplace(m, k);
    if (!fresh && (it->second += k) == 0) terms.erase(it);
  }
  void add(const Lin& o, int64_t k) {
    for (auto& [m, v] : o.terms) add(m, v * k);
    c += o.c * k;
  }
};

Lin to_lin(const Expr& e) {
  Lin l;
  if (e.is_const()) {
    l.c = e.value();
  } else if (e.kind() == ExprKind::Add) {
    l = to_lin(e.lhs());
    l.add(to_lin(e.rhs()), 1);
  } else if (e.kind() == ExprKind::Mul && e.lhs().is_const()) {
    l.add(to_lin(e.rhs()), e.lhs().value());
  } else {
    l.add(e, 1);
  }
  return l;
}

Expr from_lin(const Lin& l) {
  std::optional<Expr> sum;
  for (auto& [m, k] : l.terms) {
    Expr t = k == 1 ? m : Expr::raw(ExprKind::Mul, Expr(k), m);
    sum = sum ? Expr::raw(ExprKind::Add, *sum, t) : t;
  }
  if (!sum) return Expr(l.c);
  if (l.c != 0) sum = Expr::raw(ExprKind::Add, *sum, Expr(l.c));
  return *sum;
}

// coefficient * product of sorted non-constant factors
struct Prod {
  int64_t coef = 1;
  std::vector<Expr> factors;
};

void collect_prod(const Expr& e, Prod& p) {
  if (e.is_const()) {
    p.coef *= e.value();
  } else if (e.kind() == ExprKind::Mul) {
    collect_prod(e.lhs(), p);
    collect_prod(e.rhs(), p);
  } else {
    p.factors.push_back(e);
  }
}

Prod to_prod(const Expr& e) {
  Prod p;
  collect_prod(e, p);
  std::sort(p.factors.begin(), p.factors.end(), ExprLess());
  return p;
}

Expr monomial(const std::vector<Expr>& factors) {  // sorted factors, no coefficient
  if (factors.empty()) return Expr(1);
  Expr m = factors[0];
  for (size_t i = 1; i < factors.size(); ++i) m = Expr::raw(ExprKind::Mul, m, factors[i]);
  return m;
}

Expr from_prod(const Prod& p) {
  if (p.coef == 0) return Expr(0);
  if (p.factors.empty()) return Expr(p.coef);
  Expr m = monomial(p.factors);
  return p.coef == 1 ? m : Expr::raw(ExprKind::Mul, Expr(p.coef), m);
}


bool within(const Expr& e, int64_t lo, int64_t hi) {
  ExprRange r = range_of(e);
  return r.lo && r.hi && *r.lo >= lo && *r.hi <= hi;
}
bool nonneg(const Expr& e) {
  ExprRange r = range_of(e);
  return r.lo && *r.lo >= 0;
}

// a / b when b divides every term of a exactly (b a constant or a monomial); else nullopt.
std::optional<Expr> exact_quotient(const Expr& a, const Expr& b) {
  if (b.is_const(0)) return std::nullopt;
  Prod pb = to_prod(b);
  if (pb.coef == 0) return std::nullopt;
  Lin la = to_lin(a);
  if (la.c % pb.coef != 0 || (la.c != 0 && !pb.factors.empty())) return std::nullopt;
  Lin q;
  q.c = la.c / pb.coef;
  for (auto& [m, k] : la.terms) {
    if (k % pb.coef != 0) return std::nullopt;
    Prod pm = to_prod(m);
    for (const Expr& f : pb.factors) {
      auto it = std::find(pm.factors.begin(), pm.factors.end(), f);
      if (it == pm.factors.end()) return std::nullopt;
      pm.factors.erase(it);
    }
    pm.coef *= k / pb.coef;
    q.add(to_lin(from_prod(pm).simplify()), 1);
  }
  return from_lin(q);
}

Expr simplify_add(const Expr& a, const Expr& b) {
  Lin l = to_lin(a);
  l.add(to_lin(b), 1);
  // x % k (coef c) together with k * (x / k) (coef c) is c * x.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [m, c] : l.terms) {
      if (m.kind() != ExprKind::Mod) continue;
      Expr x = m.lhs(), k = m.rhs();
      Lin partner = to_lin(k * (x / k));
      if (partner.terms.size() != 1 || partner.c != 0) continue;
      auto [pm, pk] = *partner.terms.begin();
      auto it = l.terms.find(pm);
      if (it == l.terms.end() || it->second != c * pk) continue;
      int64_t coef = c;
      Expr mod_term = m;
      l.add(pm, -coef * pk);
      l.add(mod_term, -coef);
      l.add(to_lin(x), coef);
      changed = true;
      break;
    }
  }
  return from_lin(l);
}

Expr simplify_mul(const Expr& a, const Expr& b) {
  if (a.is_const() || b.is_const()) {
    int64_t k = a.is_const() ? a.value() : b.value();
    const Expr& other = a.is_const() ? b : a;
    if (k == 0) return Expr(0);
    if (k == 1) return other;
    Lin l;
    l.add(to_lin(other), k);
    return from_lin(l);
  }
  Prod p = to_prod(a);
  Prod q = to_prod(b);
  p.coef *= q.coef;
  p.factors.insert(p.factors.end(), q.factors.begin(), q.factors.end());
  std::sort(p.factors.begin(), p.factors.end(), ExprLess());
  if (p.coef == 1 || p.factors.empty()) return from_prod(p);
  Lin l;  // keep the canonical sum form: coefficient outside the monomial
  l.add(monomial(p.factors), p.coef);
  return from_lin(l);
}

Expr simplify_floordiv(const Expr& a, const Expr& b) {
  if (b.is_const(0)) return Expr::raw(ExprKind::FloorDiv, a, b);
  if (a.is_const() && b.is_const()) return Expr(floor_div(a.value(), b.value()));
  if (b.is_const(1)) return a;
  if (a == b) return Expr(1);
  if (b.is_const() && b.value() > 0) {
    int64_t k = b.value();
    Lin l = to_lin(a), q, r;
    for (auto& [m, c] : l.terms) {
      if (c % k == 0) q.add(m, c / k);
      else r.add(m, c);
    }
    q.c = floor_div(l.c, k);
    r.c = floor_mod(l.c, k);
    Expr rest = from_lin(r);
    if (within(rest, 0, k - 1)) return from_lin(q);
    // gcd of the remainder's coefficients and k cancels: (2x+2)/4 = (x+1)/2
    int64_t g = k;
    for (auto& [m, c] : r.terms) g = std::gcd(g, c);
    g = std::gcd(g, r.c);
    Expr div;
    if (g > 1) {
      Lin rg;
      for (auto& [m, c] : r.terms) rg.add(m, c / g);
      rg.c = r.c / g;
      div = from_lin(rg) / Expr(k / g);
    } else if (rest.kind() == ExprKind::FloorDiv && rest.rhs().is_const() && rest.rhs().value() > 0) {
      div = rest.lhs() / Expr(rest.rhs().value() * k);  // (x/a)/k = x/(a*k)
    } else if (rest.kind() == ExprKind::Mod) {
      // (x % (q*k)) / k = (x / k) % q
      if (auto qq = exact_quotient(rest.rhs(), b); qq && nonneg(*qq) && !qq->is_const(0))
        div = (rest.lhs() / b) % *qq;
      else
        div = Expr::raw(ExprKind::FloorDiv, rest, b);
    } else {
      div = Expr::raw(ExprKind::FloorDiv, rest, b);
    }
    return from_lin(q).is_const(0) ? div : simplify_add(from_lin(q), div);
  }
  if (auto q = exact_quotient(a, b)) return *q;
  // A common constant factor cancels, whatever the signs: (128x) // (128 seq) = x // seq.
  {
    const Lin la = to_lin(a), lb = to_lin(b);
    int64_t g = std::gcd(la.c, lb.c);
    for (const Lin* l : {&la, &lb})
      for (auto& [m, c] : l->terms) g = std::gcd(g, c);
    if (g > 1) {
      Lin ra, rb;
      for (auto& [m, c] : la.terms) ra.add(m, c / g);
      for (auto& [m, c] : lb.terms) rb.add(m, c / g);
      ra.c = la.c / g;
      rb.c = lb.c / g;
      return from_lin(ra) / from_lin(rb);
    }
  }
  ExprRange rb = range_of(b);
  if (rb.lo && *rb.lo >= 1 && nonneg(a)) {
    ExprRange ra = range_of(a);
    if (ra.hi && *ra.hi < *rb.lo) return Expr(0);
  }
  // (x / c) / d = x / (c*d) for divisors known positive (or dims, for which 0 is an error anyway)
  if (a.kind() == ExprKind::FloorDiv && nonneg(a.rhs()) && nonneg(b) && !a.rhs().is_const(0))
    return a.lhs() / (a.rhs() * b);
  return Expr::raw(ExprKind::FloorDiv, a, b);
}

Expr simplify_ceildiv(const Expr& a, const Expr& b) {
  if (b.is_const(0)) return Expr::raw(ExprKind::CeilDiv, a, b);
  if (a.is_const() && b.is_const()) return Expr(-floor_div(-a.value(), b.value()));
  if (b.is_const() && b.value() > 0) return (a + Expr(b.value() - 1)) / b;
  if (a == b) return Expr(1);
  if (auto q = exact_quotient(a, b)) return *q;
  return Expr::raw(ExprKind::CeilDiv, a, b);
}

Expr simplify_mod(const Expr& a, const Expr& b) {
  if (b.is_const(0)) return Expr::raw(ExprKind::Mod, a, b);
  if (a.is_const() && b.is_const()) return Expr(floor_mod(a.value(), b.value()));
  if (b.is_const(1) || b.is_const(-1) || a == b) return Expr(0);
  if (b.is_const() && b.value() > 0) {
    int64_t k = b.value();
    Lin l = to_lin(a), r;
    bool dropped_inner_mod = false;
    for (auto& [m, c] : l.terms) {
      if (c % k == 0) continue;
      // (x % (j*k)) % k = x % k: an inner mod by a multiple of k can go
      if (m.kind() == ExprKind::Mod && exact_quotient(m.rhs(), b)) {
        r.add(to_lin(m.lhs()), c);
        dropped_inner_mod = true;
      } else {
        r.add(m, c);
      }
    }
    r.c += floor_mod(l.c, k);  // += : a dropped inner mod may have contributed a constant
    Expr rest = from_lin(r);
    if (dropped_inner_mod) return rest % b;
    if (within(rest, 0, k - 1)) return rest;
    int64_t g = k;  // (2x) % 4 = 2 * (x % 2)
    for (auto& [m, c] : r.terms) g = std::gcd(g, c);
    g = std::gcd(g, r.c);
    if (g > 1) {
      Lin rg;
      for (auto& [m, c] : r.terms) rg.add(m, c / g);
      rg.c = r.c / g;
      return Expr(g) * (from_lin(rg) % Expr(k / g));
    }
    return Expr::raw(ExprKind::Mod, rest, b);
  }
  if (exact_quotient(a, b)) return Expr(0);
  if (a.kind() == ExprKind::Mod && exact_quotient(a.rhs(), b) && nonneg(b)) return a.lhs() % b;
  ExprRange rb = range_of(b);
  if (rb.lo && *rb.lo >= 1 && nonneg(a)) {
    ExprRange ra = range_of(a);
    if (ra.hi && *ra.hi < *rb.lo) return a;
  }
  return Expr::raw(ExprKind::Mod, a, b);
}

Expr ordered(ExprKind k, const Expr& a, const Expr& b) {
  return Expr::compare(a, b) <= 0 ? Expr::raw(k, a, b) : Expr::raw(k, b, a);
}

Expr simplify_minmax(ExprKind k, const Expr& a, const Expr& b) {
  if (a == b) return a;
  ExprRange d = range_of(simplify_add(a, simplify_mul(Expr(-1), b)));
  bool a_le_b = d.hi && *d.hi <= 0;
  bool a_ge_b = d.lo && *d.lo >= 0;
  if (k == ExprKind::Min) {
    if (a_le_b) return a;
    if (a_ge_b) return b;
  } else {
    if (a_ge_b) return a;
    if (a_le_b) return b;
  }
  return ordered(k, a, b);
}

Expr simplify_compare(ExprKind k, const Expr& a, const Expr& b) {
  ExprRange d = range_of(simplify_add(a, simplify_mul(Expr(-1), b)));
  bool lt_true = d.hi && *d.hi < 0;
  bool lt_false = d.lo && *d.lo >= 0;
  if (lt_true) return Expr(k == ExprKind::Lt ? 1 : 0);
  if (lt_false) return Expr(k == ExprKind::Lt ? 0 : 1);
  return Expr::raw(k, a, b);
}

Expr simplify_logic(ExprKind k, const Expr& a, const Expr& b) {
  bool is_and = k == ExprKind::And;
  auto as_bool = [&](const Expr& x) -> std::optional<Expr> {  // x itself when it is 0/1-valued
    if (within(x, 0, 1)) return x;
    return std::nullopt;
  };
  if (a.is_const() && b.is_const()) {
    bool x = a.value() != 0, y = b.value() != 0;
    return Expr(is_and ? (x && y) : (x || y));
  }
  for (int side = 0; side < 2; ++side) {
    const Expr& c = side == 0 ? a : b;
    const Expr& other = side == 0 ? b : a;
    if (!c.is_const()) continue;
    bool v = c.value() != 0;
    if (is_and && !v) return Expr(0);
    if (!is_and && v) return Expr(1);
    if (auto ob = as_bool(other)) return *ob;  // and(1, x) = x, or(0, x) = x for boolean x
    return ordered(k, Expr(v ? 1 : 0), other);
  }
  if (a == b && as_bool(a)) return a;
  return ordered(k, a, b);
}

Expr simplify_node(ExprKind k, const Expr& a, const Expr& b) {
  switch (k) {
    case ExprKind::Add: return simplify_add(a, b);
    case ExprKind::Mul: return simplify_mul(a, b);
    case ExprKind::FloorDiv: return simplify_floordiv(a, b);
    case ExprKind::CeilDiv: return simplify_ceildiv(a, b);
    case ExprKind::Mod: return simplify_mod(a, b);
    case ExprKind::Min:
    case ExprKind::Max:
      if (a.is_const() && b.is_const())
        return Expr(k == ExprKind::Min ? std::min(a.value(), b.value()) : std::max(a.value(), b.value()));
      return simplify_minmax(k, a, b);
    case ExprKind::Lt:
    case ExprKind::Ge: return simplify_compare(k, a, b);
    case ExprKind::And:
    case ExprKind::Or: return simplify_logic(k, a, b);
    default: break;
  }
  LM_ASSERT(false, "simplify_node on a leaf");
}

thread_local int simplify_depth = 0;

}  // namespace

Expr Expr::simplify() const {
  const ExprNode* n = node();
  if (const ExprNode* s = n->simplified.load(std::memory_order_acquire)) return Expr(s);
  if (kind() == ExprKind::Const || kind() == ExprKind::Var || kind() == ExprKind::Index) return *this;
  if (simplify_depth > 200) return *this;  // guard against a rule cycle; the result stays correct
  ++simplify_depth;
  Expr a = lhs().simplify();
  Expr b = rhs().simplify();
  Expr r = simplify_node(kind(), a, b);
  if (r != Expr::raw(kind(), a, b) && r != *this) r = r.simplify();
  --simplify_depth;
  n->simplified.store(r.node(), std::memory_order_release);
  if (r.node() != n) r.node()->simplified.store(r.node(), std::memory_order_release);
  return r;
}

}  // namespace luminal
