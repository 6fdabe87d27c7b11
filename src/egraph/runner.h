#pragma once
// Runs rulesets over an e-graph: search all rules, apply all matches, rebuild; repeat until
// saturation or a limit. Explosive rules back off (egg's BackoffScheduler).
#include <string>
#include <vector>

#include "egraph/rules.h"

namespace luminal {

struct RunLimits {
  size_t max_nodes = 200000;
  int max_iterations = 30;   // per schedule step that says "saturate"
  double max_seconds = 10.0; // for the whole schedule
  size_t match_limit = 1000; // a rule with more matches in one iteration is banned for a while
  int ban_length = 2;        // iterations; doubles with each ban
};

struct RuleStats {
  std::string rule;
  std::string ruleset;
  size_t matches = 0;   // over all iterations
  size_t applied = 0;   // matches that changed the e-graph
  double search_ms = 0;
  double apply_ms = 0;
  int times_banned = 0;
};

struct RunReport {
  std::vector<RuleStats> rules;
  int iterations = 0;
  std::string stop_reason;  // "saturated", "node limit", "time limit", "iteration limit"
  size_t nodes = 0, classes = 0;
  double seconds = 0;
  std::string to_string() const;  // a table, busiest rules first
};

RunReport run_schedule(EGraph& g, const RuleFile& rules, const RuleFunctions& fns, const RunLimits& limits);
// Runs one ruleset; iterations 0 means until saturated (or max_iterations).
void run_ruleset(EGraph& g, const Ruleset& rs, int iterations, const RuleFunctions& fns, const RunLimits& limits,
                 RunReport& report);

}  // namespace luminal
