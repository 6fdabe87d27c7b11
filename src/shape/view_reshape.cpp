// Reshape of a view: in place on the top layer's strides when the dims being merged are
// stride-compatible, otherwise by pushing a new contiguous layer (never a copy).
#include "core/error.h"
#include "shape/view.h"

namespace luminal {
namespace {

// Whether `a` is an exact multiple of `b` (constants or symbolic), so dims can still group.
bool divides(const Expr& b, const Expr& a) { return (a % b).is_const(0); }

struct Dim {
  Expr size, stride;
};

// New strides for `shape` on top of the unmasked dims `old`, or false if they don't line up.
bool restride(const std::vector<Dim>& old, const std::vector<Expr>& shape, std::vector<Expr>& strides) {
  strides.assign(shape.size(), Expr(0));
  size_t i = 0, j = 0;
  while (j < shape.size()) {
    if (shape[j].is_const(1)) { ++j; continue; }
    if (i >= old.size()) return false;
    // Grow a group of old dims [i0, i) and new dims [j0, j) until their sizes agree.
    size_t i0 = i, j0 = j;
    Expr po = old[i++].size, pn = shape[j++];
    while (!provably_equal(po, pn)) {
      if (divides(po, pn) && i < old.size()) {
        po = po * old[i++].size;
      } else if (divides(pn, po) && j < shape.size()) {
        pn = pn * shape[j++];
      } else {
        return false;
      }
    }
    // The old dims of a group must be one strided run (or all broadcast).
    bool all_broadcast = true;
    for (size_t k = i0; k < i; ++k) all_broadcast = all_broadcast && old[k].stride.is_const(0);
    for (size_t k = i0; k + 1 < i && !all_broadcast; ++k)
      if (!provably_equal(old[k].stride, old[k + 1].stride * old[k + 1].size)) return false;
    Expr stride = all_broadcast ? Expr(0) : old[i - 1].stride;
    for (size_t k = j; k-- > j0;) {
      if (shape[k].is_const(1)) continue;
      strides[k] = stride;
      if (!all_broadcast) stride = stride * shape[k];
    }
  }
  return i == old.size();
}

}  // namespace

View reshape_view(const View& v, const std::vector<Expr>& shape) {
  Expr before = v.numel(), after = product(shape);
  if (!provably_equal(before, after))
    throw Error("reshape: cannot reshape " + to_string(v.shape()) + " (" + before.to_string() + " elements) to " +
                to_string(shape) + " (" + after.to_string() + " elements)");
  if (shape == v.shape()) return v;
  const ViewLayer& t = v.layers_.back();
  std::vector<Expr> strides;
  if (!t.masked()) {
    // Merge stride-compatible neighbours first, so [2, 3] -> [3, 2] regroups one run of 6.
    std::vector<Dim> old;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d].is_const(1)) continue;
      Dim cur{t.shape[d], t.strides[d]};
      if (!old.empty()) {
        Dim& prev = old.back();
        bool both_broadcast = prev.stride.is_const(0) && cur.stride.is_const(0);
        if (both_broadcast || provably_equal(prev.stride, cur.stride * cur.size)) {
          prev = {prev.size * cur.size, cur.stride};
          continue;
        }
      }
      old.push_back(cur);
    }
    if (restride(old, shape, strides)) {
      View r = v;
      ViewLayer& nt = r.layers_.back();
      nt.shape = shape;
      nt.strides = strides;
      nt.mask_lo.assign(shape.size(), Expr(0));
      nt.mask_hi = shape;
      return r;
    }
  }
  return v.with_new_layer(shape);
}

}  // namespace luminal
