#include "symbolic/expr.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_set>

#include "core/error.h"
#include "symbolic/expr_node.h"

namespace luminal {

const char* expr_kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::Const: return "const";
    case ExprKind::Var: return "var";
    case ExprKind::Index: return "index";
    case ExprKind::Add: return "+";
    case ExprKind::Mul: return "*";
    case ExprKind::FloorDiv: return "//";
    case ExprKind::CeilDiv: return "ceildiv";
    case ExprKind::Mod: return "%";
    case ExprKind::Min: return "min";
    case ExprKind::Max: return "max";
    case ExprKind::Lt: return "<";
    case ExprKind::Ge: return ">=";
    case ExprKind::And: return "&&";
    case ExprKind::Or: return "||";
  }
  return "?";
}

bool is_commutative(ExprKind k) {
  return k == ExprKind::Add || k == ExprKind::Mul || k == ExprKind::Min || k == ExprKind::Max ||
         k == ExprKind::And || k == ExprKind::Or;
}

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

uint64_t string_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

struct NodeKeyHash {
  size_t operator()(const ExprNode* n) const { return n->hash; }
};
struct NodeKeyEq {
  bool operator()(const ExprNode* x, const ExprNode* y) const {
    return x->kind == y->kind && x->value == y->value && x->a == y->a && x->b == y->b &&
           x->name == y->name;
  }
};

struct InternTable {
  std::mutex mu;
  std::unordered_set<const ExprNode*, NodeKeyHash, NodeKeyEq> set;
  std::deque<ExprNode> storage;  // stable addresses
};

InternTable& table() {
  static InternTable* t = new InternTable();  // never destroyed: nodes outlive static dtors
  return *t;
}

}  // namespace

Expr intern_expr(ExprKind kind, int64_t value, std::string_view name, const ExprNode* a,
                 const ExprNode* b) {
  ExprNode key;
  key.kind = kind;
  key.value = value;
  key.name = std::string(name);
  key.a = a;
  key.b = b;
  uint64_t h = mix(static_cast<uint64_t>(kind) + 1, static_cast<uint64_t>(value));
  h = mix(h, string_hash(name));
  if (a) h = mix(h, a->hash);
  if (b) h = mix(h, b->hash);
  key.hash = h;
  InternTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.set.find(&key);
  if (it != t.set.end()) return Expr(*it);
  ExprNode& n = t.storage.emplace_back();
  n.kind = kind;
  n.value = value;
  n.name = std::move(key.name);
  n.a = a;
  n.b = b;
  n.hash = h;
  n.has_index = kind == ExprKind::Index || (a && a->has_index) || (b && b->has_index);
  t.set.insert(&n);
  return Expr(&n);
}

Expr::Expr() : Expr(int64_t{0}) {}
Expr::Expr(int64_t v) : node_(intern_expr(ExprKind::Const, v, "", nullptr, nullptr).node_) {}

Expr Expr::var(std::string_view name) {
  bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  static const char* reserved[] = {"z", "int", "long", "char", "float", "double", "short", "unsigned", "signed",
                                   "void", "if", "else", "for", "while", "do", "return", "const", "static",
                                   "struct", "union", "enum", "switch", "case", "default", "break", "continue",
                                   "goto", "sizeof", "auto", "register", "extern", "volatile", "inline", "bool"};
  for (const char* r : reserved) ok = ok && name != r;
  if (!ok || name.substr(0, 3) == "lm_")
    throw Error("invalid dim name '" + std::string(name) +
                "': use a C identifier (letters, digits, _) that is not a C keyword, does not start with lm_, "
                "and is not 'z' (the index variable)");
  return intern_expr(ExprKind::Var, 0, name, nullptr, nullptr);
}

Expr Expr::index() { return intern_expr(ExprKind::Index, 0, "", nullptr, nullptr); }

Expr Expr::raw(ExprKind kind, Expr a, Expr b) {
  LM_ASSERT(kind != ExprKind::Const && kind != ExprKind::Var && kind != ExprKind::Index,
            "raw() builds binary nodes only");
  return intern_expr(kind, 0, "", a.node_, b.node_);
}

ExprKind Expr::kind() const { return node_->kind; }
int64_t Expr::value() const {
  LM_ASSERT(node_->kind == ExprKind::Const, "value() of a non-constant");
  return node_->value;
}
const std::string& Expr::name() const { return node_->name; }
Expr Expr::lhs() const { LM_ASSERT(node_->a, "lhs() of a leaf"); return Expr(node_->a); }
Expr Expr::rhs() const { LM_ASSERT(node_->b, "rhs() of a leaf"); return Expr(node_->b); }
std::optional<int64_t> Expr::as_const() const {
  if (is_const()) return node_->value;
  return std::nullopt;
}
uint64_t Expr::hash() const { return node_->hash; }
bool Expr::uses_index() const { return node_->has_index; }

int Expr::compare(const Expr& x, const Expr& y) {
  if (x.node_ == y.node_) return 0;
  const ExprNode* a = x.node_;
  const ExprNode* b = y.node_;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  switch (a->kind) {
    case ExprKind::Const: return a->value < b->value ? -1 : 1;
    case ExprKind::Var: return a->name < b->name ? -1 : 1;
    case ExprKind::Index: return 0;
    default: {
      int c = compare(Expr(a->a), Expr(b->a));
      return c != 0 ? c : compare(Expr(a->b), Expr(b->b));
    }
  }
}

int64_t Expr::eval(const DimMap& dims, int64_t index) const {
  const ExprNode* n = node_;
  switch (n->kind) {
    case ExprKind::Const: return n->value;
    case ExprKind::Index: return index;
    case ExprKind::Var: {
      auto it = dims.find(n->name);
      if (it == dims.end())
        throw Error("dynamic dim '" + n->name + "' is not bound: bind it before running (e.g. set_dim(\"" +
                    n->name + "\", value))");
      return it->second;
    }
    default: break;
  }
  // No short-circuit: every subterm is evaluated, so an expression's value (or its division-by-
  // zero error) does not depend on the order of commutative operands.
  int64_t a = lhs().eval(dims, index);
  int64_t b = rhs().eval(dims, index);
  switch (n->kind) {
    case ExprKind::Add: return a + b;
    case ExprKind::Mul: return a * b;
    case ExprKind::FloorDiv:
    case ExprKind::CeilDiv:
    case ExprKind::Mod:
      if (b == 0) throw Error("division by zero in symbolic expression " + to_string());
      if (n->kind == ExprKind::FloorDiv) return floor_div(a, b);
      if (n->kind == ExprKind::CeilDiv) return -floor_div(-a, b);
      return floor_mod(a, b);
    case ExprKind::Min: return std::min(a, b);
    case ExprKind::Max: return std::max(a, b);
    case ExprKind::Lt: return a < b ? 1 : 0;
    case ExprKind::Ge: return a >= b ? 1 : 0;
    case ExprKind::And: return (a != 0 && b != 0) ? 1 : 0;
    case ExprKind::Or: return (a != 0 || b != 0) ? 1 : 0;
    default: break;
  }
  LM_ASSERT(false, "unhandled expression kind");
}

static Expr rebuild(const Expr& e, const std::function<std::optional<Expr>(const Expr&)>& leaf) {
  if (auto r = leaf(e)) return *r;
  if (e.kind() == ExprKind::Const || e.kind() == ExprKind::Var || e.kind() == ExprKind::Index) return e;
  Expr a = rebuild(e.lhs(), leaf);
  Expr b = rebuild(e.rhs(), leaf);
  if (a == e.lhs() && b == e.rhs()) return e;
  return Expr::raw(e.kind(), a, b);
}

Expr Expr::substitute(const std::map<std::string, Expr>& dims) const {
  return rebuild(*this, [&](const Expr& e) -> std::optional<Expr> {
           if (e.kind() != ExprKind::Var) return std::nullopt;
           auto it = dims.find(e.name());
           if (it == dims.end()) return std::nullopt;
           return it->second;
         }).simplify();
}

Expr Expr::substitute_index(const Expr& replacement) const {
  if (!uses_index()) return *this;
  return rebuild(*this, [&](const Expr& e) -> std::optional<Expr> {
           if (e.kind() != ExprKind::Index) return std::nullopt;
           return replacement;
         }).simplify();
}

std::vector<std::string> Expr::dims() const {
  std::set<std::string> names;
  std::function<void(const ExprNode*)> walk = [&](const ExprNode* n) {
    if (n->kind == ExprKind::Var) names.insert(n->name);
    if (n->a) walk(n->a);
    if (n->b) walk(n->b);
  };
  walk(node_);
  return {names.begin(), names.end()};
}

static Expr build(ExprKind k, Expr a, Expr b) { return Expr::raw(k, a, b).simplify(); }
Expr operator+(Expr a, Expr b) { return build(ExprKind::Add, a, b); }
Expr operator-(Expr a, Expr b) { return build(ExprKind::Add, a, build(ExprKind::Mul, Expr(-1), b)); }
Expr operator-(Expr a) { return build(ExprKind::Mul, Expr(-1), a); }
Expr operator*(Expr a, Expr b) { return build(ExprKind::Mul, a, b); }
Expr operator/(Expr a, Expr b) { return build(ExprKind::FloorDiv, a, b); }
Expr operator%(Expr a, Expr b) { return build(ExprKind::Mod, a, b); }
Expr ceil_div(Expr a, Expr b) { return build(ExprKind::CeilDiv, a, b); }
Expr min(Expr a, Expr b) { return build(ExprKind::Min, a, b); }
Expr max(Expr a, Expr b) { return build(ExprKind::Max, a, b); }
Expr lt(Expr a, Expr b) { return build(ExprKind::Lt, a, b); }
Expr ge(Expr a, Expr b) { return build(ExprKind::Ge, a, b); }
Expr logical_and(Expr a, Expr b) { return build(ExprKind::And, a, b); }
Expr logical_or(Expr a, Expr b) { return build(ExprKind::Or, a, b); }

Expr product(const std::vector<Expr>& xs) {
  Expr p = 1;
  for (const Expr& x : xs) p = p * x;
  return p;
}

bool provably_equal(const Expr& a, const Expr& b) { return a == b || (a - b).is_const(0); }

bool provably_equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!provably_equal(a[i], b[i])) return false;
  return true;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::string to_string(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].to_string();
  return s + "]";
}

}  // namespace luminal
