// The Tensor handle, graph plumbing shared by all frontend ops, broadcasting and promotion.
#include "frontend/tensor.h"

#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

Tensor::Tensor(Graph* g, NodeId node, View view) : g_(g), node_(node), view_(std::move(view)) {}

Tensor Tensor::of(Graph* g, NodeId node) { return Tensor(g, node, View::contiguous(g->node(node).shape)); }

DType Tensor::dtype() const {
  LM_ASSERT(g_, "dtype() of an empty Tensor");
  return g_->node(node_).dtype;
}

Expr Tensor::dim(int axis) const { return shape()[fe::norm_axis(axis, rank(), "dim")]; }

Tensor Tensor::output(const std::string& name) const {
  g_->output(name, edge());
  return *this;
}

Tensor Tensor::reshape(const Shape& s) const { return luminal::reshape(*this, s); }
Tensor Tensor::permute(const std::vector<int>& a) const { return luminal::permute(*this, a); }
Tensor Tensor::transpose(int a, int b) const { return luminal::transpose(*this, a, b); }
Tensor Tensor::unsqueeze(int a) const { return luminal::unsqueeze(*this, a); }
Tensor Tensor::squeeze(int a) const { return luminal::squeeze(*this, a); }
Tensor Tensor::expand(const Shape& s) const { return luminal::expand(*this, s); }
Tensor Tensor::slice(int axis, Expr start, Expr end, int64_t step) const {
  return luminal::slice(*this, axis, start, end, step);
}
Tensor Tensor::cast(DType to) const { return luminal::cast(*this, to); }
Tensor Tensor::sum(const std::vector<int>& a, bool k) const { return luminal::sum(*this, a, k); }
Tensor Tensor::mean(const std::vector<int>& a, bool k) const { return luminal::mean(*this, a, k); }
Tensor Tensor::max(const std::vector<int>& a, bool k) const { return luminal::max(*this, a, k); }

namespace fe {

size_t norm_axis(int axis, size_t rank, const char* op) {
  int r = static_cast<int>(rank);
  if (axis < -r || axis >= r)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                std::to_string(rank) + " (valid: " + std::to_string(-r) + ".." + std::to_string(r - 1) + ")");
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

std::vector<size_t> norm_axes(const std::vector<int>& axes, size_t rank, const char* op) {
  std::vector<size_t> r;
  for (int a : axes) {
    size_t n = norm_axis(a, rank, op);
    if (std::find(r.begin(), r.end(), n) != r.end())
      throw Error(std::string(op) + ": axis " + std::to_string(a) + " is given twice");
    r.push_back(n);
  }
  return r;
}

Graph& graph_of(const Tensor& a, const Tensor& b, const char* op) {
  if (!a.valid() || !b.valid()) throw Error(std::string(op) + ": an operand is an empty Tensor");
  if (a.graph() != b.graph()) throw Error(std::string(op) + ": operands belong to different graphs");
  return *a.graph();
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    Expr x = i < n - a.size() ? Expr(1) : a[i - (n - a.size())];
    Expr y = i < n - b.size() ? Expr(1) : b[i - (n - b.size())];
    if (provably_equal(x, y) || y.is_const(1)) r[i] = x;
    else if (x.is_const(1)) r[i] = y;
    else
      throw Error(std::string(op) + ": shape mismatch: " + to_string(a) + " and " + to_string(b) +
                  " cannot be broadcast together (dim " + std::to_string(i) + ": " + x.to_string() + " vs " +
                  y.to_string() + ")");
  }
  return r;
}

static int rank_of(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::I32: return 1;
    case DType::F16: case DType::BF16: return 2;
    case DType::F32: return 3;
  }
  return 3;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (rank_of(a) == 2 && rank_of(b) == 2) return DType::F32;  // f16 with bf16
  return rank_of(a) > rank_of(b) ? a : b;
}

DType float_of(DType t) { return is_float(t) ? t : DType::F32; }

Tensor prim_unary(OpKind op, const Tensor& x) { return Tensor::of(x.graph(), x.graph()->unary(op, x.edge())); }

Tensor prim_binary(OpKind op, const Tensor& a, const Tensor& b) {
  Graph& g = graph_of(a, b, op_name(op));
  return Tensor::of(&g, g.binary(op, a.edge(), b.edge()));
}

Tensor prim_reduce(OpKind op, const Tensor& x, size_t axis) {
  return Tensor::of(x.graph(), x.graph()->reduce(op, x.edge(), axis));
}

std::pair<Tensor, Tensor> align(const Tensor& a, const Tensor& b, const char* op) {
  graph_of(a, b, op);
  Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  DType t = promote(a.dtype(), b.dtype());
  return {broadcast_to(cast(a, t), s), broadcast_to(cast(b, t), s)};
}

Tensor to_bool(const Tensor& x) { return cast(x, DType::Bool); }
Tensor to_float(const Tensor& x) { return cast(x, float_of(x.dtype())); }

Tensor pad_view(const Tensor& x, size_t axis, const Expr& before, const Expr& after, double value) {
  Tensor src = x.view().can_pad_with(static_cast<float>(value)) ? x : contiguous(x);
  return Tensor(src.graph(), src.node(), src.view().pad(axis, before, after, static_cast<float>(value)));
}

Tensor coordinate(Graph& g, const Shape& shape, size_t axis) {
  // A broadcast view of one iota along the axis: n elements, not prod(shape).
  Shape one(shape.size(), Expr(1));
  one[axis] = shape[axis];
  return broadcast_to(reshape(iota(g, Expr::index(), shape[axis]), one), shape);
}

}  // namespace fe
}  // namespace luminal
