#pragma once
// Rewrite rules as data: patterns over ops, named guards and attribute builders written in C++,
// rulesets and a schedule. Parsed from rule files (see rules/*.rules and docs/rules.md).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "egraph/egraph.h"

namespace luminal {

// A bound value: an e-class (for ?x in a child position) or an attribute (in [ ]).
struct Binding {
  bool is_attr = false;
  uint32_t id = 0;  // ClassId or AttrId
};
using Subst = std::vector<Binding>;  // indexed by the rule's variable number

// An argument of a guard or builder call: a variable, a number or a name (dtype, op...).
struct Arg {
  enum Kind { Var, Number, Name } kind = Number;
  int var = -1;
  double number = 0;
  std::string name;
};

struct Call {
  std::string fn;
  std::vector<Arg> args;
};

struct Pattern {
  enum Kind { Var, Node } kind = Node;
  int var = -1;           // Var: the variable number
  OpId op = 0;            // Node
  // Node attribute: none (any), a literal value, a variable,
  // or (in a replacement) a builder call.
  enum AttrKind { AnyAttr, LiteralAttr, VarAttr, CallAttr } attr_kind = AnyAttr;
  Attr literal;
  int attr_var = -1;
  Call call;
  std::vector<Pattern> kids;
};

struct Rule {
  std::string name;
  std::string where;  // file:line, for messages
  Pattern lhs, rhs;
  std::vector<Call> guards;
  std::vector<std::string> var_names;
};

struct Ruleset {
  std::string name;
  std::vector<Rule> rules;
};

struct ScheduleStep {
  std::string ruleset;  // a ruleset, or a native pass when `native`
  int iterations = 1;   // 0: until saturated (or a limit)
  bool native = false;
};

struct RuleFile {
  std::vector<Ruleset> rulesets;
  std::vector<ScheduleStep> schedule;
  const Ruleset& ruleset(const std::string& name) const;  // throws Error listing the names
  void append(RuleFile other);  // its rulesets, and its schedule after this one's
};

// Named C++ predicates and attribute builders that rule files refer to.
struct MatchContext {
  EGraph& g;
  const Subst& subst;
  ClassId root;
};
using GuardFn = std::function<bool(const MatchContext&, const std::vector<Arg>&)>;
using BuilderFn = std::function<std::optional<Attr>(const MatchContext&, const std::vector<Arg>&)>;
// A rewrite written in C++ because patterns cannot express it (fusion builds programs of any
// size); schedules run it by name like a ruleset. Returns how many nodes it added.
using PassFn = std::function<size_t(EGraph&)>;

class RuleFunctions {
 public:
  RuleFunctions();  // the built-in guards and builders (see rule_functions.cpp)
  void add_guard(const std::string& name, int arity, GuardFn fn);
  void add_builder(const std::string& name, int arity, BuilderFn fn);
  void add_pass(const std::string& name, PassFn fn);
  const PassFn* pass(const std::string& name) const;
  const GuardFn* guard(const std::string& name) const;
  const BuilderFn* builder(const std::string& name) const;
  int guard_arity(const std::string& name) const;
  int builder_arity(const std::string& name) const;
  std::string guard_names() const;
  std::string builder_names() const;

 private:
  std::map<std::string, std::pair<int, GuardFn>> guards_;
  std::map<std::string, std::pair<int, BuilderFn>> builders_;
  std::map<std::string, PassFn> passes_;
};

// Parses rule-file text; `file` names it in errors ("file:line: expected ..."). Ops declared
// with `op NAME ARITY` are added to `ops`.
RuleFile parse_rules(const std::string& text, const std::string& file, OpTable& ops, const RuleFunctions& fns);
RuleFile load_rules(const std::string& path, OpTable& ops, const RuleFunctions& fns);
std::string read_rule_file(const std::string& path);  // throws Error naming a missing file

// E-matching: every (substitution, root class) where `rule.lhs` matches and the guards hold.
struct Match {
  Subst subst;
  ClassId root;
};
std::vector<Match> search(EGraph& g, const Rule& rule, const RuleFunctions& fns, size_t limit);
// Instantiates the replacement and merges it with the match root; true if the graph changed.
bool apply(EGraph& g, const Rule& rule, const Match& m, const RuleFunctions& fns);

}  // namespace luminal
