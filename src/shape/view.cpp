#include "shape/view.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace luminal {

std::vector<Expr> contiguous_strides(const std::vector<Expr>& shape) {
  std::vector<Expr> s(shape.size());
  Expr acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc = acc * shape[i];
  }
  return s;
}

ViewLayer ViewLayer::contiguous(const std::vector<Expr>& shape) {
  ViewLayer l;
  l.shape = shape;
  l.strides = contiguous_strides(shape);
  l.offset = 0;
  l.mask_lo.assign(shape.size(), Expr(0));
  l.mask_hi = shape;
  return l;
}

void ViewLayer::insert_dim(size_t axis, const Expr& size, const Expr& stride) {
  shape.insert(shape.begin() + axis, size);
  strides.insert(strides.begin() + axis, stride);
  mask_lo.insert(mask_lo.begin() + axis, Expr(0));
  mask_hi.insert(mask_hi.begin() + axis, size);
}

void ViewLayer::erase_dim(size_t axis) {
  shape.erase(shape.begin() + axis);
  strides.erase(strides.begin() + axis);
  mask_lo.erase(mask_lo.begin() + axis);
  mask_hi.erase(mask_hi.begin() + axis);
}

bool ViewLayer::dim_masked(size_t d) const { return !mask_lo[d].is_const(0) || mask_hi[d] != shape[d]; }

bool ViewLayer::masked() const {
  for (size_t d = 0; d < shape.size(); ++d)
    if (dim_masked(d)) return true;
  return false;
}

bool ViewLayer::operator==(const ViewLayer& o) const {
  return shape == o.shape && strides == o.strides && offset == o.offset && mask_lo == o.mask_lo &&
         mask_hi == o.mask_hi;
}

View View::contiguous(std::vector<Expr> shape) { return View({ViewLayer::contiguous(shape)}, 0.0f); }

static void check_axis(size_t axis, size_t rank, const char* what) {
  if (axis >= rank)
    throw Error(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
}

View View::permute(const std::vector<size_t>& perm) const {
  if (perm.size() != rank())
    throw Error("permute: got " + std::to_string(perm.size()) + " axes for a tensor of rank " + std::to_string(rank()));
  std::vector<bool> seen(rank(), false);
  for (size_t p : perm) {
    check_axis(p, rank(), "permute");
    if (seen[p]) throw Error("permute: axis " + std::to_string(p) + " appears twice");
    seen[p] = true;
  }
  View v = *this;
  const ViewLayer& old = layers_.back();
  ViewLayer& t = v.top();
  for (size_t i = 0; i < perm.size(); ++i) {
    t.shape[i] = old.shape[perm[i]];
    t.strides[i] = old.strides[perm[i]];
    t.mask_lo[i] = old.mask_lo[perm[i]];
    t.mask_hi[i] = old.mask_hi[perm[i]];
  }
  return v;
}

View View::unsqueeze(size_t axis) const {
  if (axis > rank()) check_axis(axis, rank() + 1, "unsqueeze");
  View v = *this;
  ViewLayer& t = v.top();
  t.insert_dim(axis, Expr(1), Expr(0));
  return v;
}

View View::squeeze(size_t axis) const {
  check_axis(axis, rank(), "squeeze");
  if (!shape()[axis].is_const(1))
    throw Error("squeeze: axis " + std::to_string(axis) + " has size " + shape()[axis].to_string() + ", not 1");
  View v = layers_.back().dim_masked(axis) ? with_new_layer(shape()) : *this;
  ViewLayer& t = v.top();
  t.erase_dim(axis);
  return v;
}

View View::expand(size_t axis, const Expr& size) const {
  check_axis(axis, rank(), "expand");
  if (shape()[axis] == size) return *this;
  if (!shape()[axis].is_const(1))
    throw Error("expand: axis " + std::to_string(axis) + " has size " + shape()[axis].to_string() +
                "; only size-1 dims can be broadcast to " + size.to_string());
  View v = *this;
  ViewLayer& t = v.top();
  t.shape[axis] = size;
  t.strides[axis] = 0;
  // A size-1 dim's mask is either all-valid [0,1) or empty; scaling keeps that meaning.
  t.mask_lo[axis] = t.mask_lo[axis] * size;
  t.mask_hi[axis] = t.mask_hi[axis] * size;
  return v;
}

View View::broadcast_to(const std::vector<Expr>& target) const {
  if (target.size() < rank())
    throw Error("broadcast: cannot broadcast shape " + luminal::to_string(shape()) + " to " + luminal::to_string(target));
  View v = *this;
  while (v.rank() < target.size()) v = v.unsqueeze(0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (v.shape()[i] == target[i] || provably_equal(v.shape()[i], target[i])) continue;
    if (!v.shape()[i].is_const(1))
      throw Error("broadcast: cannot broadcast shape " + luminal::to_string(shape()) + " to " +
                  luminal::to_string(target) + " (dim " + std::to_string(i) + ")");
    v = v.expand(i, target[i]);
  }
  return v;
}

View View::reshape(const std::vector<Expr>& new_shape) const { return reshape_view(*this, new_shape); }

View View::with_new_layer(const std::vector<Expr>& shape) const {
  View v = *this;
  v.layers_.push_back(ViewLayer::contiguous(shape));
  return v;
}

View View::slice(size_t axis, const Expr& start, const Expr& end, int64_t step) const {
  check_axis(axis, rank(), "slice");
  if (step < 1) throw Error("slice: step must be >= 1 (got " + std::to_string(step) + "); use flip for reversal");
  Expr n = shape()[axis];
  auto s = start.as_const(), e = end.as_const(), nc = n.as_const();
  if ((s && *s < 0) || (s && e && *e < *s) || (e && nc && *e > *nc))
    throw Error("slice: range [" + start.to_string() + ", " + end.to_string() + ") is not within axis " +
                std::to_string(axis) + " of size " + n.to_string());
  View v = *this;
  ViewLayer& t = v.top();
  Expr new_size = ceil_div(end - start, Expr(step));
  t.offset = t.offset + start * t.strides[axis];
  t.strides[axis] = t.strides[axis] * Expr(step);
  // old coord c = start + step*c'; valid where lo <= c < hi
  Expr lo = max(Expr(0), ceil_div(t.mask_lo[axis] - start, Expr(step)));
  Expr hi = min(new_size, max(Expr(0), ceil_div(t.mask_hi[axis] - start, Expr(step))));
  t.shape[axis] = new_size;
  t.mask_lo[axis] = lo;
  t.mask_hi[axis] = max(lo, hi);
  return v;
}

bool View::can_pad_with(float value) const {
  if (!has_mask()) return true;
  return std::memcmp(&value, &pad_value_, sizeof(float)) == 0 || (std::isnan(value) && std::isnan(pad_value_));
}

View View::pad(size_t axis, const Expr& before, const Expr& after, float value) const {
  check_axis(axis, rank(), "pad");
  if (!can_pad_with(value))
    throw Error("pad: this view is already padded with " + std::to_string(pad_value_) +
                " and cannot also pad with " + std::to_string(value) + "; materialise it first");
  View v = *this;
  v.pad_value_ = value;
  ViewLayer& t = v.top();
  t.offset = t.offset - before * t.strides[axis];
  t.mask_lo[axis] = t.mask_lo[axis] + before;
  t.mask_hi[axis] = t.mask_hi[axis] + before;
  t.shape[axis] = t.shape[axis] + before + after;
  return v;
}

View View::flip(size_t axis) const {
  check_axis(axis, rank(), "flip");
  View v = *this;
  ViewLayer& t = v.top();
  Expr n = t.shape[axis];
  t.offset = t.offset + (n - 1) * t.strides[axis];
  t.strides[axis] = -t.strides[axis];
  Expr lo = n - t.mask_hi[axis], hi = n - t.mask_lo[axis];
  t.mask_lo[axis] = lo;
  t.mask_hi[axis] = hi;
  return v;
}

View View::unfold(size_t axis, const Expr& size, int64_t step) const {
  check_axis(axis, rank(), "unfold");
  if (step < 1) throw Error("unfold: step must be >= 1");
  auto sc = size.as_const(), nc = shape()[axis].as_const();
  if ((sc && *sc < 1) || (sc && nc && *sc > *nc))
    throw Error("unfold: window " + size.to_string() + " does not fit axis " + std::to_string(axis) +
                " of size " + shape()[axis].to_string());
  View v = layers_.back().dim_masked(axis) ? with_new_layer(shape()) : *this;
  ViewLayer& t = v.top();
  Expr stride = t.strides[axis];
  t.shape[axis] = (t.shape[axis] - size) / Expr(step) + 1;
  t.strides[axis] = stride * Expr(step);
  t.mask_lo[axis] = 0;
  t.mask_hi[axis] = t.shape[axis];
  t.insert_dim(t.shape.size(), size, stride);
  return v;
}

View View::from_layers(std::vector<ViewLayer> layers, float pad_value) {
  if (layers.empty()) throw Error("view: needs at least one layer");
  for (const ViewLayer& l : layers) {
    size_t r = l.shape.size();
    if (l.strides.size() != r || l.mask_lo.size() != r || l.mask_hi.size() != r)
      throw Error("view: a layer's shape, strides and mask have different ranks");
  }
  return View(std::move(layers), pad_value);
}

std::optional<View> View::compose(const View& outer) const {
  if (has_mask() && outer.has_mask() && !outer.can_pad_with(pad_value_)) return std::nullopt;
  if (is_contiguous()) return outer;  // the flat logical space is the buffer itself
  if (outer.is_contiguous()) return reshape(outer.shape());
  View v = *this;
  v.layers_.insert(v.layers_.end(), outer.layers_.begin(), outer.layers_.end());
  if (outer.has_mask()) v.pad_value_ = outer.pad_value_;
  return v;
}

View View::drop_broadcast_dim(size_t axis) const {
  check_axis(axis, rank(), "drop_broadcast_dim");
  const ViewLayer& t = layers_.back();
  if (!t.strides[axis].is_const(0) || t.dim_masked(axis))
    throw Error("drop_broadcast_dim: axis " + std::to_string(axis) + " of " + to_string() + " is not a broadcast");
  View v = *this;
  v.top().erase_dim(axis);
  return v;
}

bool View::is_reduced_broadcast(size_t axis) const {
  if (layers_.size() != 1 || axis >= rank()) return false;
  const ViewLayer& t = layers_.back();
  if (!t.offset.is_const(0) || t.masked()) return false;
  if (!t.strides[axis].is_const(0) && !t.shape[axis].is_const(1)) return false;
  std::vector<Expr> reduced = t.shape;
  reduced.erase(reduced.begin() + axis);
  std::vector<Expr> want = contiguous_strides(reduced);
  for (size_t d = 0, r = 0; d < t.shape.size(); ++d) {
    if (d == axis) continue;
    if (!t.shape[d].is_const(1) && !provably_equal(t.strides[d], want[r])) return false;
    ++r;
  }
  return true;
}

bool View::has_mask() const {
  for (const ViewLayer& l : layers_)
    if (l.masked()) return true;
  return false;
}

bool View::is_contiguous() const {
  if (layers_.size() != 1) return false;
  const ViewLayer& t = layers_.back();
  if (!t.offset.is_const(0) || t.masked()) return false;
  std::vector<Expr> want = contiguous_strides(t.shape);
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (!t.shape[d].is_const(1) && !provably_equal(t.strides[d], want[d])) return false;
  return true;
}

static IndexExprs apply_layer(const ViewLayer& l, const std::vector<Expr>& coords) {
  Expr idx = l.offset;
  Expr valid = 1;
  for (size_t d = 0; d < l.shape.size(); ++d) {
    idx = idx + coords[d] * l.strides[d];
    if (l.dim_masked(d)) valid = logical_and(valid, logical_and(ge(coords[d], l.mask_lo[d]), lt(coords[d], l.mask_hi[d])));
  }
  return {idx, valid};
}

static std::vector<Expr> unflatten(const Expr& flat, const std::vector<Expr>& shape) {
  std::vector<Expr> coords(shape.size());
  Expr inner = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    // A size-0 dim of a lower layer is only reached through padding (every read there is
    // invalid); divide by 1 instead so the unused index stays defined.
    Expr size = shape[d].is_const(0) ? Expr(1) : shape[d];
    coords[d] = d == 0 ? flat / inner : (flat / inner) % size;
    inner = inner * size;
  }
  return coords;
}

IndexExprs View::index(const std::vector<Expr>& coords) const {
  if (coords.size() != rank())
    throw Error("view index: got " + std::to_string(coords.size()) + " coordinates for rank " + std::to_string(rank()));
  IndexExprs r = apply_layer(layers_.back(), coords);
  for (size_t i = layers_.size() - 1; i-- > 0;) {
    IndexExprs below = apply_layer(layers_[i], unflatten(r.index, layers_[i].shape));
    r.index = below.index;
    r.valid = logical_and(r.valid, below.valid);
  }
  return r;
}

IndexExprs View::flat_index() const { return index(unflatten(Expr::index(), shape())); }

std::string View::to_string() const {
  std::string s;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const ViewLayer& l = layers_[i];
    s += (i ? " <- " : "") + std::string("{shape ") + luminal::to_string(l.shape) + " strides " +
         luminal::to_string(l.strides);
    if (!l.offset.is_const(0)) s += " offset " + l.offset.to_string();
    if (l.masked()) {
      s += " mask";
      for (size_t d = 0; d < l.shape.size(); ++d)
        s += " " + l.mask_lo[d].to_string() + ".." + l.mask_hi[d].to_string();
    }
    s += "}";
  }
  if (has_mask()) s += " pad " + std::to_string(pad_value_);
  return s;
}

uint64_t View::hash() const {
  uint64_t h = 0x51ed2701u;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x100000001b3ull + (h >> 29); };
  for (const ViewLayer& l : layers_) {
    mix(l.shape.size());
    for (size_t d = 0; d < l.shape.size(); ++d) {
      mix(l.shape[d].hash());
      mix(l.strides[d].hash());
      mix(l.mask_lo[d].hash());
      mix(l.mask_hi[d].hash());
    }
    mix(l.offset.hash());
  }
  uint32_t pv;
  std::memcpy(&pv, &pad_value_, 4);
  mix(pv);
  return h;
}

}  // namespace luminal
