#include "compiler/compile.h"

#include <chrono>

#include "egraph/embedded_rules.h"

namespace luminal {

RuleFile builtin_rules(OpTable& ops, const RuleFunctions& fns) {
  RuleFile all;
  for (const auto& [name, text] : embedded_rule_files()) {
    RuleFile f = parse_rules(text, "rules/" + name, ops, fns);
    all.rulesets.insert(all.rulesets.end(), f.rulesets.begin(), f.rulesets.end());
    all.schedule.insert(all.schedule.end(), f.schedule.begin(), f.schedule.end());
  }
  return all;
}

CompileResult compile(const Graph& g, const CompileOptions& opts) {
  auto start = std::chrono::steady_clock::now();
  OpTable ops;
  RuleFunctions fns;
  RuleFile rules = builtin_rules(ops, fns);
  for (const std::string& path : opts.rule_files) {
    RuleFile f = load_rules(path, ops, fns);
    rules.rulesets.insert(rules.rulesets.end(), f.rulesets.begin(), f.rulesets.end());
    rules.schedule.insert(rules.schedule.end(), f.schedule.begin(), f.schedule.end());
  }
  EGraph eg(ops);
  Seeded seeded = add_graph(eg, g);
  CompileResult r;
  r.report = run_schedule(eg, rules, fns, opts.limits);
  Choice choice = extract_greedy(eg, opts.cost);
  SearchResult found = search_plans(eg, seeded.roots(), choice, opts.profiler, opts.search, opts.progress);
  r.plan = std::move(found.plan);
  r.search = found.report;
  r.graph_nodes = g.topo_order().size();
  r.plan_nodes = r.plan.size();
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace luminal
