// Movement ops: views of the same node (no copies), plus concat/stack which add one Add per
// extra input.
#include <climits>

#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

using fe::norm_axis;

static Tensor with_view(const Tensor& x, View v) { return Tensor(x.graph(), x.node(), std::move(v)); }

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape s = shape;
  int infer = -1;
  Expr known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_const(-1)) {
      if (infer >= 0) throw Error("reshape: only one dim can be -1 in " + to_string(shape));
      infer = static_cast<int>(i);
    } else {
      known = known * s[i];
    }
  }
  if (infer >= 0) {
    Expr n = x.numel();
    if (!(n % known).is_const(0))
      throw Error("reshape: cannot reshape " + to_string(x.shape()) + " to " + to_string(shape) +
                  ": the element count " + n.to_string() + " is not a multiple of " + known.to_string());
    s[infer] = n / known;
  }
  return with_view(x, x.view().reshape(s));
}

Tensor permute(const Tensor& x, const std::vector<int>& axes) {
  if (axes.size() != x.rank())
    throw Error("permute: got " + std::to_string(axes.size()) + " axes for a tensor of shape " + to_string(x.shape()));
  std::vector<size_t> p = fe::norm_axes(axes, x.rank(), "permute");
  return with_view(x, x.view().permute(p));
}

Tensor transpose(const Tensor& x, int a, int b) {
  std::vector<int> p(x.rank());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int>(i);
  std::swap(p[norm_axis(a, x.rank(), "transpose")], p[norm_axis(b, x.rank(), "transpose")]);
  return permute(x, p);
}

Tensor unsqueeze(const Tensor& x, int axis) {
  return with_view(x, x.view().unsqueeze(norm_axis(axis, x.rank() + 1, "unsqueeze")));
}

Tensor squeeze(const Tensor& x, int axis) { return with_view(x, x.view().squeeze(norm_axis(axis, x.rank(), "squeeze"))); }

Tensor squeeze(const Tensor& x) {
  View v = x.view();
  for (size_t d = v.rank(); d-- > 0;)
    if (v.shape()[d].is_const(1)) v = v.squeeze(d);
  return with_view(x, v);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) { return with_view(x, x.view().broadcast_to(shape)); }

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape.size() < x.rank())
    throw Error("expand: target " + to_string(shape) + " has fewer dims than " + to_string(x.shape()));
  Shape s = shape;
  size_t lead = shape.size() - x.rank();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].is_const(-1)) {
      if (i < lead) throw Error("expand: -1 is not allowed for a new leading dim in " + to_string(shape));
      s[i] = x.shape()[i - lead];
    }
  return broadcast_to(x, s);
}

Tensor flatten(const Tensor& x, int start, int end) {
  if (x.rank() == 0) return reshape(x, {1});
  size_t a = norm_axis(start, x.rank(), "flatten"), b = norm_axis(end, x.rank(), "flatten");
  if (a > b) throw Error("flatten: start axis comes after end axis");
  Shape s(x.shape().begin(), x.shape().begin() + a);
  s.push_back(product(Shape(x.shape().begin() + a, x.shape().begin() + b + 1)));
  s.insert(s.end(), x.shape().begin() + b + 1, x.shape().end());
  return reshape(x, s);
}

// Python slice bounds: constant negatives count from the end; constants clamp to the axis.
static Expr clamp_bound(const Expr& b, const Expr& n) {
  auto c = b.as_const();
  if (!c) return b;
  auto nc = n.as_const();
  int64_t v = *c;
  if (v < 0) {
    if (!nc) return max(Expr(0), n + Expr(v));
    v += *nc;
  }
  if (v < 0) v = 0;
  if (nc && v > *nc) v = *nc;
  if (!nc && v == INT64_MAX) return n;
  return Expr(v);
}

Tensor slice(const Tensor& x, int axis, Expr start, Expr end, int64_t step) {
  size_t a = norm_axis(axis, x.rank(), "slice");
  Expr n = x.shape()[a];
  Expr s = clamp_bound(start, n), e = clamp_bound(end, n);
  if (s.is_const() && e.is_const() && e.value() < s.value()) e = s;  // empty, as in Python
  return with_view(x, x.view().slice(a, s, e, step));
}

Tensor narrow(const Tensor& x, int axis, Expr start, Expr length) {
  size_t a = norm_axis(axis, x.rank(), "narrow");
  Expr s = clamp_bound(start, x.shape()[a]);
  return with_view(x, x.view().slice(a, s, s + length, 1));
}

Tensor select(const Tensor& x, int axis, Expr index) {
  size_t a = norm_axis(axis, x.rank(), "select");
  if (auto c = index.as_const(); c && *c < 0) index = x.shape()[a] + Expr(*c);
  return with_view(x, x.view().slice(a, index, index + 1, 1).squeeze(a));
}

Tensor pad(const Tensor& x, const std::vector<std::pair<Expr, Expr>>& pads, double value) {
  if (pads.size() > x.rank())
    throw Error("pad: " + std::to_string(pads.size()) + " axes of padding for a tensor of rank " + std::to_string(x.rank()));
  Tensor r = x;
  for (size_t a = 0; a < pads.size(); ++a) {
    auto [before, after] = pads[a];
    if ((before.is_const() && before.value() < 0) || (after.is_const() && after.value() < 0))
      throw Error("pad: negative padding on axis " + std::to_string(a) + "; use slice to crop");
    if (before.is_const(0) && after.is_const(0)) continue;
    r = fe::pad_view(r, a, before, after, value);
  }
  return r;
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw Error("concat: needs at least one tensor");
  size_t a = norm_axis(axis, xs[0].rank(), "concat");
  DType t = xs[0].dtype();
  for (const Tensor& x : xs) {
    fe::graph_of(xs[0], x, "concat");
    t = fe::promote(t, x.dtype());
    bool ok = x.rank() == xs[0].rank();
    for (size_t d = 0; ok && d < x.rank(); ++d) ok = d == a || provably_equal(x.shape()[d], xs[0].shape()[d]);
    if (!ok)
      throw Error("concat: shape mismatch: " + to_string(xs[0].shape()) + " and " + to_string(x.shape()) +
                  " differ outside axis " + std::to_string(a));
  }
  if (xs.size() == 1) return cast(xs[0], t);
  Expr total = 0;
  for (const Tensor& x : xs) total = total + x.shape()[a];
  // Each input padded to the full length, then summed. Floats pad with -0: x + -0 is x for every
  // x, including -0 (x + +0 would turn -0 into +0).
  double zero = is_float(t) ? -0.0 : 0.0;
  std::optional<Tensor> sum;
  Expr offset = 0;
  for (const Tensor& x : xs) {
    Expr len = x.shape()[a];
    Tensor p = fe::pad_view(cast(x, t), a, offset, total - offset - len, zero);
    sum = sum ? fe::prim_binary(OpKind::Add, *sum, p) : p;
    offset = offset + len;
  }
  return *sum;
}

Tensor stack(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw Error("stack: needs at least one tensor");
  size_t a = norm_axis(axis, xs[0].rank() + 1, "stack");
  std::vector<Tensor> u;
  for (const Tensor& x : xs) u.push_back(unsqueeze(x, static_cast<int>(a)));
  return concat(u, static_cast<int>(a));
}

std::vector<Tensor> split(const Tensor& x, const std::vector<Expr>& sizes, int axis) {
  size_t a = norm_axis(axis, x.rank(), "split");
  Expr total = 0;
  for (const Expr& s : sizes) total = total + s;
  if (!provably_equal(total, x.shape()[a]))
    throw Error("split: sizes add up to " + total.to_string() + " but axis " + std::to_string(a) + " has size " +
                x.shape()[a].to_string());
  std::vector<Tensor> r;
  Expr off = 0;
  for (const Expr& s : sizes) {
    r.push_back(with_view(x, x.view().slice(a, off, off + s, 1)));
    off = off + s;
  }
  return r;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int axis) {
  size_t a = norm_axis(axis, x.rank(), "chunk");
  auto n = x.shape()[a].as_const();
  if (!n) throw Error("chunk: axis " + std::to_string(a) + " has symbolic size " + x.shape()[a].to_string() + "; use split");
  if (chunks < 1) throw Error("chunk: chunks must be >= 1");
  int64_t size = (*n + chunks - 1) / chunks;
  std::vector<Expr> sizes;
  for (int64_t off = 0; off < *n; off += size) sizes.push_back(Expr(std::min(size, *n - off)));
  if (sizes.empty()) sizes.push_back(Expr(0));
  return split(x, sizes, axis);
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& reps) {
  if (reps.size() < x.rank())
    throw Error("repeat: " + std::to_string(reps.size()) + " repeat counts for a tensor of rank " + std::to_string(x.rank()));
  Tensor r = x;
  while (r.rank() < reps.size()) r = unsqueeze(r, 0);
  // [d0, d1, ...] -> [1, d0, 1, d1, ...] -> expand [r0, d0, r1, d1, ...] -> [r0*d0, r1*d1, ...]
  Shape expanded, merged;
  View v = r.view();
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) throw Error("repeat: negative repeat count");
    v = v.unsqueeze(2 * i);
    expanded.push_back(Expr(reps[i]));
    expanded.push_back(r.shape()[i]);
    merged.push_back(Expr(reps[i]) * r.shape()[i]);
  }
  for (size_t i = 0; i < reps.size(); ++i) v = v.expand(2 * i, expanded[2 * i]);
  return with_view(r, v.reshape(merged));
}

Tensor flip(const Tensor& x, const std::vector<int>& axes) {
  View v = x.view();
  for (size_t a : fe::norm_axes(axes, x.rank(), "flip")) v = v.flip(a);
  return with_view(x, v);
}

Tensor unfold(const Tensor& x, int axis, Expr size, int64_t step) {
  return with_view(x, x.view().unfold(norm_axis(axis, x.rank(), "unfold"), size, step));
}

}  // namespace luminal
