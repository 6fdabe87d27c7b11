#include "compiler/compile.h"

#include <chrono>

#include "compiler/dedup.h"
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

// One graph through e-graph, rules, extraction and search.
static CompileResult compile_one(const Graph& g, const CompileOptions& opts, const RuleFile& rules, OpTable& ops,
                                 const RuleFunctions& fns) {
  EGraph eg(ops);
  Seeded seeded = add_graph(eg, g);
  CompileResult r;
  r.report = run_schedule(eg, rules, fns, opts.limits);
  Choice choice = extract_greedy(eg, opts.cost);
  SearchResult found = search_plans(eg, seeded.roots(), choice, opts.profiler, opts.search, opts.progress);
  r.plan = std::move(found.plan);
  r.search = found.report;
  return r;
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
  CompileResult r;
  std::optional<RepeatedBlocks> rb = opts.dedup ? find_repeated_blocks(g) : std::nullopt;
  if (rb) {
    BlockSplit split = split_blocks(g, *rb);
    CompileResult block = compile_one(split.block, opts, rules, ops, fns);
    CompileResult outer = compile_one(split.outer, opts, rules, ops, fns);
    r.plan = stitch_blocks(g, *rb, block.plan, outer.plan);
    r.report = block.report;  // the block dominates; the outer graph's run is in outer.report
    r.search = block.search;
    r.block_copies = rb->copies;
    r.block_nodes = split.block.size();
  } else {
    CompileResult one = compile_one(g, opts, rules, ops, fns);
    r.plan = std::move(one.plan);
    r.report = one.report;
    r.search = one.search;
  }
  r.graph_nodes = g.topo_order().size();
  r.plan_nodes = r.plan.size();
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace luminal
