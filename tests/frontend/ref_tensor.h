#pragma once
// A tiny, independent reference N-d array for the frontend tests (movement, indexing,
// reductions, cumulative, nn, sort), plus a harness that builds a graph, runs it on the
// reference Interpreter and compares the result with the reference array.
//
// Ref is row-major doubles with explicit loops; it never calls luminal code, so expected values
// come from first principles (numpy/torch semantics written out naively).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "frontend/ops.h"
#include "runtime/interpreter.h"

namespace reft {

using luminal::Buffer;
using luminal::DType;
using luminal::Expr;
using luminal::Graph;
using luminal::Interpreter;
using luminal::Tensor;
using Idx = std::vector<int64_t>;

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline int64_t numel_of(const Idx& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline Idx unravel(int64_t flat, const Idx& shape) {
  Idx c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

inline int64_t ravel(const Idx& c, const Idx& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + c[d];
  return f;
}

inline std::string str(const Idx& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

struct Ref {
  Idx shape;
  std::vector<double> data;

  Ref() = default;
  Ref(Idx s, std::vector<double> d) : shape(std::move(s)), data(std::move(d)) {
    EXPECT_EQ(static_cast<int64_t>(data.size()), numel_of(shape)) << "bad Ref literal " << str(shape);
  }
  int64_t numel() const { return numel_of(shape); }
  size_t rank() const { return shape.size(); }
  double at(const Idx& c) const { return data[ravel(c, shape)]; }
  double& at(const Idx& c) { return data[ravel(c, shape)]; }
};

// Builds a Ref of `shape` whose element at coordinate c is f(c).
inline Ref make(const Idx& shape, const std::function<double(const Idx&)>& f) {
  Ref r;
  r.shape = shape;
  r.data.resize(numel_of(shape));
  for (int64_t i = 0; i < numel_of(shape); ++i) r.data[i] = f(unravel(i, shape));
  return r;
}

// Deterministic "random-looking" values: small integers and halves (exact in f32).
inline Ref ramp(const Idx& shape, double scale = 0.5, int mod = 11, double shift = -2.0) {
  return make(shape, [&](const Idx& c) {
    int64_t i = ravel(c, shape);
    return scale * static_cast<double>((i * 7 + 3) % mod) + shift;
  });
}

inline size_t ax(int a, size_t rank) { return static_cast<size_t>(a < 0 ? a + static_cast<int>(rank) : a); }

// ---- naive reference ops ----------------------------------------------------------------------
inline Ref reshape(const Ref& x, const Idx& s) { return Ref(s, x.data); }

inline Ref permute(const Ref& x, const std::vector<int>& p) {
  Idx s(p.size());
  for (size_t i = 0; i < p.size(); ++i) s[i] = x.shape[p[i]];
  return make(s, [&](const Idx& c) {
    Idx src(p.size());
    for (size_t i = 0; i < p.size(); ++i) src[p[i]] = c[i];
    return x.at(src);
  });
}

inline Ref transpose(const Ref& x, int a, int b) {
  std::vector<int> p(x.rank());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int>(i);
  std::swap(p[ax(a, x.rank())], p[ax(b, x.rank())]);
  return permute(x, p);
}

// Python slice with already-normalised non-negative bounds.
inline Ref slice(const Ref& x, int axis, int64_t start, int64_t end, int64_t step = 1) {
  size_t a = ax(axis, x.rank());
  Idx s = x.shape;
  s[a] = end > start ? (end - start + step - 1) / step : 0;
  return make(s, [&](const Idx& c) {
    Idx src = c;
    src[a] = start + c[a] * step;
    return x.at(src);
  });
}

inline Ref flip(const Ref& x, const std::vector<int>& axes) {
  return make(x.shape, [&](const Idx& c) {
    Idx src = c;
    for (int a : axes) src[ax(a, x.rank())] = x.shape[ax(a, x.rank())] - 1 - c[ax(a, x.rank())];
    return x.at(src);
  });
}

inline Ref concat(const std::vector<Ref>& xs, int axis) {
  size_t a = ax(axis, xs[0].rank());
  Idx s = xs[0].shape;
  s[a] = 0;
  for (const Ref& x : xs) s[a] += x.shape[a];
  return make(s, [&](const Idx& c) {
    Idx src = c;
    for (const Ref& x : xs) {
      if (src[a] < x.shape[a]) return x.at(src);
      src[a] -= x.shape[a];
    }
    return kNaN;
  });
}

inline Ref pad(const Ref& x, const std::vector<std::pair<int64_t, int64_t>>& p, double value) {
  Idx s = x.shape;
  for (size_t i = 0; i < p.size(); ++i) s[i] += p[i].first + p[i].second;
  return make(s, [&](const Idx& c) {
    Idx src = c;
    for (size_t i = 0; i < p.size(); ++i) {
      src[i] -= p[i].first;
      if (src[i] < 0 || src[i] >= x.shape[i]) return value;
    }
    return x.at(src);
  });
}

inline Ref matmul2d(const Ref& a, const Ref& b) {  // [m,k] @ [k,n], summed in order in double
  Idx s{a.shape[0], b.shape[1]};
  return make(s, [&](const Idx& c) {
    double acc = 0;
    for (int64_t k = 0; k < a.shape[1]; ++k) acc += a.at({c[0], k}) * b.at({k, c[1]});
    return acc;
  });
}

// Reduces the given axes with `f(values) -> double` (values in index order along the axes).
inline Ref reduce(const Ref& x, std::vector<int> axes, bool keepdim,
                  const std::function<double(const std::vector<double>&)>& f) {
  std::vector<bool> red(x.rank(), false);
  for (int a : axes) red[ax(a, x.rank())] = true;
  Idx out;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!red[d]) out.push_back(x.shape[d]);
    else if (keepdim) out.push_back(1);
  }
  std::vector<std::vector<double>> groups(numel_of(out));
  for (int64_t i = 0; i < x.numel(); ++i) {
    Idx c = unravel(i, x.shape), oc;
    for (size_t d = 0; d < x.rank(); ++d) {
      if (!red[d]) oc.push_back(c[d]);
      else if (keepdim) oc.push_back(0);
    }
    groups[ravel(oc, out)].push_back(x.data[i]);
  }
  Ref r;
  r.shape = out;
  for (auto& g : groups) r.data.push_back(f(g));
  return r;
}

// Applies f(lane) -> lane along one axis (for scans, softmax, sort...).
inline Ref along(const Ref& x, int axis, const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  size_t a = ax(axis, x.rank());
  Ref r = x;
  for (int64_t i = 0; i < x.numel(); ++i) {
    Idx c = unravel(i, x.shape);
    if (c[a] != 0) continue;
    std::vector<double> lane;
    for (int64_t k = 0; k < x.shape[a]; ++k) {
      c[a] = k;
      lane.push_back(x.at(c));
    }
    std::vector<double> out = f(lane);
    for (int64_t k = 0; k < x.shape[a]; ++k) {
      c[a] = k;
      r.at(c) = out[k];
    }
  }
  return r;
}

// ---- harness -----------------------------------------------------------------------------------
inline Buffer to_buffer(const Ref& r, DType t) {
  Buffer b(t, r.shape);
  for (int64_t i = 0; i < r.numel(); ++i) b.set(i, r.data[i]);
  return b;
}

inline Ref from_buffer(const Buffer& b) {
  Ref r;
  r.shape = b.shape();
  for (size_t i = 0; i < b.numel(); ++i) r.data.push_back(b.get(i));
  return r;
}

// One graph with named inputs; run() evaluates the given outputs on the reference Interpreter.
class Case {
 public:
  Graph g;

  Tensor in(const std::string& name, const Ref& value, DType t = DType::F32) {
    std::vector<Expr> s(value.shape.begin(), value.shape.end());
    return in(name, value, t, s);
  }
  // Declares the input with a (possibly symbolic) shape; `value` gives the concrete data.
  Tensor in(const std::string& name, const Ref& value, DType t, const std::vector<Expr>& shape) {
    bufs_.emplace_back(name, to_buffer(value, t));
    return luminal::input(g, name, t, shape);
  }
  void set(const std::string& name, const Ref& value, DType t) {
    for (auto& [n, b] : bufs_)
      if (n == name) b = to_buffer(value, t);
  }

  // Runs with every output already marked; returns the interpreter for inspection.
  Interpreter run_all() {
    Interpreter rt(g);
    for (auto& [n, b] : bufs_) rt.set_input(n, b);
    rt.run();
    return rt;
  }
  Buffer run(const Tensor& out) {
    out.output("out");
    Interpreter rt = run_all();
    return rt.output("out");
  }

 private:
  std::vector<std::pair<std::string, Buffer>> bufs_;
};

// Exact comparison: shape, dtype (if given) and every element (NaN == NaN; signed zeros differ).
inline ::testing::AssertionResult same(const Ref& want, const Buffer& got) {
  if (got.shape() != want.shape)
    return ::testing::AssertionFailure() << "shape: want " << str(want.shape) << " got " << got.shape_string();
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.data[i], v = got.get(i);
    bool ok = (std::isnan(w) && std::isnan(v)) || (w == v && std::signbit(w) == std::signbit(v));
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << " " << str(unravel(i, want.shape)) << ": want " << w
                                           << " got " << v;
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same(const Ref& want, const Buffer& got, DType t) {
  if (got.dtype() != t)
    return ::testing::AssertionFailure() << "dtype: want " << luminal::dtype_name(t) << " got "
                                         << luminal::dtype_name(got.dtype());
  return same(want, got);
}

// |got - want| <= atol + rtol*|want|; infinities and NaN must match exactly.
inline ::testing::AssertionResult near(const Ref& want, const Buffer& got, double rtol = 1e-5, double atol = 1e-5) {
  if (got.shape() != want.shape)
    return ::testing::AssertionFailure() << "shape: want " << str(want.shape) << " got " << got.shape_string();
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.data[i], v = got.get(i);
    bool ok = std::isnan(w) ? std::isnan(v)
              : std::isinf(w) ? v == w
                              : std::abs(v - w) <= atol + rtol * std::abs(w);
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << " " << str(unravel(i, want.shape)) << ": want " << w
                                           << " got " << v;
  }
  return ::testing::AssertionSuccess();
}

// Runs f and expects a luminal::Error whose message contains every one of `parts`.
inline ::testing::AssertionResult throws_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const luminal::Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts)
      if (m.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message '" << m << "' lacks '" << p << "'";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace reft
