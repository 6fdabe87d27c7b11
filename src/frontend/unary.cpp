// Unary ops, composed from Exp2, Log2, Sin, Sqrt, Recip, Mod, LessThan and friends.
// Composite float math on f16/bf16 runs in f32 and rounds once at the end, as torch does.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {
namespace {

constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
constexpr double kPi = 3.141592653589793;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Runs f on x in f32 and casts the result back to x's float dtype (ints give f32).
template <class F>
Tensor in_f32(const Tensor& x, F f) {
  DType out = fe::float_of(x.dtype());
  return cast(f(cast(x, DType::F32)), out);
}

Tensor prim(OpKind op, const Tensor& x) { return fe::prim_unary(op, fe::to_float(x)); }

}  // namespace

Tensor exp2(const Tensor& x) { return prim(OpKind::Exp2, x); }
Tensor log2(const Tensor& x) { return prim(OpKind::Log2, x); }
Tensor sin(const Tensor& x) { return prim(OpKind::Sin, x); }
Tensor sqrt(const Tensor& x) { return prim(OpKind::Sqrt, x); }
Tensor reciprocal(const Tensor& x) { return prim(OpKind::Recip, x); }

Tensor exp(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return fe::prim_unary(OpKind::Exp2, v * kLog2E); });
}
Tensor log(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return fe::prim_unary(OpKind::Log2, v) * kLn2; });
}
Tensor cos(const Tensor& x) {
  // 1 - 2 sin^2(x/2): x/2 is exact, so this holds for every x (sin(x + pi/2) would round the
  // shifted argument away for large x, e.g. RoPE angles). Absolute error about 4e-7.
  return in_f32(x, [](const Tensor& v) {
    Tensor s = fe::prim_unary(OpKind::Sin, v * 0.5);
    return 1.0 - s * s * 2.0;
  });
}
Tensor tan(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return sin(v) / cos(v); });
}
Tensor rsqrt(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return reciprocal(sqrt(v)); });
}

Tensor log1p(const Tensor& x) {
  // Goldberg's trick: with w = 1 + x rounded, log(w) * x / (w - 1) is accurate near 0.
  return in_f32(x, [](const Tensor& v) {
    Tensor w = v + 1.0;
    Tensor r = where(eq(w, scalar_like(w, 1.0)), v, log(w) * (v / (w - 1.0)));  // v/(w-1) ~ 1: no overflow
    return where(lt(v, scalar_like(v, kInf)), r, v);  // +inf (and NaN) map to themselves
  });
}

Tensor expm1(const Tensor& x) {
  // Kahan: with u = exp(x) rounded, (u - 1) * x / log(u) cancels u's rounding error.
  return in_f32(x, [](const Tensor& v) {
    Tensor u = exp(v);
    Tensor accurate = (u - 1.0) * (v / log(u));
    Tensor r = where(lt(abs(v), scalar_like(v, 0.5)), accurate, u - 1.0);
    return where(eq(u, scalar_like(u, 1.0)), v, r);
  });
}

Tensor neg(const Tensor& x) {
  if (x.dtype() == DType::Bool) throw Error("neg: not defined for bool; use logical_not");
  return x * -1.0;
}

Tensor sign(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x;
  Tensor zero = scalar_like(x, 0.0);
  Tensor s = cast(lt(zero, x), x.dtype()) - cast(lt(x, zero), x.dtype());
  return is_float(x.dtype()) ? where(isnan(x), x, s) : s;
}

Tensor abs(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x;
  Tensor r = x * sign(x);  // exact: x*1, x*-1, 0; NaN stays NaN
  return is_float(x.dtype()) ? r + 0.0 : r;  // -0 + 0 = +0
}

// A zero result takes x's sign (floor(-0.5) is -0, as in IEEE): x*0 is a signed zero for the
// finite x that can round to zero.
static Tensor keep_zero_sign(const Tensor& r, const Tensor& x) {
  return where(eq(r, scalar_like(r, 0.0)), x * 0.0, r);
}

Tensor trunc(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  // Below 2^23 every float with a fraction has |x| < 2^23; above it all are integers (and
  // fmod(inf, 1) would be NaN).
  Tensor t = x - fmod(x, scalar_like(x, 1.0));
  return keep_zero_sign(where(lt(abs(x), scalar_like(x, 8388608.0)), t, x), x);
}

Tensor floor(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  Tensor t = trunc(x);
  return keep_zero_sign(where(lt(x, t), t - 1.0, t), x);
}

Tensor ceil(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  Tensor t = trunc(x);
  return keep_zero_sign(where(lt(t, x), t + 1.0, t), x);
}

Tensor round(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  Tensor f = floor(x);
  Tensor d = x - f;  // exact; NaN for infinities, which then compare false and keep f
  Tensor half = scalar_like(x, 0.5);
  Tensor odd = ne(fmod(f, scalar_like(x, 2.0)), scalar_like(x, 0.0));
  Tensor up = logical_or(gt(d, half), logical_and(eq(d, half), odd));
  return keep_zero_sign(where(up, f + 1.0, f), x);
}

Tensor relu(const Tensor& x) { return maximum(x, scalar_like(x, 0.0)); }

Tensor leaky_relu(const Tensor& x, double slope) {
  Tensor xf = fe::to_float(x);
  return where(gt(xf, scalar_like(xf, 0.0)), xf, xf * slope);
}

Tensor sigmoid(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return reciprocal(exp(-v) + 1.0); });
}

Tensor silu(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return v * sigmoid(v); });
}

Tensor tanh(const Tensor& x) {
  // sign(x) * (1 - e) / (1 + e) with e = exp(-2|x|) in (0, 1]: no overflow at either end.
  // Below |x| = 1/8, 1 - e cancels; the Taylor series there is accurate to ~1e-9.
  return in_f32(x, [](const Tensor& v) {
    Tensor e = exp(abs(v) * -2.0);
    Tensor big = sign(v) * ((1.0 - e) / (e + 1.0));
    Tensor v2 = v * v;
    Tensor series = v * (1.0 + v2 * (-1.0 / 3 + v2 * (2.0 / 15 + v2 * (-17.0 / 315))));
    return where(lt(abs(v), scalar_like(v, 0.125)), series, big);
  });
}

Tensor erf(const Tensor& x) {
  // Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7, below f32's resolution near 1).
  return in_f32(x, [](const Tensor& v) {
    Tensor a = abs(v);
    Tensor t = reciprocal(a * 0.3275911 + 1.0);
    Tensor poly = ((((t * 1.061405429 - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
    Tensor y = 1.0 - poly * exp(-(a * a));
    return sign(v) * y;
  });
}

Tensor gelu(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) { return v * 0.5 * (erf(v * (1.0 / std::sqrt(2.0))) + 1.0); });
}

Tensor gelu_tanh(const Tensor& x) {
  return in_f32(x, [](const Tensor& v) {
    Tensor inner = (v + v * v * v * 0.044715) * std::sqrt(2.0 / kPi);
    return v * 0.5 * (tanh(inner) + 1.0);
  });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  return in_f32(x, [&](const Tensor& v) {
    Tensor bx = v * beta;
    return where(gt(bx, scalar_like(bx, threshold)), v, log1p(exp(bx)) / beta);
  });
}

Tensor isnan(const Tensor& x) {
  if (!is_float(x.dtype())) return full(*x.graph(), x.shape(), 0.0, DType::Bool);
  // Every non-NaN value is < +inf or > -inf; NaN compares false both ways.
  Tensor ordered = logical_or(lt(x, scalar_like(x, kInf)), lt(scalar_like(x, -kInf), x));
  return logical_not(ordered);
}

Tensor isinf(const Tensor& x) {
  if (!is_float(x.dtype())) return full(*x.graph(), x.shape(), 0.0, DType::Bool);
  Tensor below_inf = lt(x, scalar_like(x, kInf));
  Tensor above_ninf = lt(scalar_like(x, -kInf), x);
  // +inf: not below inf but above -inf; -inf: below inf but not above -inf; NaN: neither.
  return logical_xor(below_inf, above_ninf);
}

}  // namespace luminal
