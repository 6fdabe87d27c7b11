#include "egraph/extract.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace luminal {

static double elements(const std::vector<Expr>& shape, const CostModel& cm) {
  DimMap dims = cm.dims;
  double n = 1;
  for (const Expr& d : shape) {
    for (const std::string& name : d.dims())
      if (!dims.count(name)) dims[name] = cm.default_dim;
    n *= static_cast<double>(d.eval(dims));
  }
  return n;
}

double CostModel::node_cost(const EGraph& eg, const ENode& n, const TensorInfo& out) const {
  if (jitter_seed) {
    uint64_t h = ENodeHash()(n) ^ (jitter_seed * 0x9e3779b97f4a7c15ull);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return std::pow(10.0, static_cast<double>(h % 2001) / 1000.0 - 1.0);
  }
  if (n.op == eg.ops().view()) return 1e-6;  // free, but never a tie with the node it views
  const OpInfo& op = eg.ops().info(n.op);
  if (op.primitive && (op.kind == OpKind::Input || op.kind == OpKind::Constant)) return 0.0;
  // A memory-bound model: a fixed launch cost plus the bytes read and written.
  double bytes = elements(out.shape, *this) * static_cast<double>(dtype_size(out.dtype));
  for (ClassId k : n.kids) {
    const TensorInfo& t = eg.info(k);
    bytes += elements(t.shape, *this) * static_cast<double>(dtype_size(t.dtype));
  }
  return kLaunchCost + bytes * kCostPerByte;
}

Choice extract_greedy(const EGraph& eg, const CostModel& cm) {
  const double inf = std::numeric_limits<double>::infinity();
  std::unordered_map<ClassId, double> best;
  Choice choice;
  std::vector<ClassId> ids = eg.class_ids();
  for (ClassId c : ids) best[c] = inf;
  for (bool changed = true; changed;) {
    changed = false;
    for (ClassId c : ids) {
      for (const ENode& n : eg.eclass(c).nodes) {
        double cost = cm.node_cost(eg, n, eg.info(c));
        for (ClassId k : n.kids) cost += best[eg.find(k)];
        if (cost < best[c]) {
          best[c] = cost;
          choice[c] = n;
          changed = true;
        }
      }
    }
  }
  return choice;
}

}  // namespace luminal
