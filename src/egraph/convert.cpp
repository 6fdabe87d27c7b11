#include "egraph/convert.h"

#include <algorithm>

#include "core/error.h"

namespace luminal {

static Attr attr_of(const Node& n) {
  Attr a;
  switch (n.op) {
    case OpKind::Input: a.name = n.name; a.dtype = n.dtype; a.exprs = n.shape; break;
    case OpKind::Output: a.name = n.name; break;
    case OpKind::Constant: a.number = n.constant; break;
    case OpKind::Iota: a.exprs = {n.iota_expr, n.shape.at(0)}; break;
    case OpKind::Cast: a.dtype = n.dtype; break;
    case OpKind::SumReduce: case OpKind::MaxReduce: a.axis = static_cast<int64_t>(n.axis); break;
    default: break;
  }
  return a;
}

std::vector<ClassId> Seeded::roots() const {
  std::vector<ClassId> r = inputs;
  r.insert(r.end(), outputs.begin(), outputs.end());
  return r;
}

Seeded add_graph(EGraph& eg, const Graph& g) {
  Seeded s;
  s.node_class.assign(g.size(), UINT32_MAX);
  std::vector<NodeId> order = g.topo_order();
  for (NodeId id : g.inputs())  // unused inputs too: callers still set them by name
    if (std::find(order.begin(), order.end(), id) == order.end()) order.insert(order.begin(), id);
  for (NodeId id : order) {
    const Node& n = g.node(id);
    ENode e;
    e.op = eg.ops().primitive(n.op);
    e.attr = eg.attrs().intern(attr_of(n));
    for (const Edge& in : n.inputs) {
      ClassId src = s.node_class[in.src];
      if (!(in.view.is_contiguous() && provably_equal(in.view.shape(), g.node(in.src).shape))) {
        Attr va;
        va.view = in.view;
        src = eg.add(ENode{eg.ops().view(), eg.attrs().intern(va), {src}});
      }
      e.kids.push_back(src);
    }
    s.node_class[id] = eg.add(e);
  }
  for (NodeId id : g.inputs()) s.inputs.push_back(s.node_class[id]);
  for (NodeId id : g.outputs()) s.outputs.push_back(s.node_class[id]);
  return s;
}

namespace {

struct Rebuilder {
  const EGraph& eg;
  const Choice& choice;
  Graph g;
  std::unordered_map<ClassId, Edge> done;
  std::unordered_map<ClassId, bool> active;

  const ENode& chosen(ClassId c) {
    auto it = choice.find(eg.find(c));
    LM_ASSERT(it != choice.end(), "no node chosen for class " + std::to_string(eg.find(c)));
    return it->second;
  }

  // The edge that reads class c: a node's output through a view.
  Edge edge(ClassId c) {
    c = eg.find(c);
    if (auto it = done.find(c); it != done.end()) return it->second;
    LM_ASSERT(!active[c], "the chosen plan is cyclic at class " + std::to_string(c));
    active[c] = true;
    const ENode& n = chosen(c);
    Edge result;
    if (n.op == eg.ops().view()) {
      Edge below = edge(n.kids[0]);
      const View& v = *eg.attr(n).view;
      std::optional<View> composed = below.view.compose(v);
      if (!composed) {  // pads that cannot share one value: materialise the lower view
        NodeId one = g.constant(1.0f);
        Edge ones{one, View().broadcast_to(below.view.shape())};
        below = Edge{g.binary(OpKind::Mul, below, ones), View::contiguous(below.view.shape())};
        composed = below.view.compose(v);
      }
      result = Edge{below.src, *composed};
    } else {
      NodeId id = build(n, c);
      result = Edge{id, View::contiguous(g.node(id).shape)};
    }
    active[c] = false;
    done.emplace(c, result);
    return result;
  }

  NodeId build(const ENode& n, ClassId cls) {
    const OpInfo& op = eg.ops().info(n.op);
    const Attr& a = eg.attr(n);
    std::vector<Edge> in;
    for (ClassId k : n.kids) in.push_back(edge(k));
    if (!op.primitive) {  // a kernel declared by a rule file; its analysis is its class's
      const TensorInfo& t = eg.info(eg.find(cls));
      return g.kernel(op.name, in, t.dtype, t.shape, static_cast<size_t>(a.axis), static_cast<float>(a.number), a.code);
    }
    switch (op.kind) {
      case OpKind::Input: return g.input(a.name, a.dtype, a.exprs);
      case OpKind::Output: return g.output(a.name, in[0]);
      case OpKind::Constant: return g.constant(static_cast<float>(a.number));
      case OpKind::Iota: return g.iota(a.exprs[0], a.exprs[1]);
      case OpKind::Cast: return g.cast(in[0], a.dtype);
      case OpKind::SumReduce: case OpKind::MaxReduce: return g.reduce(op.kind, in[0], static_cast<size_t>(a.axis));
      case OpKind::Gather: return g.gather(in[0], in[1]);
      case OpKind::Scatter: return g.scatter(in[0], in[1], in[2]);
      default: break;
    }
    if (is_unary(op.kind)) return g.unary(op.kind, in[0]);
    return g.binary(op.kind, in[0], in[1]);
  }
};

}  // namespace

Graph choice_to_graph(const EGraph& eg, const Choice& choice, const std::vector<ClassId>& roots) {
  Rebuilder r{eg, choice, {}, {}, {}};
  for (ClassId c : roots) r.edge(c);
  return std::move(r.g);
}

}  // namespace luminal
