#include "graph/graph.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace luminal {

NodeId Graph::add(Node n) {
  for (const Edge& e : n.inputs) {
    LM_ASSERT(e.src < nodes_.size(), "edge from a node that does not exist");
    if (nodes_[e.src].op == OpKind::Output)
      throw Error(std::string(op_name(n.op)) + ": cannot read Output '" + nodes_[e.src].name +
                  "'; use the edge that feeds the output instead");
  }
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

static std::string names(const std::vector<std::string>& xs) {
  std::string s;
  for (const auto& x : xs) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

NodeId Graph::input(const std::string& name, DType dtype, std::vector<Expr> shape) {
  if (name.empty()) throw Error("input: a name is required");
  for (const Node& n : nodes_)
    if (n.op == OpKind::Input && n.name == name) throw Error("input: an input named '" + name + "' already exists");
  for (const Expr& d : shape)
    if (d.uses_index()) throw Error("input '" + name + "': a shape cannot use the index variable");
  Node n{OpKind::Input, dtype, std::move(shape), {}};
  n.name = name;
  return add(std::move(n));
}

NodeId Graph::output(const std::string& name, Edge x) {
  for (const Node& n : nodes_)
    if (n.op == OpKind::Output && n.name == name) throw Error("output: an output named '" + name + "' already exists");
  Node n{OpKind::Output, node(x.src).dtype, x.view.shape(), {x}};
  n.name = name;
  return add(std::move(n));
}

NodeId Graph::constant(float value) {
  Node n{OpKind::Constant, DType::F32, {}, {}};
  n.constant = value;
  return add(std::move(n));
}

NodeId Graph::iota(const Expr& expr, const Expr& count) {
  Node n{OpKind::Iota, DType::I32, {count}, {}};
  n.iota_expr = expr;
  return add(std::move(n));
}

NodeId Graph::cast(Edge x, DType to) {
  return add(Node{OpKind::Cast, to, x.view.shape(), {x}});
}

NodeId Graph::unary(OpKind op, Edge x) {
  LM_ASSERT(is_unary(op), std::string(op_name(op)) + " is not a unary op");
  DType t = node(x.src).dtype;
  if (!is_float(t))
    throw Error(std::string(op_name(op)) + ": needs a float input, got " + dtype_name(t) + "; cast it first");
  return add(Node{op, t, x.view.shape(), {x}});
}

static void check_same_shape(const char* what, const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (!provably_equal(a, b)) throw Error(std::string(what) + ": shape mismatch: " + to_string(a) + " vs " + to_string(b));
}

NodeId Graph::binary(OpKind op, Edge a, Edge b) {
  LM_ASSERT(is_binary(op), std::string(op_name(op)) + " is not a binary op");
  check_same_shape(op_name(op), a.view.shape(), b.view.shape());
  DType t = node(a.src).dtype;
  if (op == OpKind::Mod && t == DType::Bool) throw Error("Mod: not defined on bool operands");
  DType out = op == OpKind::LessThan ? DType::Bool : t;
  return add(Node{op, out, a.view.shape(), {a, b}});
}

NodeId Graph::reduce(OpKind op, Edge x, size_t axis) {
  LM_ASSERT(is_reduce(op), std::string(op_name(op)) + " is not a reduction");
  std::vector<Expr> shape = x.view.shape();
  if (axis >= shape.size())
    throw Error(std::string(op_name(op)) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                to_string(shape));
  DType t = node(x.src).dtype;
  if (op == OpKind::SumReduce && t == DType::Bool) throw Error("SumReduce: cannot sum bool; cast to i32 first");
  shape.erase(shape.begin() + axis);
  Node n{op, t, shape, {x}};
  n.axis = axis;
  return add(std::move(n));
}

NodeId Graph::gather(Edge idx, Edge data) {
  if (node(idx.src).dtype != DType::I32)
    throw Error(std::string("Gather: indices must be i32, got ") + dtype_name(node(idx.src).dtype));
  return add(Node{OpKind::Gather, node(data.src).dtype, idx.view.shape(), {idx, data}});
}

NodeId Graph::scatter(Edge dest, Edge idx, Edge src) {
  if (node(idx.src).dtype != DType::I32)
    throw Error(std::string("Scatter: indices must be i32, got ") + dtype_name(node(idx.src).dtype));
  if (node(dest.src).dtype != node(src.src).dtype)
    throw Error(std::string("Scatter: dest is ") + dtype_name(node(dest.src).dtype) + " but src is " +
                dtype_name(node(src.src).dtype));
  check_same_shape("Scatter (indices vs source)", idx.view.shape(), src.view.shape());
  return add(Node{OpKind::Scatter, node(dest.src).dtype, dest.view.shape(), {dest, idx, src}});
}

NodeId Graph::kernel(const std::string& name, std::vector<Edge> inputs, DType dtype, std::vector<Expr> shape,
                     size_t axis, float param, std::vector<int64_t> code) {
  if (name.empty()) throw Error("kernel: a name is required");
  Node n{OpKind::Kernel, dtype, std::move(shape), std::move(inputs)};
  n.kernel = name;
  n.code = std::move(code);
  n.axis = axis;
  n.constant = param;
  return add(std::move(n));
}

NodeId Graph::add_like(const Node& n, std::vector<Edge> in) {
  switch (n.op) {
    case OpKind::Kernel: return kernel(n.kernel, std::move(in), n.dtype, n.shape, n.axis, n.constant, n.code);
    case OpKind::Input: return input(n.name, n.dtype, n.shape);
    case OpKind::Output: return output(n.name, in.at(0));
    case OpKind::Constant: return constant(n.constant);
    case OpKind::Iota: return iota(n.iota_expr, n.shape.at(0));
    case OpKind::Cast: return cast(in.at(0), n.dtype);
    case OpKind::SumReduce: case OpKind::MaxReduce: return reduce(n.op, in.at(0), n.axis);
    case OpKind::Gather: return gather(in.at(0), in.at(1));
    case OpKind::Scatter: return scatter(in.at(0), in.at(1), in.at(2));
    default: break;
  }
  if (is_unary(n.op)) return unary(n.op, in.at(0));
  return binary(n.op, in.at(0), in.at(1));
}

std::vector<NodeId> Graph::outputs() const {
  std::vector<NodeId> r;
  for (NodeId i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].op == OpKind::Output) r.push_back(i);
  return r;
}

std::vector<NodeId> Graph::inputs() const {
  std::vector<NodeId> r;
  for (NodeId i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].op == OpKind::Input) r.push_back(i);
  return r;
}

static NodeId find_named(const std::vector<Node>& nodes, OpKind op, const std::string& name, const char* what) {
  std::vector<std::string> all;
  for (NodeId i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != op) continue;
    if (nodes[i].name == name) return i;
    all.push_back(nodes[i].name);
  }
  throw Error(std::string("no ") + what + " named '" + name + "'; the graph has: " + names(all));
}

NodeId Graph::find_input(const std::string& name) const { return find_named(nodes_, OpKind::Input, name, "input"); }
NodeId Graph::find_output(const std::string& name) const { return find_named(nodes_, OpKind::Output, name, "output"); }

std::vector<std::string> node_dims(const Node& n) {
  std::set<std::string> all;
  auto add_expr = [&](const Expr& e) {
    for (auto& d : e.dims()) all.insert(d);
  };
  for (const Expr& d : n.shape) add_expr(d);
  if (n.op == OpKind::Iota) add_expr(n.iota_expr);
  for (const Edge& e : n.inputs)
    for (const ViewLayer& l : e.view.layers()) {
      for (const Expr& d : l.shape) add_expr(d);
      for (const Expr& d : l.strides) add_expr(d);
      for (const Expr& d : l.mask_lo) add_expr(d);
      for (const Expr& d : l.mask_hi) add_expr(d);
      add_expr(l.offset);
    }
  return {all.begin(), all.end()};
}

std::vector<std::string> Graph::dims() const {
  std::set<std::string> all;
  for (const Node& n : nodes_)
    for (std::string& d : node_dims(n)) all.insert(std::move(d));
  return {all.begin(), all.end()};
}

std::vector<NodeId> Graph::topo_order() const {
  // Iterative DFS from every output; post-order gives producers first.
  std::vector<uint8_t> state(nodes_.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<NodeId> order;
  for (NodeId root : outputs()) {
    std::vector<std::pair<NodeId, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      if (state[id] == 2) { stack.pop_back(); continue; }
      state[id] = 1;
      const Node& n = nodes_[id];
      if (next < n.inputs.size()) {
        NodeId child = n.inputs[next++].src;
        LM_ASSERT(state[child] != 1, "the graph has a cycle");
        if (state[child] == 0) stack.push_back({child, 0});
        continue;
      }
      state[id] = 2;
      order.push_back(id);
      stack.pop_back();
    }
  }
  return order;
}

std::vector<NodeId> Graph::remove_dead() {
  std::vector<NodeId> order = topo_order();
  std::vector<NodeId> remap(nodes_.size(), UINT32_MAX);
  std::vector<Node> kept;
  kept.reserve(order.size());
  for (NodeId old : order) {
    remap[old] = static_cast<NodeId>(kept.size());
    Node n = nodes_[old];
    for (Edge& e : n.inputs) e.src = remap[e.src];
    kept.push_back(std::move(n));
  }
  nodes_ = std::move(kept);
  return remap;
}

bool scatter_can_update_input(const Graph& g, const Node& n) {
  if (n.op != OpKind::Scatter) return false;
  const Edge& dest = n.inputs[0];
  const Node& src = g.node(dest.src);
  return src.op == OpKind::Input && dest.view.is_contiguous() && src.dtype == n.dtype && provably_equal(dest.view.shape(), src.shape);
}

}  // namespace luminal
