#pragma once
// Symbolic integer expressions over named dynamic dims and one index variable.
//
// Expressions are interned: structurally equal expressions share one node, so equality and
// hashing are pointer operations. Nodes are immutable and live for the whole process (like
// interned strings); the intern table is the one process-wide structure, guarded by a mutex.
//
// Semantics (all int64): `/` is floor division and `%` the matching floor modulo (the result
// has the divisor's sign), ceil_div rounds up; comparisons and and/or give 0 or 1. Division or
// modulo by zero is an error at evaluation time. Dims and the index variable are assumed >= 0.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace luminal {

enum class ExprKind : uint8_t {
  Const, Var, Index,                // leaves: a constant, a named dim, the index variable
  Add, Mul, FloorDiv, CeilDiv, Mod,  // arithmetic
  Min, Max, Lt, Ge, And, Or          // selection, comparison, logic
};

const char* expr_kind_name(ExprKind k);
bool is_commutative(ExprKind k);

struct ExprNode;
using DimMap = std::unordered_map<std::string, int64_t>;

class Expr {
 public:
  Expr();                      // the constant 0
  Expr(int64_t v);             // NOLINT: implicit, so `x + 1` reads naturally
  Expr(int v) : Expr(static_cast<int64_t>(v)) {}  // NOLINT
  static Expr var(std::string_view name);  // a dynamic dim; name must be a C identifier
  static Expr index();                     // the index variable (printed as `z`)
  // A node built exactly as given, without simplification (the simplifier's tests need these).
  static Expr raw(ExprKind kind, Expr a, Expr b);

  ExprKind kind() const;
  int64_t value() const;            // Const only
  const std::string& name() const;  // Var only
  Expr lhs() const;                 // binary kinds only
  Expr rhs() const;
  bool is_const() const { return kind() == ExprKind::Const; }
  std::optional<int64_t> as_const() const;
  bool is_const(int64_t v) const { return is_const() && value() == v; }

  bool operator==(const Expr& o) const { return node_ == o.node_; }
  bool operator!=(const Expr& o) const { return node_ != o.node_; }
  // Deterministic across runs (built from structure, not addresses): usable in cache keys.
  uint64_t hash() const;
  // Deterministic total order on structure; used to sort the terms of commutative operations.
  static int compare(const Expr& a, const Expr& b);
  const ExprNode* node() const { return node_; }

  // Value under a binding of dims; throws Error naming any unbound dim or a division by zero.
  int64_t eval(const DimMap& dims, int64_t index = 0) const;
  // Replace dims by expressions (and the index variable, if given); the result is simplified.
  Expr substitute(const std::map<std::string, Expr>& dims) const;
  Expr substitute_index(const Expr& replacement) const;
  Expr simplify() const;
  bool uses_index() const;
  std::vector<std::string> dims() const;  // names of the dims used, sorted

  std::string to_string() const;  // readable: (4*s + z) // 2
  // C / CUDA source: int64 arithmetic with floor semantics. Dims print as their names, the index
  // variable as `index_name`. Needs the helper functions of c_prelude() unless every division is
  // provably on non-negative operands, in which case plain `/` and `%` are emitted.
  std::string to_c(const std::string& index_name = "z") const;
  static std::string c_prelude();
  // A lossless prefix form for files: 5, s, z, (+ a b), (// a b), (min a b), ...
  std::string to_sexpr() const;
  static Expr parse_sexpr(std::string_view text);  // throws Error naming the position

 private:
  explicit Expr(const ExprNode* n) : node_(n) {}
  friend Expr intern_expr(ExprKind, int64_t, std::string_view, const ExprNode*, const ExprNode*);
  const ExprNode* node_;
};

// Builders: these simplify as they build.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);  // floor division
Expr operator%(Expr a, Expr b);  // floor modulo
Expr ceil_div(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr lt(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);

// Product of a list (1 for empty).
Expr product(const std::vector<Expr>& xs);
// True when simplify(a - b) is the constant 0.
bool provably_equal(const Expr& a, const Expr& b);
// Same rank and every dim provably equal.
bool provably_equal(const std::vector<Expr>& a, const std::vector<Expr>& b);

// Integer floor division and the matching modulo (the result has b's sign); b must not be 0.
int64_t floor_div(int64_t a, int64_t b);
inline int64_t floor_mod(int64_t a, int64_t b) { return a - b * floor_div(a, b); }

// Closed integer interval; nullopt ends mean unbounded.
struct ExprRange {
  std::optional<int64_t> lo, hi;
};
ExprRange range_of(const Expr& e);

std::string to_string(const std::vector<Expr>& shape);  // "[s, 4096]"

}  // namespace luminal

template <>
struct std::hash<luminal::Expr> {
  size_t operator()(const luminal::Expr& e) const { return std::hash<const void*>()(e.node()); }
};
