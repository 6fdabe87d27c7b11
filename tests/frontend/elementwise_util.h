#pragma once
// Helpers for the elementwise / creation frontend tests: build a small graph, run it on the
// reference Interpreter, and compare against an independent reference (std:: math in double on
// the exact input values, or hand-written values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "frontend/ops.h"
#include "runtime/interpreter.h"

namespace luminal::ewtest {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using UnaryFn = std::function<Tensor(const Tensor&)>;
using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
using RefFn = std::function<double(double)>;

// A buffer of any dtype from doubles (each converted with the buffer's cast semantics).
inline Buffer make_buffer(DType dt, const std::vector<double>& v, std::vector<int64_t> shape) {
  Buffer b(dt, std::move(shape));
  EXPECT_EQ(b.numel(), v.size()) << "test bug: value count does not match the shape";
  for (size_t i = 0; i < v.size() && i < b.numel(); ++i) b.set(i, v[i]);
  return b;
}

// An output as computed: its dtype, concrete shape and values (every dtype fits a double).
struct Out {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> v;
};

inline Out collect(const Buffer& b) {
  Out o{b.dtype(), b.shape(), {}};
  for (size_t i = 0; i < b.numel(); ++i) o.v.push_back(b.get(i));
  return o;
}

// Marks y as output "y", runs g with the given inputs (and dims) and returns y.
inline Out run_graph(Graph& g, const Tensor& y, const std::vector<std::pair<std::string, Buffer>>& inputs,
                     const std::vector<std::pair<std::string, int64_t>>& dims = {}) {
  y.output("y");
  Interpreter rt(g);
  for (const auto& [name, buf] : inputs) rt.set_input(name, buf);
  for (const auto& [name, v] : dims) rt.set_dim(name, v);
  rt.run();
  return collect(rt.output("y"));
}

// A graph with no inputs (creation ops).
inline Out run_const(Graph& g, const Tensor& y, const std::vector<std::pair<std::string, int64_t>>& dims = {}) {
  return run_graph(g, y, {}, dims);
}

// f(x) for x: dtype dt, shape [n] (or `shape` when given).
inline Out run_unary(DType dt, const std::vector<double>& xs, const UnaryFn& f, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(xs.size())};
  Graph g;
  std::vector<Expr> s(shape.begin(), shape.end());
  Tensor x = input(g, "x", dt, s);
  return run_graph(g, f(x), {{"x", make_buffer(dt, xs, shape)}});
}

// f(a, b) with given dtypes and shapes (broadcasting is f's business).
inline Out run_binary(DType da, const std::vector<double>& av, std::vector<int64_t> as, DType db,
                      const std::vector<double>& bv, std::vector<int64_t> bs, const BinaryFn& f) {
  Graph g;
  Tensor a = input(g, "a", da, std::vector<Expr>(as.begin(), as.end()));
  Tensor b = input(g, "b", db, std::vector<Expr>(bs.begin(), bs.end()));
  return run_graph(g, f(a, b), {{"a", make_buffer(da, av, as)}, {"b", make_buffer(db, bv, bs)}});
}

// Same-shape [n] binary op.
inline Out run_binary(DType da, const std::vector<double>& av, DType db, const std::vector<double>& bv,
                      const BinaryFn& f) {
  return run_binary(da, av, {static_cast<int64_t>(av.size())}, db, bv, {static_cast<int64_t>(bv.size())}, f);
}

// ---- comparison -------------------------------------------------------------------------------

// Independent rounding of a double to a float format with `p` significand bits, minimum normal
// exponent emin and largest finite value fmax (round to nearest even, overflow to inf).
inline double round_format(double v, int p, int emin, double fmax) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e = std::max(std::ilogb(v), emin);
  double r = std::ldexp(std::nearbyint(std::ldexp(v, p - 1 - e)), e - (p - 1));
  // Values at or beyond fmax + half an ulp round to infinity.
  double half_ulp_above = fmax + std::ldexp(1.0, std::ilogb(fmax) - p);
  if (std::fabs(v) >= half_ulp_above) return std::copysign(kInf, v);
  return r;
}
inline int sig_bits(DType dt) { return dt == DType::F16 ? 11 : dt == DType::BF16 ? 8 : 24; }
inline int min_exp(DType dt) { return dt == DType::F16 ? -14 : -126; }
inline double max_finite(DType dt) {
  return dt == DType::F16 ? 65504.0 : dt == DType::BF16 ? 3.3895313892515355e38 : 3.4028234663852886e38;
}
inline double round_to_dtype(double v, DType dt) { return round_format(v, sig_bits(dt), min_exp(dt), max_finite(dt)); }
// One unit in the last place of dtype dt at magnitude |v| (the spacing just above |v|).
inline double ulp_of(double v, DType dt) {
  if (std::isnan(v) || std::isinf(v)) return 0;
  int e = v == 0 ? min_exp(dt) : std::max(std::ilogb(v), min_exp(dt));
  return std::ldexp(1.0, e - (sig_bits(dt) - 1));
}

// Tolerance: |got - want| <= max(abs, ulps * ulp_of(want, dtype)). NaN must match NaN, infinities
// must match exactly.
struct Tol {
  double ulps = 0;
  double abs = 0;
  DType dtype = DType::F32;
};
inline Tol ulps(double n, DType dt = DType::F32) { return Tol{n, 0, dt}; }
inline Tol exact() { return Tol{0, 0, DType::F32}; }

inline bool same_value(double got, double want, const Tol& t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got)) return false;
  if (std::isinf(want) || std::isinf(got)) return got == want;
  double err = std::fabs(got - want);
  return err <= std::max(t.abs, t.ulps * ulp_of(want, t.dtype));
}

inline std::string fmt(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

// Element-wise check; `inputs` (optional) is printed alongside failures.
inline void expect_values(const std::vector<double>& got, const std::vector<double>& want, const Tol& tol,
                          const std::vector<double>& inputs = {}, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_value(got[i], want[i], tol))
        << what << " element " << i << (i < inputs.size() ? " (input " + fmt(inputs[i]) + ")" : "") << ": got "
        << fmt(got[i]) << ", want " << fmt(want[i]) << " (diff " << fmt(got[i] - want[i]) << ", "
        << fmt(std::fabs(got[i] - want[i]) / std::max(ulp_of(want[i], tol.dtype), 1e-300)) << " ulp)";
  }
}

inline void expect_exact(const Out& got, const std::vector<double>& want, const std::string& what = "") {
  expect_values(got.v, want, exact(), {}, what);
}

// Runs f on f32 [n] inputs and compares with ref evaluated in double on the f32 inputs.
inline void check_unary_f32(const UnaryFn& f, const RefFn& ref, const std::vector<double>& xs, const Tol& tol,
                            const std::string& what = "") {
  Out o = run_unary(DType::F32, xs, f);
  EXPECT_EQ(o.dtype, DType::F32) << what;
  std::vector<double> want, in;
  for (double x : xs) {
    double xf = static_cast<float>(x);
    in.push_back(xf);
    want.push_back(round_to_dtype(ref(xf), DType::F32));  // overflow -> inf, as f32 does
  }
  expect_values(o.v, want, tol, in, what);
}

}  // namespace luminal::ewtest
