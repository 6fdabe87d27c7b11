#pragma once
// The tensor frontend: a handle API that builds HLIR graphs. Every op here is composed from the
// primitive ops of graph/op.h; docs/frontend.md says how each one is built.
//
// A Tensor is (graph, node, view): movement ops return a new view of the same node and add no
// node; math ops add nodes. Axes may be negative (counted from the end), as in numpy/torch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace luminal {

using Shape = std::vector<Expr>;

class Tensor {
 public:
  Tensor() = default;
  Tensor(Graph* g, NodeId node, View view);
  static Tensor of(Graph* g, NodeId node);  // the whole output of `node`, contiguous

  Graph* graph() const { return g_; }
  NodeId node() const { return node_; }
  const View& view() const { return view_; }
  Edge edge() const { return {node_, view_}; }
  DType dtype() const;
  const Shape& shape() const { return view_.shape(); }
  size_t rank() const { return view_.rank(); }
  Expr dim(int axis) const;
  Expr numel() const { return view_.numel(); }
  bool valid() const { return g_ != nullptr; }

  // Marks this tensor as a graph output named `name`; returns *this for chaining.
  Tensor output(const std::string& name) const;

  // Common movement and reductions as methods, for chaining; the free functions are the same.
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const std::vector<int>& axes) const;
  Tensor transpose(int a, int b) const;
  Tensor unsqueeze(int axis) const;
  Tensor squeeze(int axis) const;
  Tensor expand(const Shape& shape) const;
  Tensor slice(int axis, Expr start, Expr end, int64_t step = 1) const;
  Tensor cast(DType to) const;
  Tensor sum(const std::vector<int>& axes, bool keepdim = false) const;
  Tensor mean(const std::vector<int>& axes, bool keepdim = false) const;
  Tensor max(const std::vector<int>& axes, bool keepdim = false) const;

 private:
  Graph* g_ = nullptr;
  NodeId node_ = 0;
  View view_;
};

}  // namespace luminal
