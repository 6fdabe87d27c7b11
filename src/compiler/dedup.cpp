#include "compiler/dedup.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace luminal {
namespace {

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull; }

uint64_t shape_hash(const std::vector<Expr>& shape) {
  uint64_t h = shape.size();
  for (const Expr& e : shape) h = mix(h, e.hash());
  return h;
}

// What a node is, without its identity: op, attributes (not names), dtype, shape, the views it
// reads through and the dtype and shape of each input (not its op: the first copy of a layer
// reads the embedding where later copies read the previous layer).
uint64_t local_hash(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  uint64_t h = mix(static_cast<uint64_t>(n.op), static_cast<uint64_t>(n.dtype));
  h = mix(h, shape_hash(n.shape));
  uint32_t bits;
  std::memcpy(&bits, &n.constant, 4);
  h = mix(h, bits);
  if (n.op == OpKind::Iota) h = mix(h, n.iota_expr.hash());
  h = mix(h, n.axis);
  for (const Edge& e : n.inputs) {
    const Node& src = g.node(e.src);
    h = mix(h, e.view.hash());
    h = mix(h, mix(static_cast<uint64_t>(src.dtype), shape_hash(src.shape)));
  }
  return h;
}

bool outside_blocks(const Node& n) { return n.op == OpKind::Input || n.op == OpKind::Output; }

// Placeholder inputs standing for values computed elsewhere, made once per name.
struct Placeholders {
  Graph& g;
  std::unordered_map<std::string, NodeId> ids;
  NodeId get(const std::string& name, const Node& like) {
    auto it = ids.find(name);
    if (it == ids.end()) it = ids.emplace(name, g.input(name, like.dtype, like.shape)).first;
    return it->second;
  }
};

// For copy k: the external source in copy k for each external source of copy 0, or nullopt
// if copy k is not wired like copy 0.
std::optional<std::unordered_map<NodeId, NodeId>> external_map(const Graph& g, const RepeatedBlocks& rb, size_t k) {
  std::unordered_map<NodeId, NodeId> map;
  size_t s = rb.start, p = rb.period;
  for (size_t i = 0; i < p; ++i) {
    const Node& a = g.node(static_cast<NodeId>(s + i));
    const Node& b = g.node(static_cast<NodeId>(s + k * p + i));
    if (outside_blocks(a)) continue;
    if (a.inputs.size() != b.inputs.size()) return std::nullopt;
    for (size_t j = 0; j < a.inputs.size(); ++j) {
      NodeId sa = a.inputs[j].src, sb = b.inputs[j].src;
      size_t block;
      if (rb.in_block(sa, &block) && block == 0 && !outside_blocks(g.node(sa))) {
        if (sb != sa + k * p) return std::nullopt;
        continue;
      }
      if (rb.in_block(sb, &block) && block == k && !outside_blocks(g.node(sb))) return std::nullopt;
      auto [it, fresh] = map.emplace(sa, sb);
      if (!fresh && it->second != sb) return std::nullopt;
    }
  }
  return map;
}

}  // namespace

bool RepeatedBlocks::in_block(NodeId id, size_t* block) const {
  if (id < start || id >= start + period * copies) return false;
  if (block) *block = (id - start) / period;
  return true;
}

std::optional<RepeatedBlocks> find_repeated_blocks(const Graph& g) {
  size_t n = g.size();
  if (n < 4) return std::nullopt;
  std::vector<uint64_t> h(n);
  for (NodeId i = 0; i < n; ++i) h[i] = local_hash(g, i);
  // A node kind that recurs at a fixed stride votes for that stride as the period.
  std::unordered_map<uint64_t, std::vector<size_t>> positions;
  for (size_t i = 0; i < n; ++i) positions[h[i]].push_back(i);
  std::map<std::pair<size_t, size_t>, size_t> votes;  // (period, count) -> hashes
  std::map<std::pair<size_t, size_t>, size_t> first_pos;
  for (auto& [hash, pos] : positions) {
    if (pos.size() < 2) continue;
    size_t d = pos[1] - pos[0];
    bool regular = d > 0;
    for (size_t i = 2; i < pos.size() && regular; ++i) regular = pos[i] - pos[i - 1] == d;
    if (!regular) continue;
    auto key = std::make_pair(d, pos.size());
    votes[key]++;
    first_pos.emplace(key, pos[0]);
  }
  std::optional<RepeatedBlocks> best;
  for (auto& [key, count] : votes) {
    auto [p, copies] = key;
    if (count < 2 || p < 2) continue;
    // Grow the periodic region around one voting node: h[i] == h[i + p] throughout.
    size_t a = first_pos[key], b = a;
    while (a > 0 && h[a - 1] == h[a - 1 + p]) --a;
    while (b + p < n && h[b] == h[b + p]) ++b;
    RepeatedBlocks rb{a, p, (b + p - a) / p};
    if (rb.copies < 2) continue;
    // Keep the prefix of copies wired exactly like copy 0.
    size_t ok = 1;
    while (ok < rb.copies && external_map(g, rb, ok)) ++ok;
    rb.copies = ok;
    if (rb.copies < 2) continue;
    if (!best || rb.period * rb.copies > best->period * best->copies) best = rb;
  }
  return best;
}

BlockSplit split_blocks(const Graph& g, const RepeatedBlocks& rb) {
  BlockSplit out;
  size_t s = rb.start, p = rb.period;
  // Positions whose value is needed outside its own copy, in any copy.
  std::vector<bool> exported(p, false);
  std::vector<bool> outer_used_by_block(g.size(), false);
  for (NodeId id = 0; id < g.size(); ++id) {
    size_t bc = 0;
    bool consumer_in = rb.in_block(id, &bc) && !outside_blocks(g.node(id));
    for (const Edge& e : g.node(id).inputs) {
      size_t bs = 0;
      bool src_in = rb.in_block(e.src, &bs) && !outside_blocks(g.node(e.src));
      if (src_in && (!consumer_in || bs != bc)) exported[(e.src - s) % p] = true;
      if (!src_in && consumer_in && g.node(e.src).op != OpKind::Input) outer_used_by_block[e.src] = true;
    }
  }
  // The template: copy 0 with its outside world replaced by placeholders.
  Placeholders block_inputs{out.block, {}}, outer_inputs{out.outer, {}};
  std::unordered_map<NodeId, NodeId> in_block;
  for (size_t i = 0; i < p; ++i) {
    NodeId id = static_cast<NodeId>(s + i);
    const Node& n = g.node(id);
    if (outside_blocks(n)) continue;
    std::vector<Edge> ins;
    for (const Edge& e : n.inputs) {
      size_t b;
      if (rb.in_block(e.src, &b) && b == 0 && !outside_blocks(g.node(e.src))) {
        ins.push_back({in_block.at(e.src), e.view});
        continue;
      }
      ins.push_back({block_inputs.get("__ext_" + std::to_string(e.src), g.node(e.src)), e.view});
    }
    in_block[id] = out.block.add_like(n, ins);
  }
  for (size_t i = 0; i < p; ++i)
    if (exported[i]) {
      NodeId id = in_block.at(static_cast<NodeId>(s + i));
      out.block.output("__out_" + std::to_string(i), {id, View::contiguous(out.block.node(id).shape)});
    }
  // The outer graph: everything not in a block, reading block values through placeholders.
  std::unordered_map<NodeId, NodeId> outer;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    size_t b;
    if (rb.in_block(id, &b) && !outside_blocks(n)) continue;
    std::vector<Edge> ins;
    for (const Edge& e : n.inputs) {
      size_t bs;
      if (rb.in_block(e.src, &bs) && !outside_blocks(g.node(e.src))) {
        std::string name = "__blk_" + std::to_string(bs) + "_" + std::to_string((e.src - s) % p);
        ins.push_back({outer_inputs.get(name, g.node(e.src)), e.view});
      } else {
        ins.push_back({outer.at(e.src), e.view});
      }
    }
    outer[id] = out.outer.add_like(n, ins);
    if (outer_used_by_block[id])
      out.outer.output("__outer_" + std::to_string(id), {outer[id], View::contiguous(n.shape)});
  }
  return out;
}

namespace {

struct Stitcher {
  const Graph& g;
  const RepeatedBlocks& rb;
  const Graph& block_plan;
  const Graph& outer_plan;
  std::vector<std::unordered_map<NodeId, NodeId>> ext;  // per copy: copy-0 source -> copy-k source
  Graph f;
  // (instance: -1 outer, k block copy; plan node) -> how the final graph reads its value
  std::map<std::pair<int, NodeId>, Edge> memo;
  std::map<std::string, NodeId> inputs;

  const Graph& plan(int inst) const { return inst < 0 ? outer_plan : block_plan; }

  Edge whole(NodeId id) { return {id, View::contiguous(f.node(id).shape)}; }

  Edge real_input(const Node& n) {
    auto it = inputs.find(n.name);
    if (it == inputs.end()) it = inputs.emplace(n.name, f.input(n.name, n.dtype, n.shape)).first;
    return whole(it->second);
  }

  // Reads `base` through `view` (a consumer's view of a value that is itself a view): one
  // composed view, or a materialised copy when the two pad with different values.
  Edge through(const Edge& base, const View& view) {
    if (std::optional<View> v = base.view.compose(view)) return {base.src, *v};
    NodeId one = f.constant(1.0f);
    NodeId copy = f.binary(OpKind::Mul, base, {one, View().broadcast_to(base.view.shape())});
    return {copy, *View::contiguous(base.view.shape()).compose(view)};
  }

  // The value an Output of a plan instance exposes (its edge, no copy).
  Edge exported(int inst, const std::string& name) {
    const Graph& pl = plan(inst);
    const Edge& e = pl.node(pl.find_output(name)).inputs[0];
    return through(get(inst, e.src), e.view);
  }

  Edge source_for(NodeId orig) {  // an original-graph node, seen from a block copy
    const Node& n = g.node(orig);
    size_t b;
    if (n.op == OpKind::Input) return real_input(n);
    if (rb.in_block(orig, &b) && n.op != OpKind::Output)
      return exported(static_cast<int>(b), "__out_" + std::to_string((orig - rb.start) % rb.period));
    return exported(-1, "__outer_" + std::to_string(orig));
  }

  Edge get(int inst, NodeId id) {
    auto key = std::make_pair(inst, id);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const Node& n = plan(inst).node(id);
    Edge r;
    if (n.op == OpKind::Input && n.name.rfind("__blk_", 0) == 0) {
      size_t k, p;
      std::sscanf(n.name.c_str(), "__blk_%zu_%zu", &k, &p);
      r = exported(static_cast<int>(k), "__out_" + std::to_string(p));
    } else if (n.op == OpKind::Input && n.name.rfind("__ext_", 0) == 0) {
      NodeId s0 = static_cast<NodeId>(std::stoul(n.name.substr(6)));
      r = source_for(inst == 0 ? s0 : ext[inst].at(s0));
    } else if (n.op == OpKind::Input) {
      r = real_input(n);
    } else {
      std::vector<Edge> ins;
      for (const Edge& e : n.inputs) ins.push_back(through(get(inst, e.src), e.view));
      r = whole(f.add_like(n, ins));
    }
    memo.emplace(key, r);
    return r;
  }
};

}  // namespace

Graph stitch_blocks(const Graph& g, const RepeatedBlocks& rb, const Graph& block_plan, const Graph& outer_plan) {
  Stitcher st{g, rb, block_plan, outer_plan, {}, {}, {}, {}};
  st.ext.resize(rb.copies);
  for (size_t k = 1; k < rb.copies; ++k) {
    auto m = external_map(g, rb, k);
    LM_ASSERT(m.has_value(), "block copy " + std::to_string(k) + " is not wired like copy 0");
    st.ext[k] = *m;
  }
  for (NodeId id : g.inputs()) st.real_input(g.node(id));  // keep every input, in order
  for (NodeId id : outer_plan.outputs()) {
    const Node& n = outer_plan.node(id);
    if (n.name.rfind("__outer_", 0) == 0) continue;
    st.f.output(n.name, st.through(st.get(-1, n.inputs[0].src), n.inputs[0].view));
  }
  return std::move(st.f);
}

}  // namespace luminal
