#pragma once
// The compiler's front door: HLIR graph -> e-graph -> rule schedule -> extraction -> plan.
#include <string>
#include <vector>

#include "egraph/extract.h"
#include "egraph/runner.h"
#include "search/search.h"

namespace luminal {

struct CompileOptions {
  RunLimits limits;
  CostModel cost;
  std::vector<std::string> rule_files;  // extra rule files on disk, after the built-in ones
  // Rules left out by name, for measuring what one is worth (an unknown name is an error). Also
  // LUMINAL_DISABLE_RULES=name,name (added to these).
  std::vector<std::string> disabled_rules;
  SearchOptions search{.limit = 0};      // limit 0: take the cost model's plan, no profiling
  Profiler profiler = profile_on_interpreter;
  PrepareCandidates prepare_candidates;  // optional batch step before a generation is profiled
  std::function<void(const SearchReport&)> progress;  // called after each search generation
  bool dedup = true;  // compile repeated blocks once (see compiler/dedup.h)
  // Called with each saturated e-graph (the block template's, then the outer graph's, or the
  // whole graph's), e.g. to dump it.
  std::function<void(const EGraph&, const std::string& part)> on_egraph;
  std::string cache_dir;  // plan cache folder (compiler/plan_cache.h); empty: no caching
  std::string backend = "reference";  // part of the cache key, with the device
  std::string device = "cpu";
};

struct CompileResult {
  Graph plan;  // today a graph of HLIR primitives; kernel ops arrive with the backends
  RunReport report;
  SearchReport search;        // the block template's search with dedup, else the whole graph's
  SearchReport outer_search;  // with dedup: the search of the graph around the blocks
  size_t graph_nodes = 0, plan_nodes = 0;
  size_t block_copies = 0, block_nodes = 0;  // layer dedup: copies found, nodes per copy
  double compile_ms = 0;
  bool cache_hit = false;
  std::string cache_key;
};

// The built-in rules plus `extra` files, parsed into one OpTable.
RuleFile builtin_rules(OpTable& ops, const RuleFunctions& fns);

CompileResult compile(const Graph& g, const CompileOptions& opts = {});

}  // namespace luminal
