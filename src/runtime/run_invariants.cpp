#include "runtime/run_invariants.h"

#include <algorithm>

namespace luminal {

void RunInvariants::analyse(const Graph& g, const std::vector<NodeId>& order) {
  invariant_.assign(g.size(), 0);
  reads_.assign(g.size(), {});
  std::vector<uint8_t> source(g.size(), 0);  // usable as an invariant node's input
  for (NodeId id : order) {
    const Node& n = g.node(id);
    if (n.op == OpKind::Input) {
      source[id] = 1;
      reads_[id] = {id};
      continue;
    }
    // Outputs are the caller's copies; a Scatter may write into its destination in place.
    if (n.op == OpKind::Output || n.op == OpKind::Scatter || !node_dims(n).empty()) continue;
    std::vector<NodeId> reads;
    bool ok = true;
    for (const Edge& e : n.inputs) {
      ok = ok && source[e.src];
      if (!ok) break;
      for (NodeId r : reads_[e.src])
        if (std::find(reads.begin(), reads.end(), r) == reads.end()) reads.push_back(r);
    }
    if (!ok || reads.size() > kMaxInputsPerValue) continue;
    invariant_[id] = source[id] = 1;
    reads_[id] = std::move(reads);
  }
}

std::vector<uint64_t> RunInvariants::versions_of(NodeId id) const {
  std::vector<uint64_t> v;
  for (NodeId r : reads_[id]) {
    auto it = version_.find(r);
    v.push_back(it == version_.end() ? 0 : it->second);
  }
  return v;
}

std::optional<Buffer> RunInvariants::reuse(NodeId id) {
  auto it = kept_.find(id);
  if (it == kept_.end() || it->second.versions != versions_of(id)) return std::nullopt;
  it->second.reused = true;
  const Buffer& b = it->second.value;
  return Buffer::borrow(b.dtype(), b.shape(), b.bytes(), nullptr);
}

Buffer RunInvariants::keep(NodeId id, Buffer value) {
  auto it = kept_.find(id);
  if (it != kept_.end()) {  // recomputed after an input changed: replace, or give up on the node
    kept_bytes_ -= it->second.value.nbytes();
    const bool was_reused = it->second.reused;
    kept_.erase(it);
    if (!was_reused) {
      invariant_[id] = 0;
      return value;
    }
  }
  if (value.borrowed() || kept_bytes_ + value.nbytes() > kMaxKeptBytes) return value;
  kept_bytes_ += value.nbytes();
  Kept& k = kept_[id];
  k.value = std::move(value);
  k.versions = versions_of(id);
  const Buffer& b = k.value;
  return Buffer::borrow(b.dtype(), b.shape(), b.bytes(), nullptr);
}

}  // namespace luminal
