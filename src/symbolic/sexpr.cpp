// The prefix (S-expression) form of expressions, used to store plans on disk.
#include <cctype>

#include "core/error.h"
#include "symbolic/expr.h"

namespace luminal {

// Operators print as in to_string (expr_kind_name): "+", "//", "min", "&&", ...
static const char* sexpr_op(ExprKind k) { return expr_kind_name(k); }

std::string Expr::to_sexpr() const {
  switch (kind()) {
    case ExprKind::Const: return std::to_string(value());
    case ExprKind::Var: return name();
    case ExprKind::Index: return "z";
    default: return std::string("(") + sexpr_op(kind()) + " " + lhs().to_sexpr() + " " + rhs().to_sexpr() + ")";
  }
}

namespace {

struct SexprParser {
  std::string_view s;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("expression '" + std::string(s) + "': " + what + " at position " + std::to_string(i));
  }
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  std::string atom() {
    skip();
    size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) && s[i] != '(' && s[i] != ')') ++i;
    if (b == i) fail("expected a term");
    return std::string(s.substr(b, i - b));
  }
  Expr parse() {
    skip();
    if (i >= s.size()) fail("unexpected end");
    if (s[i] != '(') {
      std::string a = atom();
      if (a == "z") return Expr::index();
      if (std::isdigit(static_cast<unsigned char>(a[0])) || a[0] == '-') {
        try {
          size_t used = 0;
          long long v = std::stoll(a, &used);
          if (used == a.size()) return Expr(static_cast<int64_t>(v));
        } catch (...) {
        }
        fail("malformed number '" + a + "'");
      }
      return Expr::var(a);
    }
    ++i;
    std::string op = atom();
    ExprKind kinds[] = {ExprKind::Add, ExprKind::Mul, ExprKind::FloorDiv, ExprKind::CeilDiv, ExprKind::Mod, ExprKind::Min,
                        ExprKind::Max, ExprKind::Lt, ExprKind::Ge, ExprKind::And, ExprKind::Or};
    for (ExprKind k : kinds)
      if (op == sexpr_op(k)) {
        Expr a = parse(), b = parse();
        skip();
        if (i >= s.size() || s[i] != ')') fail("expected ')'");
        ++i;
        return Expr::raw(k, a, b);
      }
    fail("unknown operator '" + op + "'");
  }
};

}  // namespace

Expr Expr::parse_sexpr(std::string_view text) {
  SexprParser p{text};
  Expr e = p.parse();
  p.skip();
  if (p.i != text.size()) p.fail("trailing text");
  return e.simplify();
}

}  // namespace luminal
