#include "egraph/extract.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_set>
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
  // A ScaledMatmul reads b only for rows whose scale is nonzero, which the data decides (an MoE
  // decode reads k of E experts); counted as half, it wins over the Matmul of a scaled copy.
  const bool skips_b = !op.primitive && op.name == "ScaledMatmul";
  for (size_t i = 0; i < n.kids.size(); ++i) {
    const TensorInfo& t = eg.info(n.kids[i]);
    bytes += elements(t.shape, *this) * static_cast<double>(dtype_size(t.dtype)) * (skips_b && i == 1 ? 0.5 : 1.0);
  }
  // A fused reduction walks its whole iteration domain, which for a reduction over a broadcast
  // product (a matmul written out) is far more than the bytes it reads.
  if (!op.primitive && n.attr != AttrTable::kNone && !eg.attr(n).code.empty() && !eg.attr(n).exprs.empty()) {
    double read = 0;
    for (ClassId k : n.kids) read += elements(eg.info(k).shape, *this);
    bytes += std::max(0.0, elements(eg.attr(n).exprs, *this) - read) * static_cast<double>(dtype_size(out.dtype));
  }
  return kLaunchCost + bytes * kCostPerByte;
}

Choice extract_greedy(const EGraph& eg, const CostModel& cm) {
  // Knuth's generalisation of Dijkstra: a class's choice is final once it is the cheapest
  // candidate left. A node becomes a candidate when all its children are final, so every choice
  // is acyclic. Each node is touched once per child: O(E log E), whatever the e-graph's depth.
  struct Candidate {
    double cost;
    ClassId cls;
    const ENode* node;
    bool operator>(const Candidate& o) const { return cost > o.cost; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  std::unordered_map<ClassId, double> best;
  // Per node: its children that are not final yet. Parent lists can hold stale (pre-merge)
  // copies of a node, so parents are canonicalised before lookup and a child is crossed off at
  // most once.
  std::unordered_map<ENode, std::pair<std::vector<ClassId>, const ENode*>, ENodeHash> waiting;
  Choice choice;
  // A class read by several parents is computed once, so each parent carries only its share of
  // the class's cost. Plain tree costs count a shared class once per path: through the residual
  // stream of a deep model they grow exponentially with depth, until a kernel's own cost is
  // lost in the rounding of its inputs' and extraction picks at random (docs/lessons.md).
  std::unordered_map<ClassId, double> users;
  auto share = [&](ClassId k) {
    auto it = users.find(k);
    if (it != users.end()) return it->second;
    std::vector<ClassId> ps;
    // Only the graph's own ops count as readers: kernel nodes are alternatives to them.
    for (const auto& [pnode, pclass] : eg.eclass(k).parents)
      if (pnode.op == eg.ops().view() || eg.ops().info(pnode.op).primitive) ps.push_back(eg.find(pclass));
    std::sort(ps.begin(), ps.end());
    double n = static_cast<double>(std::unique(ps.begin(), ps.end()) - ps.begin());
    return users[k] = std::max(1.0, n);
  };
  auto push = [&](ClassId c, const ENode& n) {
    double cost = cm.node_cost(eg, n, eg.info(c));
    for (ClassId k : n.kids) cost += best.at(eg.find(k)) / share(eg.find(k));
    heap.push({cost, c, &n});
  };
  for (ClassId c : eg.class_ids())
    for (const ENode& n : eg.eclass(c).nodes) {
      std::vector<ClassId> kids;
      for (ClassId k : n.kids) kids.push_back(eg.find(k));
      std::sort(kids.begin(), kids.end());
      kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
      if (kids.empty()) push(c, n);
      else waiting[n] = {std::move(kids), &n};
    }
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    if (best.count(top.cls)) continue;
    best[top.cls] = top.cost;
    choice[top.cls] = *top.node;
    for (const auto& [pnode, pclass] : eg.eclass(top.cls).parents) {
      ENode canon = pnode;
      for (ClassId& k : canon.kids) k = eg.find(k);
      auto it = waiting.find(canon);
      if (it == waiting.end()) continue;
      std::vector<ClassId>& pending = it->second.first;
      auto pos = std::find(pending.begin(), pending.end(), top.cls);
      if (pos == pending.end()) continue;
      pending.erase(pos);
      if (pending.empty()) {
        ClassId p = eg.find(pclass);
        if (!best.count(p)) push(p, *it->second.second);
      }
    }
  }
  return choice;
}

double plan_cost(const EGraph& eg, const Choice& choice, const std::vector<ClassId>& roots, const CostModel& cm) {
  std::unordered_set<ClassId> seen;
  std::vector<ClassId> stack;
  for (ClassId r : roots) stack.push_back(eg.find(r));
  double total = 0;
  while (!stack.empty()) {
    ClassId c = stack.back();
    stack.pop_back();
    if (!seen.insert(c).second) continue;
    auto it = choice.find(c);
    if (it == choice.end()) throw Error("plan_cost: class " + std::to_string(c) + " has no chosen node");
    total += cm.node_cost(eg, it->second, eg.info(c));
    for (ClassId k : it->second.kids) stack.push_back(eg.find(k));
  }
  return total;
}

}  // namespace luminal
