#pragma once
// Helpers shared by the frontend's op files. Not part of the public API.
#include <string>
#include <vector>

#include "frontend/ops.h"

namespace luminal::fe {

size_t norm_axis(int axis, size_t rank, const char* op);  // negative axes count from the end
std::vector<size_t> norm_axes(const std::vector<int>& axes, size_t rank, const char* op);
Graph& graph_of(const Tensor& a, const Tensor& b, const char* op);  // both on one graph

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
DType promote(DType a, DType b);
DType float_of(DType t);  // t if float, else f32

// Primitive node builders returning whole-node tensors.
Tensor prim_unary(OpKind op, const Tensor& x);
Tensor prim_binary(OpKind op, const Tensor& a, const Tensor& b);  // same shapes required
Tensor prim_reduce(OpKind op, const Tensor& x, size_t axis);

inline Tensor broadcast_to_like(const Tensor& x, const Tensor& like) { return broadcast_to(x, like.shape()); }

// Both operands broadcast to one shape and promoted to one dtype.
std::pair<Tensor, Tensor> align(const Tensor& a, const Tensor& b, const char* op);
Tensor to_bool(const Tensor& x);
Tensor to_float(const Tensor& x);  // ints and bools become f32

// A view of x with padding value `value`, materialising first when x is already padded with
// a different value.
Tensor pad_view(const Tensor& x, size_t axis, const Expr& before, const Expr& after, double value);

// i32 tensor with the shape `shape` whose element is its coordinate along `axis`.
Tensor coordinate(Graph& g, const Shape& shape, size_t axis);

// Reduces one axis with a product (exact tree for constant lengths).
Tensor prod_axis(const Tensor& x, size_t axis);

}  // namespace luminal::fe
