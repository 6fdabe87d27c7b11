// Data-dependent indexing: gather, scatter, index_select, embedding. Each computes a flat
// logical index into the source and uses the Gather / Scatter primitive once.
#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

static Tensor as_index(const Tensor& idx, const char* op) {
  if (is_float(idx.dtype()))
    throw Error(std::string(op) + ": indices must be integers, got " + dtype_name(idx.dtype()));
  return cast(idx, DType::I32);
}

// Flat logical index into x for every element of `index` (x's coordinates, with the one on
// `axis` replaced by the index value). Out-of-range index values give -1, which Gather reads
// as 0 and Scatter skips, instead of wrapping into a neighbouring row.
static Tensor flat_index(const Tensor& x, size_t axis, const Tensor& index, const char* op) {
  if (index.rank() != x.rank())
    throw Error(std::string(op) + ": index has shape " + to_string(index.shape()) + " but the tensor has shape " +
                to_string(x.shape()) + "; they need the same rank");
  Graph& g = *x.graph();
  std::vector<Expr> strides = contiguous_strides(x.shape());
  Tensor flat = index * constant(g, 0, DType::I32);
  for (size_t d = 0; d < x.rank(); ++d) {
    Tensor coord = d == axis ? index : fe::coordinate(g, index.shape(), d);
    Tensor stride = reshape(iota(g, strides[d], 1), {});
    flat = flat + coord * stride;
  }
  Tensor n = reshape(iota(g, x.shape()[axis], 1), {});
  Tensor bad = logical_or(lt(index, constant(g, 0, DType::I32)), logical_not(lt(index, n)));
  return flat + cast(bad, DType::I32) * (flat * -1 - 1);  // flat -> -1 where bad
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  fe::graph_of(x, index, "gather");
  size_t a = fe::norm_axis(axis, x.rank(), "gather");
  Tensor idx = flat_index(x, a, as_index(index, "gather"), "gather");
  Graph& g = *x.graph();
  return Tensor::of(&g, g.gather(idx.edge(), x.edge()));
}

Tensor scatter(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  fe::graph_of(x, index, "scatter");
  fe::graph_of(x, src, "scatter");
  size_t a = fe::norm_axis(axis, x.rank(), "scatter");
  Tensor idx = as_index(index, "scatter");
  if (src.rank() != idx.rank())
    throw Error("scatter: src has shape " + to_string(src.shape()) + " but index has shape " + to_string(idx.shape()));
  // torch reads src at the index's coordinates, so src may be larger than index.
  Tensor s = cast(src, x.dtype());
  for (size_t d = 0; d < idx.rank(); ++d)
    if (!provably_equal(s.shape()[d], idx.shape()[d])) s = slice(s, static_cast<int>(d), 0, idx.shape()[d]);
  Tensor flat = flat_index(x, a, idx, "scatter");
  Graph& g = *x.graph();
  return Tensor::of(&g, g.scatter(x.edge(), flat.edge(), s.edge()));
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  if (index.rank() != 1) throw Error("index_select: index must be 1-D, got shape " + to_string(index.shape()));
  size_t a = fe::norm_axis(axis, x.rank(), "index_select");
  Shape out = x.shape();
  out[a] = index.shape()[0];
  Shape along(x.rank(), Expr(1));
  along[a] = index.shape()[0];
  Tensor full_index = broadcast_to(reshape(as_index(index, "index_select"), along), out);
  return gather(x, static_cast<int>(a), full_index);
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (weight.rank() != 2) throw Error("embedding: weight must be [vocab, dim], got " + to_string(weight.shape()));
  Tensor rows = index_select(weight, 0, reshape(ids, {ids.numel()}));
  Shape out = ids.shape();
  out.push_back(weight.shape()[1]);
  return reshape(rows, out);
}

}  // namespace luminal
