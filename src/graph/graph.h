#pragma once
// The HLIR graph: primitive ops whose input edges carry views, with symbolic shapes.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "graph/op.h"
#include "shape/view.h"

namespace luminal {

using NodeId = uint32_t;

struct Edge {
  NodeId src;
  View view;  // how this consumer reads src's contiguous output
};

struct Node {
  OpKind op;
  DType dtype;               // of the output
  std::vector<Expr> shape;   // of the output, which is contiguous
  std::vector<Edge> inputs;
  // Attributes; which ones are meaningful depends on op.
  std::string name;          // Input, Output
  float constant = 0.0f;     // Constant
  Expr iota_expr;            // Iota: element i = iota_expr with the index variable = i
  size_t axis = 0;           // SumReduce, MaxReduce (axis of the input view); kernels
  std::string kernel;        // Kernel: its name (Matmul, Softmax, ...)
  std::vector<int64_t> code; // Kernel: an encoded program (fused kernels, graph/fused_program.h)
};

// The dynamic dims a node itself uses (in its shape, its iota and the views it reads through),
// sorted; Graph::dims() is their union over the graph.
std::vector<std::string> node_dims(const Node& n);


class Graph {
 public:
  // Builders check their inputs (ranks, shapes, dtypes) and throw Error on a mismatch.
  NodeId input(const std::string& name, DType dtype, std::vector<Expr> shape);
  NodeId output(const std::string& name, Edge x);
  NodeId constant(float value);
  NodeId iota(const Expr& expr, const Expr& n);
  NodeId cast(Edge x, DType to);
  NodeId unary(OpKind op, Edge x);
  NodeId binary(OpKind op, Edge a, Edge b);
  NodeId reduce(OpKind op, Edge x, size_t axis);
  NodeId gather(Edge idx, Edge data);
  NodeId scatter(Edge dest, Edge idx, Edge src);
  // An LLIR kernel; its output dtype and shape come from the pattern it replaces.
  NodeId kernel(const std::string& name, std::vector<Edge> inputs, DType dtype, std::vector<Expr> shape,
                size_t axis = 0, float param = 0.0f, std::vector<int64_t> code = {});
  // A node like `n` (same op and attributes) reading `inputs`, checked like the builders.
  NodeId add_like(const Node& n, std::vector<Edge> inputs);

  const Node& node(NodeId id) const { return nodes_.at(id); }
  size_t size() const { return nodes_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<NodeId> outputs() const;                // Output nodes, in creation order
  std::vector<NodeId> inputs() const;                 // Input nodes, in creation order
  NodeId find_input(const std::string& name) const;   // throws Error listing the inputs
  NodeId find_output(const std::string& name) const;  // throws Error listing the outputs
  std::vector<std::string> dims() const;              // dynamic dims used anywhere, sorted

  // Nodes reachable from the outputs, producers before consumers.
  std::vector<NodeId> topo_order() const;
  // Drops nodes no output depends on and renumbers the rest (in topological order).
  // Returns old id -> new id (or UINT32_MAX for removed); NodeIds held elsewhere go stale.
  std::vector<NodeId> remove_dead();

  std::string dump() const;  // one line per node
  std::string to_dot() const;  // Graphviz

 private:
  NodeId add(Node n);
  std::vector<Node> nodes_;
};

// Whether Scatter node `n` may write its updates straight into its destination's buffer: the
// destination is an Input of the same dtype and shape, read through a plain contiguous view.
// A runner does so when nothing else reads that input (the KV cache, updated in place).
bool scatter_can_update_input(const Graph& g, const Node& n);

}  // namespace luminal
