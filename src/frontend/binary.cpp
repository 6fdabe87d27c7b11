// Binary ops with numpy broadcasting and dtype promotion, composed from Add, Mul, Mod, LessThan,
// Recip, MaxReduce and Gather.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

using fe::align;
using fe::prim_binary;

Tensor scalar_like(const Tensor& like, double v) {
  DType t = like.dtype();
  if (!is_float(t) && v != std::trunc(v)) t = DType::F32;
  if (t == DType::Bool) t = DType::I32;  // torch: True + 1 == 2
  return constant(*like.graph(), v, t);
}

Tensor add(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "add");
  return prim_binary(OpKind::Add, x, y);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "mul");
  return prim_binary(OpKind::Mul, x, y);
}

Tensor sub(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "sub");
  if (x.dtype() == DType::Bool) throw Error("sub: not defined for bool tensors; use logical_xor");
  return prim_binary(OpKind::Add, x, prim_binary(OpKind::Mul, y, fe::broadcast_to_like(scalar_like(y, -1.0), y)));
}

Tensor div(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "div");
  DType out = fe::float_of(x.dtype());
  // a * (1/b) in f32, rounded once to the result dtype: within 1 ulp of true division (like
  // fast-math and GPU fast division), and one Mul + Recip that backends map to a divide.
  Tensor xf = cast(x, DType::F32), yf = cast(y, DType::F32);
  return cast(prim_binary(OpKind::Mul, xf, fe::prim_unary(OpKind::Recip, yf)), out);
}

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "floor_divide");
  if (x.dtype() == DType::Bool) throw Error("floor_divide: not defined for bool tensors");
  if (!is_float(x.dtype())) {
    // An f32 estimate, refined twice with exact i32 remainders: exact for every i32.
    Tensor q = cast(floor(div(x, y)), DType::I32);
    Tensor r = x - q * y;
    q = q + cast(floor(div(r, y)), DType::I32);
    r = x - q * y;
    Tensor zero = scalar_like(x, 0.0);
    Tensor y_pos = lt(zero, y);
    // The remainder must lie in [0, y) for y > 0 and in (y, 0] for y < 0.
    Tensor q_too_big = where(y_pos, lt(r, zero), lt(zero, r));
    Tensor q_too_small = where(y_pos, logical_not(lt(r, y)), logical_not(lt(y, r)));
    return q - cast(q_too_big, DType::I32) + cast(q_too_small, DType::I32);
  }
  // Python's algorithm: (a - fmod(a, b)) / b is within rounding of an integer.
  Tensor m = fmod(x, y);
  Tensor zero = scalar_like(x, 0.0);
  Tensor q = (x - m) / y;
  q = where(logical_and(ne(m, zero), ne(lt(y, zero), lt(m, zero))), q - 1.0, q);
  Tensor fq = floor(q);
  return where(gt(q - fq, scalar_like(q, 0.5)), fq + 1.0, fq);
}

Tensor fmod(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "fmod");
  return prim_binary(OpKind::Mod, x, y);
}

Tensor mod(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "mod");
  Tensor r = prim_binary(OpKind::Mod, x, y);
  Tensor zero = scalar_like(x, 0.0);
  Tensor fix = logical_and(ne(r, zero), ne(lt(r, zero), lt(y, zero)));
  if (!is_float(x.dtype())) return r + y * cast(fix, x.dtype());
  return where(fix, r + y, r);  // r + y*0 would turn an infinite divisor into NaN
}

static Tensor int_power(const Tensor& a, int64_t e) {
  // Repeated squaring: exact for integers, as accurate as a few roundings for floats.
  Tensor result = full_like(a, 1.0), base = a;
  bool have = false;
  for (int64_t n = e; n > 0; n >>= 1) {
    if (n & 1) {
      result = have ? result * base : base;
      have = true;
    }
    if (n > 1) base = base * base;
  }
  return result;
}

Tensor pow(const Tensor& a, double e) {
  if (e == 0) return full_like(a, 1.0);
  if (e == 0.5) return sqrt(a);
  if (e == -0.5) return rsqrt(a);
  if (e == std::trunc(e) && std::abs(e) <= 64) {
    Tensor p = int_power(a, static_cast<int64_t>(std::abs(e)));
    return e > 0 ? p : reciprocal(p);
  }
  return pow(a, scalar_like(fe::to_float(a), e));
}

Tensor pow(const Tensor& a, const Tensor& b) {
  auto [x0, y0] = align(a, b, "pow");
  DType out = fe::float_of(x0.dtype());
  Tensor x = cast(x0, DType::F32), y = cast(y0, DType::F32);
  Tensor mag = exp2(y * log2(abs(x)));
  Tensor zero = scalar_like(x, 0.0);
  Tensor negative = lt(x, zero);
  Tensor y_int = eq(trunc(y), y);
  Tensor y_odd = logical_and(logical_and(y_int, ne(fmod(y, scalar_like(y, 2.0)), zero)), logical_not(isinf(y)));
  Tensor r = where(logical_and(negative, y_odd), -mag, mag);
  // A negative finite base with a fractional exponent has no real power.
  r = where(logical_and(logical_and(negative, logical_not(y_int)), logical_not(isinf(x))),
            std::numeric_limits<double>::quiet_NaN(), r);
  Tensor one = scalar_like(x, 1.0);
  r = where(logical_or(eq(y, zero), eq(x, one)), 1.0, r);  // x^0 = 1 and 1^y = 1, even for NaN
  r = where(logical_and(eq(abs(x), one), isinf(y)), 1.0, r);  // (-1)^inf = 1
  return cast(r, out);
}

Tensor lt(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "lt");
  return prim_binary(OpKind::LessThan, x, y);
}
Tensor gt(const Tensor& a, const Tensor& b) { return lt(b, a); }

static Tensor ordered(const Tensor& x) {  // false only for NaN
  double inf = std::numeric_limits<double>::infinity();
  return logical_or(lt(x, scalar_like(x, inf)), lt(scalar_like(x, -inf), x));
}

Tensor eq(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "eq");
  Tensor r = logical_and(logical_not(prim_binary(OpKind::LessThan, x, y)),
                         logical_not(prim_binary(OpKind::LessThan, y, x)));
  if (is_float(x.dtype())) r = logical_and(r, logical_and(ordered(x), ordered(y)));
  return r;
}
Tensor ne(const Tensor& a, const Tensor& b) { return logical_not(eq(a, b)); }
Tensor le(const Tensor& a, const Tensor& b) { return logical_or(lt(a, b), eq(a, b)); }
Tensor ge(const Tensor& a, const Tensor& b) { return le(b, a); }

Tensor logical_not(const Tensor& x) {
  Tensor bx = fe::to_bool(x);
  return prim_binary(OpKind::LessThan, bx, fe::broadcast_to_like(constant(*x.graph(), 1.0, DType::Bool), bx));
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(fe::to_bool(a), fe::to_bool(b), "logical_and");
  return prim_binary(OpKind::Mul, x, y);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(fe::to_bool(a), fe::to_bool(b), "logical_or");
  return prim_binary(OpKind::Add, x, y);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(fe::to_bool(a), fe::to_bool(b), "logical_xor");
  return logical_or(logical_and(x, logical_not(y)), logical_and(logical_not(x), y));
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "maximum");
  if (x.dtype() == DType::Bool) return logical_or(x, y);
  // max over a stacked pair: exact, and NaN propagates (MaxReduce semantics).
  return fe::prim_reduce(OpKind::MaxReduce, stack({x, y}, -1), x.rank());
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "minimum");
  if (x.dtype() == DType::Bool) return logical_and(x, y);
  if (!is_float(x.dtype())) return where(lt(y, x), y, x);  // negating INT_MIN would wrap
  return neg(maximum(neg(x), neg(y)));
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  auto [x, y] = align(a, b, "where");
  fe::graph_of(cond, x, "where");
  Shape s = fe::broadcast_shapes(cond.shape(), x.shape(), "where");
  Graph& g = *x.graph();
  Expr n = product(s);
  // Gather from [b..., a...] at i + cond*n: exact for every value, unlike a*c + b*(1-c).
  Tensor values = concat({reshape(broadcast_to(y, s), {n}), reshape(broadcast_to(x, s), {n})}, 0);
  Tensor c = reshape(broadcast_to(cast(fe::to_bool(cond), DType::I32), s), {n});
  Tensor idx = prim_binary(OpKind::Add, iota(g, Expr::index(), n),
                           prim_binary(OpKind::Mul, c, fe::broadcast_to_like(reshape(iota(g, n, 1), {}), c)));
  return reshape(Tensor::of(&g, g.gather(idx.edge(), values.edge())), s);
}

Tensor where(const Tensor& cond, const Tensor& a, double b) { return where(cond, a, scalar_like(a, b)); }
Tensor where(const Tensor& cond, double a, const Tensor& b) { return where(cond, scalar_like(b, a), b); }

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Tensor r = x;
  if (lo) r = maximum(r, scalar_like(r, *lo));
  if (hi) r = minimum(r, scalar_like(r, *hi));
  return r;
}

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) { return minimum(maximum(x, lo), hi); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
// Scalar forms. On f16/bf16 tensors the arithmetic runs in f32 with the scalar unrounded and
// the result is rounded once, as torch does with Python scalars.
template <class F>
static Tensor with_scalar(const Tensor& t, double v, F op) {
  DType d = t.dtype();
  if (d == DType::F16 || d == DType::BF16) {
    Tensor t32 = cast(t, DType::F32);
    return cast(op(t32, scalar_like(t32, v)), d);
  }
  return op(t, scalar_like(t, v));
}

Tensor operator+(const Tensor& a, double b) { return with_scalar(a, b, [](const Tensor& x, const Tensor& s) { return add(x, s); }); }
Tensor operator-(const Tensor& a, double b) { return with_scalar(a, b, [](const Tensor& x, const Tensor& s) { return sub(x, s); }); }
Tensor operator*(const Tensor& a, double b) { return with_scalar(a, b, [](const Tensor& x, const Tensor& s) { return mul(x, s); }); }
Tensor operator/(const Tensor& a, double b) { return with_scalar(a, b, [](const Tensor& x, const Tensor& s) { return div(x, s); }); }
Tensor operator+(double a, const Tensor& b) { return with_scalar(b, a, [](const Tensor& x, const Tensor& s) { return add(s, x); }); }
Tensor operator-(double a, const Tensor& b) { return with_scalar(b, a, [](const Tensor& x, const Tensor& s) { return sub(s, x); }); }
Tensor operator*(double a, const Tensor& b) { return with_scalar(b, a, [](const Tensor& x, const Tensor& s) { return mul(s, x); }); }
Tensor operator/(double a, const Tensor& b) { return with_scalar(b, a, [](const Tensor& x, const Tensor& s) { return div(s, x); }); }

}  // namespace luminal
