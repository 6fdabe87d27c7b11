#include "egraph/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "core/error.h"

namespace luminal {

using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void run_ruleset(EGraph& g, const Ruleset& rs, int iterations, const RuleFunctions& fns, const RunLimits& limits,
                 RunReport& report) {
  auto start = Clock::now();
  double budget_ms = limits.max_seconds * 1000.0 - report.seconds * 1000.0;
  // One stats row per rule, shared across schedule steps that run the same ruleset. Rows are
  // all added before pointers are taken, since adding may reallocate.
  auto row = [&](const Rule& r) {
    return std::find_if(report.rules.begin(), report.rules.end(),
                        [&](const RuleStats& s) { return s.rule == r.name && s.ruleset == rs.name; });
  };
  for (const Rule& r : rs.rules)
    if (row(r) == report.rules.end()) report.rules.push_back({r.name, rs.name});
  std::vector<RuleStats*> stats;
  for (const Rule& r : rs.rules) stats.push_back(&*row(r));

  std::vector<int> banned_until(rs.rules.size(), 0);
  int max_iter = iterations > 0 ? iterations : limits.max_iterations;
  g.rebuild();
  for (int iter = 0; iter < max_iter; ++iter) {
    uint64_t before = g.version();
    bool any_banned = false;
    std::vector<std::vector<Match>> found(rs.rules.size());
    for (size_t i = 0; i < rs.rules.size(); ++i) {
      if (iter < banned_until[i]) {
        any_banned = true;
        continue;
      }
      size_t threshold = limits.match_limit << stats[i]->times_banned;
      auto t = Clock::now();
      found[i] = search(g, rs.rules[i], fns, threshold + 1);
      stats[i]->search_ms += ms_since(t);
      if (found[i].size() > threshold) {  // explosive: skip this round and back off
        banned_until[i] = iter + (limits.ban_length << stats[i]->times_banned);
        stats[i]->times_banned++;
        found[i].clear();
        any_banned = true;
      }
      stats[i]->matches += found[i].size();
    }
    for (size_t i = 0; i < rs.rules.size(); ++i) {
      auto t = Clock::now();
      for (const Match& m : found[i]) {
        if (apply(g, rs.rules[i], m, fns)) stats[i]->applied++;
        if (g.node_count() > limits.max_nodes) break;
      }
      stats[i]->apply_ms += ms_since(t);
    }
    g.rebuild();
    report.iterations++;
    if (g.node_count() > limits.max_nodes) { report.stop_reason = "node limit"; break; }
    if (ms_since(start) > budget_ms) { report.stop_reason = "time limit"; break; }
    if (g.version() == before && !any_banned) { report.stop_reason = "saturated"; break; }
    if (iter + 1 == max_iter) report.stop_reason = iterations > 0 ? "iterations done" : "iteration limit";
  }
  report.seconds += ms_since(start) / 1000.0;
  report.nodes = g.node_count();
  report.classes = g.class_count();
}

RunReport run_schedule(EGraph& g, const RuleFile& rules, const RuleFunctions& fns, const RunLimits& limits) {
  RunReport report;
  if (rules.schedule.empty()) {
    for (const Ruleset& rs : rules.rulesets) run_ruleset(g, rs, 0, fns, limits, report);
  } else {
    for (const ScheduleStep& step : rules.schedule) {
      if (step.native) {
        auto t = Clock::now();
        size_t added = (*fns.pass(step.ruleset))(g);
        g.rebuild();
        report.rules.push_back({step.ruleset, "(native)", added, added, ms_since(t), 0, 0});
        report.seconds += ms_since(t) / 1000;
        report.nodes = g.node_count();
        report.classes = g.class_count();
        continue;
      }
      run_ruleset(g, rules.ruleset(step.ruleset), step.iterations, fns, limits, report);
    }
  }
  return report;
}

std::string RunReport::to_string() const {
  std::vector<RuleStats> sorted = rules;
  std::sort(sorted.begin(), sorted.end(), [](const RuleStats& a, const RuleStats& b) {
    return a.search_ms + a.apply_ms > b.search_ms + b.apply_ms;
  });
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "e-graph: %zu nodes, %zu classes after %d iterations (%s) in %.1f ms\n", nodes,
                classes, iterations, stop_reason.c_str(), seconds * 1000);
  s += line;
  std::snprintf(line, sizeof line, "  %-14s %-28s %9s %9s %10s %10s %6s\n", "ruleset", "rule", "matches", "applied",
                "search ms", "apply ms", "bans");
  s += line;
  for (const RuleStats& r : sorted) {
    std::snprintf(line, sizeof line, "  %-14s %-28s %9zu %9zu %10.2f %10.2f %6d\n", r.ruleset.c_str(), r.rule.c_str(),
                  r.matches, r.applied, r.search_ms, r.apply_ms, r.times_banned);
    s += line;
  }
  return s;
}

}  // namespace luminal
