// Running reductions. out[i] reduces x[0..i]: pad the axis in front with n-1 identity elements,
// take length-n sliding windows (a view), and reduce each window. No masks or multiplications
// by zero are involved, so inf and NaN behave as in a sequential scan. O(n^2) work.
#include <limits>

#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

template <class F>
static Tensor scan(const Tensor& x, int axis, double identity, F reduce_last) {
  size_t a = fe::norm_axis(axis, x.rank(), "cumulative op");
  Expr n = x.shape()[a];
  Tensor padded = fe::pad_view(x, a, n - 1, 0, identity);
  Tensor windows = unfold(padded, static_cast<int>(a), n, 1);  // [..., n (windows), ..., n]
  return reduce_last(windows);
}

Tensor cumsum(const Tensor& x, int axis) {
  Tensor src = x.dtype() == DType::Bool ? cast(x, DType::I32) : x;
  return scan(src, axis, 0.0, [](const Tensor& w) { return sum(w, {-1}); });
}

Tensor cumprod(const Tensor& x, int axis) {
  Tensor src = x.dtype() == DType::Bool ? cast(x, DType::I32) : x;
  return scan(src, axis, 1.0, [](const Tensor& w) { return prod(w, {-1}); });
}

Tensor cummax(const Tensor& x, int axis) {
  double lowest = is_float(x.dtype()) ? -std::numeric_limits<double>::infinity()
                  : x.dtype() == DType::I32 ? -2147483648.0 : 0.0;
  return scan(x, axis, lowest, [](const Tensor& w) { return max(w, {-1}); });
}

}  // namespace luminal
