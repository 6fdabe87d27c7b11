#pragma once
// Genetic search over extractions: a candidate is one e-node per class forming an acyclic
// plan. Start from the cost model's choice, mutate the best ones, time each new candidate on
// the backend, keep the fastest.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "egraph/extract.h"

namespace luminal {

struct SearchOptions {
  int limit = 50;             // candidates profiled in all (0: no search, cost model only)
  int generation_size = 8;    // offspring per generation
  int mutations = 2;          // classes re-chosen per offspring
  int trials = 3;             // timed runs per candidate; the median counts
  int keep_best = 4;          // parents kept between generations
  double candidate_timeout_ms = 10000;  // a candidate slower than this on its first run is dropped
  double slow_ratio = 3;  // ... as is one slower than this many times the best so far (0: off)
  double total_timeout_ms = 60000;
  DimMap profile_dims;        // dim values to profile at (unset dims: 16)
  // With a cost model: a candidate estimated this many times costlier than the cost model's
  // own plan is skipped unprofiled (a matmul written out as a broadcast product can take
  // seconds per run on a real model's layer). 0: profile everything.
  double prune_cost_ratio = 4;
  uint64_t seed = 1;
};

// Times a plan on a backend: the median run time in ms, or nullopt to reject it (NaN/Inf in
// an output, an error while running, over the timeout). Must not throw.
using Profiler = std::function<std::optional<double>(const Graph& plan, const SearchOptions& opts)>;

// Called with each generation's new candidates before any is profiled, so a backend can do
// per-plan work once for the batch (the CPU backend compiles all their new kernels together).
using PrepareCandidates = std::function<void(const std::vector<const Graph*>& plans)>;

struct SearchReport {
  // rejected: NaN/Inf outputs, an error, or a first run over the timeout (or slow_ratio)
  int profiled = 0, rejected = 0, invalid = 0, duplicates = 0, pruned = 0;
  double best_ms = 0, initial_ms = 0, seconds = 0;
  std::vector<double> history;  // best time after each generation
  std::string to_string() const;
};

struct SearchResult {
  Choice choice;
  Graph plan;
  SearchReport report;
};

SearchResult search_plans(const EGraph& eg, const std::vector<ClassId>& roots, const Choice& start,
                          const Profiler& profile, const SearchOptions& opts,
                          const std::function<void(const SearchReport&)>& progress = nullptr,
                          const PrepareCandidates& prepare = nullptr, const CostModel* cost = nullptr);

// The reference backend's profiler: runs the plan on the interpreter with every input filled
// with ones (never zeros, which hide NaNs behind 0*x), rejecting NaN/Inf outputs.
std::optional<double> profile_on_interpreter(const Graph& plan, const SearchOptions& opts);

}  // namespace luminal
