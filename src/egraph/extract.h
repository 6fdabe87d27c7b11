#pragma once
// Extraction: choosing one e-node per class. A cost model gives the first plan; the search
// (later) mutates choices and times candidates on the device.
#include <cstdint>
#include "egraph/convert.h"

namespace luminal {

// Estimated cost of running one e-node, given its class's analysis. Dims without a value in
// `dims` are taken as `default_dim`.
struct CostModel {
  DimMap dims;
  int64_t default_dim = 64;
  // Non-zero: every node's cost is replaced by a pseudo-random value in [0.1, 10] drawn from
  // (node, seed). Greedy extraction under positive costs is acyclic, so this yields random
  // valid plans (the search's and the property test's candidates).
  uint64_t jitter_seed = 0;
  double node_cost(const EGraph& eg, const ENode& n, const TensorInfo& out) const;
  static constexpr double kLaunchCost = 10.0;   // ~ one kernel launch, in the units below
  static constexpr double kCostPerByte = 0.01;
};

// Greedy bottom-up extraction: each class takes its cheapest node by tree cost.
Choice extract_greedy(const EGraph& eg, const CostModel& cost);

// The estimated cost of the plan a choice gives: every class reachable from `roots` counted
// once (a DAG cost, unlike the shares extraction works with).
double plan_cost(const EGraph& eg, const Choice& choice, const std::vector<ClassId>& roots, const CostModel& cost);

}  // namespace luminal
