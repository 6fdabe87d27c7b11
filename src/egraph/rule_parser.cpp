// The rule-file language:
//
//   # comment
//   op NAME ARITY                         declare a kernel op
//   ruleset NAME                          following rules belong to it
//   rule NAME: LHS => RHS [if GUARD(args) [and GUARD(args)]...]
//   schedule                              then lines: run RULESET [ITERATIONS | saturate]
//
// Patterns: ?x (binds an e-class) or (OP[ATTR] child...), where ATTR is a number, a dtype or
// op name, a "string", a variable ?a (binds the attribute), or in a replacement a builder call
// fn(args). Every error names file:line and what was expected.
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "egraph/rules.h"

namespace luminal {
namespace {

struct Token {
  enum Kind { Punct, Name, Var, Number, String, End } kind;
  std::string text;
  double number = 0;
  int line = 0;
};

std::vector<Token> tokenize(const std::string& src, const std::string& file) {
  std::vector<Token> out;
  int line = 1;
  size_t i = 0;
  auto fail = [&](const std::string& msg) { throw Error(file + ":" + std::to_string(line) + ": " + msg); };
  while (i < src.size()) {
    char c = src[i];
    if (c == '\n') { ++line; ++i; continue; }
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (c == '#') { while (i < src.size() && src[i] != '\n') ++i; continue; }
    if (c == '=' && i + 1 < src.size() && src[i + 1] == '>') { out.push_back({Token::Punct, "=>", 0, line}); i += 2; continue; }
    if (std::string("()[],:").find(c) != std::string::npos) { out.push_back({Token::Punct, std::string(1, c), 0, line}); ++i; continue; }
    if (c == '"') {
      size_t j = src.find('"', i + 1);
      if (j == std::string::npos || src.find('\n', i) < j) fail("unterminated string");
      out.push_back({Token::String, src.substr(i + 1, j - i - 1), 0, line});
      i = j + 1;
      continue;
    }
    auto ident = [&](size_t from) {
      size_t j = from;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_' || src[j] == '-')) ++j;
      return j;
    };
    if (c == '?') {
      size_t j = ident(i + 1);
      if (j == i + 1) fail("expected a variable name after '?'");
      out.push_back({Token::Var, src.substr(i + 1, j - i - 1), 0, line});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '+' || c == '.') && i + 1 < src.size() &&
                                                        (std::isdigit(static_cast<unsigned char>(src[i + 1])) || src[i + 1] == 'i'))) {
      size_t used = 0;
      std::string rest = src.substr(i, 64);
      double v;
      try { v = std::stod(rest, &used); } catch (...) { fail("malformed number"); }
      out.push_back({Token::Number, rest.substr(0, used), v, line});
      i += used;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = ident(i);
      out.push_back({Token::Name, src.substr(i, j - i), 0, line});
      i = j;
      continue;
    }
    fail(std::string("unexpected character '") + c + "'");
  }
  out.push_back({Token::End, "end of file", 0, line});
  return out;
}

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string file, OpTable& ops, const RuleFunctions& fns)
      : t_(std::move(toks)), file_(std::move(file)), ops_(ops), fns_(fns) {}

  RuleFile parse() {
    RuleFile rf;
    while (peek().kind != Token::End) {
      Token k = next();
      if (k.kind != Token::Name) fail(k, "expected 'op', 'ruleset', 'rule' or 'schedule'");
      if (k.text == "op") {
        std::string name = expect_name("an op name");
        Token n = next();
        if (n.kind != Token::Number || n.number < 0 || n.number != static_cast<int>(n.number))
          fail(n, "expected the op's input count");
        try { ops_.add(name, static_cast<int>(n.number)); } catch (const Error& e) { fail(n, e.what()); }
      } else if (k.text == "ruleset") {
        std::string name = expect_name("a ruleset name");
        for (const Ruleset& r : rf.rulesets)
          if (r.name == name) fail(k, "ruleset '" + name + "' is declared twice");
        rf.rulesets.push_back({name, {}});
      } else if (k.text == "rule") {
        if (rf.rulesets.empty()) fail(k, "expected 'ruleset NAME' before the first rule");
        rf.rulesets.back().rules.push_back(rule(k));
      } else if (k.text == "schedule") {
        while (peek().kind == Token::Name && peek().text == "run") {
          next();
          Token name = next();
          if (name.kind != Token::Name) fail(name, "expected a ruleset name after 'run'");
          bool known = false;
          for (const Ruleset& r : rf.rulesets) known = known || r.name == name.text;
          bool native = !known && fns_.pass(name.text);
          if (!known && !native) fail(name, "unknown ruleset '" + name.text + "' (and no native pass of that name)");
          ScheduleStep step{name.text, 1, native};
          if (peek().kind == Token::Number) step.iterations = static_cast<int>(next().number);
          else if (peek().kind == Token::Name && peek().text == "saturate") { next(); step.iterations = 0; }
          rf.schedule.push_back(step);
        }
      } else {
        fail(k, "expected 'op', 'ruleset', 'rule' or 'schedule', got '" + k.text + "'");
      }
    }
    return rf;
  }

 private:
  const Token& peek() const { return t_[pos_]; }
  Token next() { return t_[pos_ < t_.size() - 1 ? pos_++ : pos_]; }
  [[noreturn]] void fail(const Token& at, const std::string& msg) const {
    throw Error(file_ + ":" + std::to_string(at.line) + ": " + msg);
  }
  void expect(const std::string& punct, const std::string& what) {
    Token t = next();
    if (t.kind != Token::Punct || t.text != punct) fail(t, "expected " + what + ", got '" + t.text + "'");
  }
  std::string expect_name(const std::string& what) {
    Token t = next();
    if (t.kind != Token::Name) fail(t, "expected " + what + ", got '" + t.text + "'");
    return t.text;
  }

  int var_id(const std::string& name) {
    for (size_t i = 0; i < rule_->var_names.size(); ++i)
      if (rule_->var_names[i] == name) return static_cast<int>(i);
    rule_->var_names.push_back(name);
    kinds_.push_back(-1);
    return static_cast<int>(rule_->var_names.size() - 1);
  }

  // A variable is either a class or an attribute, never both.
  void use_var(int v, bool attr, const Token& at, bool binding) {
    int want = attr ? 1 : 0;
    if (kinds_[v] == -1) {
      if (!binding) fail(at, "variable ?" + rule_->var_names[v] + " is not bound by the left-hand side");
      kinds_[v] = want;
    } else if (kinds_[v] != want) {
      fail(at, "variable ?" + rule_->var_names[v] + " is used both as a class and as an attribute");
    }
  }

  Arg arg(bool binding) {
    Token t = next();
    Arg a;
    if (t.kind == Token::Var) {
      a.kind = Arg::Var;
      a.var = var_id(t.text);
      if (kinds_[a.var] == -1 && !binding) fail(t, "variable ?" + t.text + " is not bound by the left-hand side");
    } else if (t.kind == Token::Number) {
      a.kind = Arg::Number;
      a.number = t.number;
    } else if (t.kind == Token::Name || t.kind == Token::String) {
      a.kind = Arg::Name;
      a.name = t.text;
    } else {
      fail(t, "expected an argument (?var, number or name), got '" + t.text + "'");
    }
    return a;
  }

  Call call(const std::string& fn, bool guard, const Token& at) {
    int arity = guard ? fns_.guard_arity(fn) : fns_.builder_arity(fn);
    if (arity == -2)
      fail(at, std::string("unknown ") + (guard ? "guard '" : "builder '") + fn + "'; known: " +
                   (guard ? fns_.guard_names() : fns_.builder_names()));
    Call c{fn, {}};
    expect("(", "'(' after " + fn);
    if (!(peek().kind == Token::Punct && peek().text == ")")) {
      c.args.push_back(arg(false));
      while (peek().kind == Token::Punct && peek().text == ",") {
        next();
        c.args.push_back(arg(false));
      }
    }
    expect(")", "')' closing the arguments of " + fn);
    if (arity >= 0 && static_cast<int>(c.args.size()) != arity)
      fail(at, fn + " takes " + std::to_string(arity) + " arguments, got " + std::to_string(c.args.size()));
    return c;
  }

  Attr literal(OpId op, const Token& t) {
    const OpInfo& info = ops_.info(op);
    Attr a;
    if (info.primitive && info.kind == OpKind::Constant && t.kind == Token::Number) {
      a.number = static_cast<float>(t.number);  // Constant holds an f32
    } else if (info.primitive && (info.kind == OpKind::SumReduce || info.kind == OpKind::MaxReduce) && t.kind == Token::Number) {
      a.axis = static_cast<int64_t>(t.number);
    } else if (info.primitive && info.kind == OpKind::Cast && t.kind == Token::Name) {
      try { a.dtype = dtype_from_name(t.text); } catch (const Error& e) { fail(t, e.what()); }
    } else if (t.kind == Token::String) {
      a.name = t.text;
    } else {
      fail(t, "'" + t.text + "' is not a valid attribute for " + info.name);
    }
    return a;
  }

  Pattern pattern(bool lhs) {
    Token t = next();
    Pattern p;
    if (t.kind == Token::Var) {
      p.kind = Pattern::Var;
      p.var = var_id(t.text);
      use_var(p.var, false, t, lhs);
      return p;
    }
    if (t.kind != Token::Punct || t.text != "(") fail(t, "expected '(' or ?var to start a pattern, got '" + t.text + "'");
    Token op = next();
    if (op.kind != Token::Name) fail(op, "expected an op name after '('");
    auto id = ops_.find(op.text);
    if (!id) fail(op, "unknown op '" + op.text + "'; known ops: " + ops_.names() + " (declare kernels with 'op NAME ARITY')");
    p.op = *id;
    if (peek().kind == Token::Punct && peek().text == "[") {
      next();
      Token a = next();
      if (a.kind == Token::Var) {
        p.attr_kind = Pattern::VarAttr;
        p.attr_var = var_id(a.text);
        use_var(p.attr_var, true, a, lhs);
      } else if (!lhs && a.kind == Token::Name && peek().kind == Token::Punct && peek().text == "(") {
        p.attr_kind = Pattern::CallAttr;
        p.call = call(a.text, false, a);
      } else {
        p.attr_kind = Pattern::LiteralAttr;
        p.literal = literal(p.op, a);
      }
      expect("]", "']' closing the attribute");
    } else if (!lhs && ops_.info(p.op).primitive && ops_.info(p.op).arity == 0 && p.op != ops_.primitive(OpKind::Output)) {
      fail(op, "a " + op.text + " in a replacement needs an attribute in [ ]");
    }
    while (!(peek().kind == Token::Punct && peek().text == ")")) {
      if (peek().kind == Token::End || (peek().kind == Token::Punct && peek().text != "("))
        fail(peek(), "expected ')' closing (" + op.text + ", got '" + peek().text + "'");
      p.kids.push_back(pattern(lhs));
    }
    next();
    int arity = ops_.info(p.op).arity;
    if (arity >= 0 && static_cast<int>(p.kids.size()) != arity)
      fail(op, op.text + " takes " + std::to_string(arity) + " inputs, got " + std::to_string(p.kids.size()));
    return p;
  }

  Rule rule(const Token& kw) {
    Rule r;
    rule_ = &r;
    kinds_.clear();
    r.name = expect_name("a rule name");
    r.where = file_ + ":" + std::to_string(kw.line);
    expect(":", "':' after the rule name");
    r.lhs = pattern(true);
    if (r.lhs.kind == Pattern::Var) fail(kw, "the left-hand side must be an op pattern, not a bare variable");
    expect("=>", "'=>' between the pattern and its replacement");
    r.rhs = pattern(false);
    if (peek().kind == Token::Name && peek().text == "if") {
      next();
      do {
        Token g = next();
        if (g.kind != Token::Name) fail(g, "expected a guard name after 'if'/'and'");
        r.guards.push_back(call(g.text, true, g));
      } while (peek().kind == Token::Name && peek().text == "and" && (next(), true));
    }
    rule_ = nullptr;
    return r;
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  std::string file_;
  OpTable& ops_;
  const RuleFunctions& fns_;
  Rule* rule_ = nullptr;
  std::vector<int> kinds_;  // per variable: -1 unbound, 0 class, 1 attribute
};

}  // namespace

const Ruleset& RuleFile::ruleset(const std::string& name) const {
  std::string all;
  for (const Ruleset& r : rulesets) {
    if (r.name == name) return r;
    all += (all.empty() ? "" : ", ") + r.name;
  }
  throw Error("no ruleset named '" + name + "'; the rule files define: " + all);
}

RuleFile parse_rules(const std::string& text, const std::string& file, OpTable& ops, const RuleFunctions& fns) {
  return Parser(tokenize(text, file), file, ops, fns).parse();
}

void RuleFile::append(RuleFile other) {
  rulesets.insert(rulesets.end(), other.rulesets.begin(), other.rulesets.end());
  schedule.insert(schedule.end(), other.schedule.begin(), other.schedule.end());
}

std::string read_rule_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open rule file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RuleFile load_rules(const std::string& path, OpTable& ops, const RuleFunctions& fns) {
  return parse_rules(read_rule_file(path), path, ops, fns);
}

}  // namespace luminal
