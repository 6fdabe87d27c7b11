// Sorting by rank counting: an element's position is the number of elements that must come
// before it (smaller ones, plus equal ones at lower indices, which makes it stable). O(n^2)
// comparisons along the axis; one Scatter places each index at its position.
#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

// a sorts before b (NaN sorts after every number, as in torch).
static Tensor before(const Tensor& a, const Tensor& b, bool descending) {
  Tensor r = descending ? gt(a, b) : lt(a, b);
  if (is_float(a.dtype())) {
    Tensor na = isnan(a), nb = isnan(b);
    r = descending ? logical_or(r, logical_and(na, logical_not(nb))) : logical_or(r, logical_and(logical_not(na), nb));
  }
  return r;
}

static Tensor same(const Tensor& a, const Tensor& b) {
  Tensor r = eq(a, b);
  return is_float(a.dtype()) ? logical_or(r, logical_and(isnan(a), isnan(b))) : r;
}

Tensor argsort(const Tensor& x, int axis, bool descending) {
  size_t a = fe::norm_axis(axis, x.rank(), "argsort");
  int last = static_cast<int>(x.rank()) - 1;
  Tensor t = transpose(x, static_cast<int>(a), last);  // sort along the last axis
  Expr n = t.dim(-1);
  Graph& g = *x.graph();
  Tensor xi = unsqueeze(t, -1);  // [..., n_i, 1]
  Tensor xj = unsqueeze(t, -2);  // [..., 1, n_j]
  Tensor j_lt_i = reshape(tril_mask(g, n, n, -1), {n, n});  // [i, j]: j < i
  Tensor precedes = logical_or(before(xj, xi, descending), logical_and(same(xj, xi), j_lt_i));
  Tensor rank = sum(cast(precedes, DType::I32), {-1});  // [..., n]
  // out[row, rank[row, i]] = i, with the flat index row*n + rank
  Expr z = Expr::index();
  Tensor row_base = reshape(iota(g, (z / n) * n, product(rank.shape())), rank.shape());
  Tensor flat = rank + row_base;
  Tensor positions = fe::coordinate(g, rank.shape(), rank.rank() - 1);
  Tensor dest = zeros(g, rank.shape(), DType::I32);
  Tensor order = Tensor::of(&g, g.scatter(dest.edge(), flat.edge(), positions.edge()));
  return transpose(order, static_cast<int>(a), last);
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int axis, bool descending) {
  Tensor idx = argsort(x, axis, descending);
  return {gather(x, axis, idx), idx};
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int axis, bool largest) {
  size_t a = fe::norm_axis(axis, x.rank(), "topk");
  auto n = x.shape()[a].as_const();
  if (k < 0 || (n && k > *n))
    throw Error("topk: k = " + std::to_string(k) + " is out of range for axis " + std::to_string(a) + " of size " +
                x.shape()[a].to_string());
  auto [values, indices] = sort(x, axis, largest);
  return {slice(values, axis, 0, k), slice(indices, axis, 0, k)};
}

}  // namespace luminal
