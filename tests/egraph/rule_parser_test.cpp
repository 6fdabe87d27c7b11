// The rule-file language: the built-in files parse, and malformed files fail with file:line and
// what was expected.
#include <gtest/gtest.h>

#include "compiler/compile.h"
#include "core/error.h"

using namespace luminal;

namespace {

std::string parse_error(const std::string& text) {
  OpTable ops;
  RuleFunctions fns;
  try {
    parse_rules(text, "bad.rules", ops, fns);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  std::string msg = parse_error(text);
  EXPECT_NE(msg.find(where), std::string::npos) << "message: " << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg;
}

}  // namespace

TEST(RuleParser, BuiltinRulesParse) {
  OpTable ops;
  RuleFunctions fns;
  RuleFile rf = builtin_rules(ops, fns);
  EXPECT_GE(rf.rulesets.size(), 3u);
  EXPECT_FALSE(rf.schedule.empty());
  size_t rules = 0;
  for (const Ruleset& r : rf.rulesets) rules += r.rules.size();
  EXPECT_GE(rules, 15u);
}

TEST(RuleParser, ParsesPatternsGuardsAndSchedules) {
  OpTable ops;
  RuleFunctions fns;
  RuleFile rf = parse_rules(R"(
# a comment
op MyKernel 2
ruleset a
rule r1: (Mul ?x (View[?v] (Constant[1.5]))) => ?x  if unmasked(?v)
rule r2: (Add ?x ?y) => (MyKernel ?x ?y)
  if same_shape(?x, ?y)
  and is_float(?x)
schedule
  run a 3
  run a saturate
)", "t.rules", ops, fns);
  ASSERT_EQ(rf.rulesets.size(), 1u);
  ASSERT_EQ(rf.rulesets[0].rules.size(), 2u);
  EXPECT_EQ(rf.rulesets[0].rules[1].guards.size(), 2u);
  EXPECT_EQ(rf.rulesets[0].rules[0].lhs.kids[1].kids[0].literal.number, 1.5);
  ASSERT_EQ(rf.schedule.size(), 2u);
  EXPECT_EQ(rf.schedule[0].iterations, 3);
  EXPECT_EQ(rf.schedule[1].iterations, 0);
  EXPECT_TRUE(ops.find("MyKernel").has_value());
  EXPECT_EQ(rf.rulesets[0].rules[0].where, "t.rules:5");
}

TEST(RuleParser, MalformedFilesNameFileLineAndExpectation) {
  expect_error("ruleset a\nrule r: (Mull ?x ?y) => ?x\n", "bad.rules:2", "unknown op 'Mull'");
  expect_error("ruleset a\nrule r: (Add ?x ?y) ?x\n", "bad.rules:2", "expected '=>'");
  expect_error("ruleset a\nrule r: (Add ?x ?y) => ?z\n", "bad.rules:2", "?z is not bound");
  expect_error("ruleset a\nrule r: (Add ?x) => ?x\n", "bad.rules:2", "Add takes 2 inputs, got 1");
  expect_error("ruleset a\nrule r: (Add ?x ?y) => ?x if nonsense(?x)\n", "bad.rules:2", "unknown guard 'nonsense'");
  expect_error("ruleset a\nrule r: (Add ?x ?y) => ?x if unmasked(?x, ?y)\n", "bad.rules:2", "takes 1 arguments");
  expect_error("ruleset a\n\nrule r: (Add ?x ?y => ?x\n", "bad.rules:3", "expected ')'");
  expect_error("rule r: (Add ?x ?y) => ?x\n", "bad.rules:1", "expected 'ruleset NAME'");
  expect_error("ruleset a\nschedule\n  run b 2\n", "bad.rules:3", "unknown ruleset 'b'");
  expect_error("ruleset a\nrule r: (Cast[f64] ?x) => ?x\n", "bad.rules:2", "unknown dtype 'f64'");
  expect_error("ruleset a\nrule r: (View[?v] ?v) => ?v\n", "bad.rules:2", "both as a class and as an attribute");
  expect_error("ruleset a\nrule r: ?x => ?x\n", "bad.rules:2", "must be an op pattern");
  expect_error("ruleset a\nruleset a\n", "bad.rules:2", "declared twice");
  expect_error("ruleset a\nrule r: (Add ?x ?y) => (Constant)\n", "bad.rules:2", "needs an attribute");
  expect_error("ruleset a\nrule r: (Add ?x ?y) => ?x\n@\n", "bad.rules:3", "unexpected character");
  expect_error("frobnicate\n", "bad.rules:1", "expected 'op', 'ruleset', 'rule' or 'schedule'");
}

TEST(RuleParser, MissingFileIsAClearError) {
  OpTable ops;
  RuleFunctions fns;
  EXPECT_THROW(load_rules("/nonexistent/x.rules", ops, fns), Error);
}
