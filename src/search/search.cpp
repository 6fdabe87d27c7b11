#include "search/search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <unordered_set>

#include "core/error.h"

namespace luminal {

using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string SearchReport::to_string() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "search: %d candidates profiled (%d rejected, %d invalid, %d duplicates, %d pruned by cost) in %.2f s; "
                "best %.3f ms (cost-model plan %.3f ms)\n",
                profiled, rejected, invalid, duplicates, pruned, seconds, best_ms, initial_ms);
  return line;
}

namespace {

struct Candidate {
  Choice choice;
  double ms;
};

uint64_t plan_key(const Graph& g) { return std::hash<std::string>()(g.dump()); }

}  // namespace

SearchResult search_plans(const EGraph& eg, const std::vector<ClassId>& roots, const Choice& start,
                          const Profiler& profile, const SearchOptions& opts,
                          const std::function<void(const SearchReport&)>& progress,
                          const PrepareCandidates& prepare, const CostModel* cost) {
  auto t0 = Clock::now();
  SearchResult r;
  r.choice = start;
  r.plan = choice_to_graph(eg, start, roots);
  std::optional<double> first = opts.limit > 0 ? profile(r.plan, opts) : std::nullopt;
  r.report.profiled = opts.limit > 0 ? 1 : 0;
  r.report.initial_ms = r.report.best_ms = first.value_or(0);
  if (!first) {  // nothing to compare against, or the cost model's plan itself failed
    if (opts.limit > 0) r.report.rejected = 1;
    r.report.seconds = ms_since(t0) / 1000;
    return r;
  }
  // Only classes with a real alternative are worth mutating.
  std::vector<ClassId> choosable;
  for (ClassId c : eg.class_ids())
    if (eg.eclass(c).nodes.size() > 1) choosable.push_back(c);
  std::vector<Candidate> best{{start, *first}};
  const double cost_limit =
      cost && opts.prune_cost_ratio > 0 ? opts.prune_cost_ratio * plan_cost(eg, start, roots, *cost) : 0;
  std::unordered_set<uint64_t> seen{plan_key(r.plan)};
  std::mt19937_64 rng(opts.seed);
  int attempts = 0;
  while (r.report.profiled < opts.limit && !choosable.empty() && ms_since(t0) < opts.total_timeout_ms &&
         attempts < opts.limit * 20) {
    // Breed the whole generation first, so the backend can prepare the new plans together.
    std::vector<std::pair<Choice, Graph>> children;
    for (int k = 0; k < opts.generation_size && r.report.profiled + static_cast<int>(children.size()) < opts.limit; ++k) {
      ++attempts;
      Choice child = best[std::uniform_int_distribution<size_t>(0, best.size() - 1)(rng)].choice;
      for (int m = 0; m < opts.mutations; ++m) {
        ClassId c = choosable[std::uniform_int_distribution<size_t>(0, choosable.size() - 1)(rng)];
        const auto& nodes = eg.eclass(c).nodes;
        child[c] = nodes[std::uniform_int_distribution<size_t>(0, nodes.size() - 1)(rng)];
      }
      Graph plan;
      try {
        plan = choice_to_graph(eg, child, roots);
      } catch (const std::exception&) {  // cyclic, or an unrealisable combination of views
        ++r.report.invalid;
        continue;
      }
      if (!seen.insert(plan_key(plan)).second) {
        ++r.report.duplicates;
        continue;
      }
      if (cost_limit > 0 && plan_cost(eg, child, roots, *cost) > cost_limit) {
        ++r.report.pruned;
        continue;
      }
      children.emplace_back(std::move(child), std::move(plan));
    }
    if (prepare && !children.empty()) {
      std::vector<const Graph*> plans;
      for (const auto& c : children) plans.push_back(&c.second);
      try {
        prepare(plans);
      } catch (const std::exception&) {  // each candidate then prepares (or fails) on its own
      }
    }
    std::vector<Candidate> offspring;
    // No more trials for a candidate far slower than the best: it cannot win.
    SearchOptions run_opts = opts;
    if (opts.slow_ratio > 0)
      run_opts.candidate_timeout_ms = std::min(opts.candidate_timeout_ms, std::max(1.0, opts.slow_ratio * best.front().ms));
    for (auto& [child, plan] : children) {
      if (ms_since(t0) >= opts.total_timeout_ms) break;
      std::optional<double> t = profile(plan, run_opts);
      ++r.report.profiled;
      if (!t) {
        ++r.report.rejected;
        continue;
      }
      offspring.push_back({std::move(child), *t});
    }
    best.insert(best.end(), offspring.begin(), offspring.end());
    std::stable_sort(best.begin(), best.end(), [](const Candidate& a, const Candidate& b) { return a.ms < b.ms; });
    if (best.size() > static_cast<size_t>(std::max(1, opts.keep_best))) best.resize(std::max(1, opts.keep_best));
    r.report.best_ms = best.front().ms;
    r.report.history.push_back(best.front().ms);
    if (progress) progress(r.report);
  }
  r.choice = best.front().choice;
  r.plan = choice_to_graph(eg, r.choice, roots);
  r.report.seconds = ms_since(t0) / 1000;
  return r;
}

}  // namespace luminal
