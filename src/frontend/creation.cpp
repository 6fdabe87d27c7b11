// Creation ops: inputs, constants, ranges and triangular masks.
#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

Tensor input(Graph& g, const std::string& name, DType dtype, const Shape& shape) {
  return Tensor::of(&g, g.input(name, dtype, shape));
}

Tensor constant(Graph& g, double value, DType dtype) {
  if (dtype == DType::I32) {
    // Constant holds an f32, which cannot represent every i32; Iota evaluates an exact integer.
    if (value != static_cast<double>(static_cast<int64_t>(value)))
      throw Error("constant: " + std::to_string(value) + " is not an integer but the dtype is i32");
    return reshape(Tensor::of(&g, g.iota(Expr(static_cast<int64_t>(value)), 1)), {});
  }
  Tensor c = Tensor::of(&g, g.constant(static_cast<float>(value)));
  return dtype == DType::F32 ? c : cast(c, dtype);
}

Tensor full(Graph& g, const Shape& shape, double value, DType dtype) {
  return broadcast_to(constant(g, value, dtype), shape);
}
Tensor zeros(Graph& g, const Shape& shape, DType dtype) { return full(g, shape, 0.0, dtype); }
Tensor ones(Graph& g, const Shape& shape, DType dtype) { return full(g, shape, 1.0, dtype); }
Tensor full_like(const Tensor& x, double value) { return full(*x.graph(), x.shape(), value, x.dtype()); }

Tensor iota(Graph& g, Expr expr, Expr n) { return Tensor::of(&g, g.iota(expr, n)); }

Tensor arange(Graph& g, Expr start, Expr end, int64_t step, DType dtype) {
  if (step == 0) throw Error("arange: step must not be 0");
  Expr n = max(Expr(0), ceil_div(end - start, Expr(step)));
  if (dtype == DType::I32) return iota(g, start + Expr::index() * Expr(step), n);
  // Floats: start + i*step computed in f32 from exact integers.
  Tensor i = cast(iota(g, Expr::index(), n), DType::F32);
  Tensor s = cast(reshape(iota(g, start, 1), {}), DType::F32);
  return cast(i * static_cast<double>(step) + s, dtype);
}

static Tensor band_mask(Graph& g, Expr n, Expr m, int64_t k, bool lower) {
  Expr z = Expr::index();
  Expr i = z / m, j = z % m;
  // tril keeps j <= i + k, i.e. j < i + k + 1; triu keeps j >= i + k.
  Expr keep = lower ? lt(j, i + Expr(k + 1)) : ge(j, i + Expr(k));
  return reshape(cast(iota(g, keep, n * m), DType::Bool), {n, m});
}

Tensor tril_mask(Graph& g, Expr n, Expr m, int64_t k) { return band_mask(g, n, m, k, true); }
Tensor triu_mask(Graph& g, Expr n, Expr m, int64_t k) { return band_mask(g, n, m, k, false); }

static Tensor apply_band(const Tensor& x, int64_t k, bool lower) {
  if (x.rank() < 2) throw Error(std::string(lower ? "tril" : "triu") + ": needs at least 2 dims, got " + to_string(x.shape()));
  Tensor mask = band_mask(*x.graph(), x.dim(-2), x.dim(-1), k, lower);
  return where(mask, x, 0.0);
}

Tensor tril(const Tensor& x, int64_t k) { return apply_band(x, k, true); }
Tensor triu(const Tensor& x, int64_t k) { return apply_band(x, k, false); }

Tensor cast(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  return Tensor::of(x.graph(), x.graph()->cast(x.edge(), to));
}

Tensor contiguous(const Tensor& x) {
  // x * 1 is exact for every dtype (keeps -0, NaN, Inf; bool: x and true).
  Graph& g = *x.graph();
  Tensor one = broadcast_to(Tensor::of(&g, g.constant(1.0f)), x.shape());
  return Tensor::of(&g, g.binary(OpKind::Mul, x.edge(), one.edge()));
}

}  // namespace luminal
