#include "compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>

#include "compiler/cse.h"
#include "compiler/dedup.h"
#include "compiler/plan_cache.h"
#include "core/error.h"
#include "graph/serialize.h"
#include "egraph/dag_improve.h"
#include "egraph/embedded_rules.h"

namespace luminal {

namespace {

struct RuleSource {
  std::string name, text;
};

// The built-in rule files, then the extra ones (each file read once: it feeds both the cache
// key and the parser).
std::vector<RuleSource> rule_sources(const std::vector<std::string>& extra) {
  std::vector<RuleSource> r;
  for (const auto& [name, text] : embedded_rule_files()) r.push_back({"rules/" + name, text});
  for (const std::string& path : extra) r.push_back({path, read_rule_file(path)});
  return r;
}

RuleFile parse_all(const std::vector<RuleSource>& sources, OpTable& ops, const RuleFunctions& fns) {
  RuleFile all;
  for (const RuleSource& s : sources) all.append(parse_rules(s.text, s.name, ops, fns));
  return all;
}

// The options' disabled rules and LUMINAL_DISABLE_RULES's, sorted (they are part of the cache key).
std::vector<std::string> disabled_rules(const CompileOptions& o) {
  std::vector<std::string> names = o.disabled_rules;
  if (const char* env = std::getenv("LUMINAL_DISABLE_RULES")) {
    std::string list = env;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) names.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// Removes the named rules from every ruleset; a name no ruleset has is an error that lists them.
void drop_rules(RuleFile& rules, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    size_t dropped = 0;
    for (Ruleset& set : rules.rulesets) dropped += std::erase_if(set.rules, [&](const Rule& rule) { return rule.name == name; });
    if (dropped > 0) continue;
    std::string known;
    for (const Ruleset& set : rules.rulesets)
      for (const Rule& rule : set.rules) known += (known.empty() ? "" : ", ") + rule.name;
    throw Error("cannot disable rule '" + name + "' (LUMINAL_DISABLE_RULES or CompileOptions::disabled_rules): no rule has that name; the rules are " + known);
  }
}

}  // namespace

RuleFile builtin_rules(OpTable& ops, const RuleFunctions& fns) { return parse_all(rule_sources({}), ops, fns); }

// One graph through e-graph, rules, extraction and search.
static CompileResult compile_one(const Graph& g, const CompileOptions& opts, const RuleFile& rules, OpTable& ops,
                                 const RuleFunctions& fns, const std::string& part) {
  EGraph eg(ops);
  Seeded seeded = add_graph(eg, g);
  CompileResult r;
  r.report = run_schedule(eg, rules, fns, opts.limits);
  if (opts.on_egraph) opts.on_egraph(eg, part);
  Choice choice = extract_greedy(eg, opts.cost);
  improve_dag_cost(eg, choice, seeded.roots(), opts.cost);
  SearchResult found = search_plans(eg, seeded.roots(), choice, opts.profiler, opts.search, opts.progress,
                                    opts.prepare_candidates, &opts.cost);
  r.plan = std::move(found.plan);
  r.search = found.report;
  return r;
}

// Everything that decides the plan, as text: the graph, the rules, the options, the target.
// The passes' code is not in it: a change to fusion, extraction or the cost model that changes
// plans must bump the version (v3: ScaledMatmul's cost, reductions' lone epilogues).
static std::string cache_text(const Graph& g, const CompileOptions& o, const std::vector<RuleSource>& rules) {
  std::string t = "luminal-plan-v3\n" + serialize(g);
  for (const RuleSource& r : rules) t += r.name + "\n" + r.text;
  const SearchOptions& s = o.search;
  t += "search " + std::to_string(s.limit) + " " + std::to_string(s.generation_size) + " " +
       std::to_string(s.mutations) + " " + std::to_string(s.trials) + " " + std::to_string(s.keep_best) + " " +
       std::to_string(s.seed);
  std::map<std::string, int64_t> dims(s.profile_dims.begin(), s.profile_dims.end());
  for (auto& [k, v] : dims) t += " " + k + "=" + std::to_string(v);
  t += "\nlimits " + std::to_string(o.limits.max_nodes) + " " + std::to_string(o.limits.max_iterations) + " " +
       std::to_string(o.limits.match_limit) + " " + std::to_string(o.limits.ban_length);
  t += "\ndedup " + std::to_string(o.dedup) + "\nbackend " + o.backend + "\ndevice " + o.device + "\n";
  for (const std::string& name : disabled_rules(o)) t += "disabled " + name + "\n";
  return t;
}

CompileResult compile(const Graph& g, const CompileOptions& opts) {
  auto start = std::chrono::steady_clock::now();
  std::vector<RuleSource> sources = rule_sources(opts.rule_files);
  CompileResult r;
  if (!opts.cache_dir.empty()) {
    r.cache_key = hash_key(cache_text(g, opts, sources));
    if (std::optional<Graph> cached = PlanCache(opts.cache_dir).load(r.cache_key)) {
      r.plan = std::move(*cached);
      r.cache_hit = true;
      r.graph_nodes = g.topo_order().size();
      r.plan_nodes = r.plan.size();
      r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      return r;
    }
  }
  OpTable ops;  // parsing rules is only needed on a cache miss
  RuleFunctions fns;
  RuleFile rules = parse_all(sources, ops, fns);
  drop_rules(rules, disabled_rules(opts));
  std::optional<RepeatedBlocks> rb = opts.dedup ? find_repeated_blocks(g) : std::nullopt;
  if (rb) {
    BlockSplit split = split_blocks(g, *rb);
    // The search's candidate limit is for the whole compile: two thirds go to the block, which
    // runs once per copy, the rest to the graph around it.
    CompileOptions block_opts = opts, outer_opts = opts;
    block_opts.search.limit = opts.search.limit - opts.search.limit / 3;
    outer_opts.search.limit = opts.search.limit / 3;
    CompileResult block = compile_one(split.block, block_opts, rules, ops, fns, "block");
    CompileResult outer = compile_one(split.outer, outer_opts, rules, ops, fns, "outer");
    r.plan = stitch_blocks(g, *rb, block.plan, outer.plan);
    r.report = block.report;  // the block dominates; the outer graph's run is in outer.report
    r.search = block.search;
    r.outer_search = outer.search;
    r.block_copies = rb->copies;
    r.block_nodes = split.block.size();
  } else {
    CompileResult one = compile_one(g, opts, rules, ops, fns, "graph");
    r.plan = std::move(one.plan);
    r.report = one.report;
    r.search = one.search;
  }
  // Stitched layers each carry a copy of the work that does not depend on the layer.
  r.plan = merge_common_subexpressions(r.plan);
  r.graph_nodes = g.topo_order().size();
  r.plan_nodes = r.plan.size();
  if (!opts.cache_dir.empty()) PlanCache(opts.cache_dir).store(r.cache_key, r.plan);
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace luminal
