#include "compiler/cse.h"

#include <cstring>
#include <unordered_map>

namespace luminal {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

uint64_t node_hash(const Node& n) {
  uint64_t h = mix(static_cast<uint64_t>(n.op), static_cast<uint64_t>(n.dtype));
  for (const Expr& e : n.shape) h = mix(h, e.hash());
  uint32_t bits = 0;
  std::memcpy(&bits, &n.constant, sizeof bits);
  h = mix(mix(h, bits), n.axis);
  if (n.op == OpKind::Iota) h = mix(h, n.iota_expr.hash());
  h = mix(h, std::hash<std::string>()(n.kernel));
  for (int64_t c : n.code) h = mix(h, static_cast<uint64_t>(c));
  for (const Edge& e : n.inputs) h = mix(mix(h, e.src), e.view.hash());
  return h;
}

bool same(const Node& a, const Node& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.shape != b.shape || a.axis != b.axis || a.kernel != b.kernel || a.code != b.code)
    return false;
  if (std::memcmp(&a.constant, &b.constant, sizeof a.constant) != 0) return false;  // bitwise: NaN equals NaN
  if (a.op == OpKind::Iota && !(a.iota_expr == b.iota_expr)) return false;
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i].src != b.inputs[i].src || !(a.inputs[i].view == b.inputs[i].view)) return false;
  return true;
}

}  // namespace

Graph merge_common_subexpressions(const Graph& plan) {
  Graph out;
  std::vector<NodeId> to(plan.size(), 0);
  std::unordered_multimap<uint64_t, NodeId> seen;  // hash -> node of `out`
  // Node ids are topological (a node is created after its inputs).
  for (NodeId id = 0; id < plan.size(); ++id) {
    Node n = plan.node(id);
    for (Edge& e : n.inputs) e.src = to[e.src];
    if (n.op == OpKind::Input || n.op == OpKind::Output) {
      to[id] = out.add_like(n, n.inputs);
      continue;
    }
    const uint64_t h = node_hash(n);
    NodeId found = UINT32_MAX;
    for (auto [it, end] = seen.equal_range(h); it != end; ++it)
      if (same(out.node(it->second), n)) found = it->second;
    if (found != UINT32_MAX) {
      to[id] = found;
      continue;
    }
    to[id] = out.add_like(n, n.inputs);
    seen.emplace(h, to[id]);
  }
  return out;
}

}  // namespace luminal
