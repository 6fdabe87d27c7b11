// Reductions over sets of axes, composed from SumReduce and MaxReduce.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

namespace {

// Applies `one` to each axis, highest first so the remaining axis numbers stay valid, then
// restores the reduced axes as size 1 if keepdim.
template <class F>
Tensor over_axes(const Tensor& x, const std::vector<int>& axes, bool keepdim, const char* op, F one) {
  std::vector<size_t> a = fe::norm_axes(axes, x.rank(), op);
  std::sort(a.rbegin(), a.rend());
  Tensor r = x;
  for (size_t ax : a) r = one(r, ax);
  if (keepdim) {
    std::sort(a.begin(), a.end());
    for (size_t ax : a) r = unsqueeze(r, static_cast<int>(ax));
  }
  return r;
}

Tensor count_of(const Tensor& x, const std::vector<int>& axes) {  // f32 scalar: elements reduced
  Expr n = 1;
  for (size_t a : fe::norm_axes(axes, x.rank(), "mean")) n = n * x.shape()[a];
  return cast(reshape(iota(*x.graph(), n, 1), {}), DType::F32);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Tensor src = x.dtype() == DType::Bool ? cast(x, DType::I32) : x;
  return over_axes(src, axes, keepdim, "sum",
                   [](const Tensor& t, size_t a) { return fe::prim_reduce(OpKind::SumReduce, t, a); });
}

Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return over_axes(x, axes, keepdim, "max",
                   [](const Tensor& t, size_t a) { return fe::prim_reduce(OpKind::MaxReduce, t, a); });
}

Tensor min(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  if (x.dtype() == DType::Bool) return logical_not(max(logical_not(x), axes, keepdim));
  if (x.dtype() == DType::I32) {
    // -x wraps for INT_MIN; ~x = -x - 1 reverses the order without overflow.
    Tensor inv = x * -1 - 1;
    return max(inv, axes, keepdim) * -1 - 1;
  }
  return neg(max(neg(x), axes, keepdim));
}

Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Tensor xf = fe::to_float(x);
  DType out = xf.dtype();
  Tensor s = sum(cast(xf, DType::F32), axes, keepdim);
  return cast(s / count_of(x, axes), out);
}

Tensor var(const Tensor& x, const std::vector<int>& axes, int64_t correction, bool keepdim) {
  Tensor xf = fe::to_float(x);
  DType out = xf.dtype();
  Tensor x32 = cast(xf, DType::F32);
  Tensor centered = x32 - mean(x32, axes, true);
  Tensor ss = sum(centered * centered, axes, keepdim);
  Tensor n = count_of(x, axes) - static_cast<double>(correction);
  return cast(ss / n, out);
}

Tensor std(const Tensor& x, const std::vector<int>& axes, int64_t correction, bool keepdim) {
  return sqrt(var(x, axes, correction, keepdim));
}

Tensor prod(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Tensor src = x.dtype() == DType::Bool ? cast(x, DType::I32) : x;
  return over_axes(src, axes, keepdim, "prod", [](const Tensor& t, size_t a) { return fe::prod_axis(t, a); });
}

Tensor logsumexp(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Tensor xf = fe::to_float(x);
  DType out = xf.dtype();
  Tensor x32 = cast(xf, DType::F32);
  Tensor m = max(x32, axes, true);
  Tensor m_safe = where(isinf(m), 0.0, m);  // all -inf (or an inf) must not give inf - inf
  Tensor r = log(sum(exp(x32 - m_safe), axes, true)) + m_safe;
  if (!keepdim) {
    std::vector<size_t> a = fe::norm_axes(axes, x.rank(), "logsumexp");
    std::sort(a.rbegin(), a.rend());
    for (size_t ax : a) r = squeeze(r, static_cast<int>(ax));
  }
  return cast(r, out);
}

Tensor any(const Tensor& x, const std::vector<int>& axes, bool keepdim) { return max(fe::to_bool(x), axes, keepdim); }
Tensor all(const Tensor& x, const std::vector<int>& axes, bool keepdim) { return min(fe::to_bool(x), axes, keepdim); }

static Tensor first_index_of_max(const Tensor& x, size_t axis, bool keepdim) {
  Tensor m = max(x, {static_cast<int>(axis)}, true);
  // NaN counts as the maximum (torch): a NaN max matches NaN elements.
  Tensor hit = is_float(x.dtype()) ? logical_or(eq(x, m), logical_and(isnan(x), isnan(m))) : eq(x, m);
  Graph& g = *x.graph();
  Tensor pos = fe::coordinate(g, x.shape(), axis);
  Tensor n = reshape(iota(g, x.shape()[axis], 1), {});
  Tensor candidate = where(hit, pos, n);  // non-maxima get n, so the min finds the first hit
  return min(candidate, {static_cast<int>(axis)}, keepdim);
}

Tensor argmax(const Tensor& x, int axis, bool keepdim) {
  return first_index_of_max(x, fe::norm_axis(axis, x.rank(), "argmax"), keepdim);
}

Tensor argmin(const Tensor& x, int axis, bool keepdim) {
  size_t a = fe::norm_axis(axis, x.rank(), "argmin");
  if (x.dtype() == DType::Bool) return first_index_of_max(logical_not(x), a, keepdim);
  if (x.dtype() == DType::I32) return first_index_of_max(x * -1 - 1, a, keepdim);
  return first_index_of_max(neg(x), a, keepdim);
}

namespace fe {

Tensor prod_axis(const Tensor& x, size_t axis) {
  Expr n = x.shape()[axis];
  if (auto c = n.as_const()) {
    // Pairwise tree: pad to a power of two with ones, multiply halves until one is left.
    int64_t p = 1;
    while (p < *c) p *= 2;
    Tensor t = *c == 0 ? full(*x.graph(), [&] { Shape s = x.shape(); s[axis] = 1; return s; }(), 1.0, x.dtype())
                       : pad_view(x, axis, 0, Expr(p - *c), 1.0);
    for (int64_t len = *c == 0 ? 1 : p; len > 1; len /= 2) {
      int ax = static_cast<int>(axis);
      t = slice(t, ax, 0, len / 2) * slice(t, ax, len / 2, len);
    }
    return squeeze(t, static_cast<int>(axis));
  }
  // Symbolic length: sign and magnitude separately, |x| through exp2(sum(log2|x|)).
  Tensor xf = to_float(x);
  int ax = static_cast<int>(axis);
  Tensor mag = exp2(sum(log2(abs(xf)), {ax}));
  Tensor negatives = sum(cast(lt(xf, scalar_like(xf, 0.0)), DType::I32), {ax});
  Tensor odd = ne(mod(negatives, constant(*x.graph(), 2, DType::I32)), constant(*x.graph(), 0, DType::I32));
  Tensor r = where(odd, neg(mag), mag);
  return is_float(x.dtype()) ? r : cast(round(r), x.dtype());
}

}  // namespace fe
}  // namespace luminal
