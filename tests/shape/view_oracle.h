#pragma once
// An independent oracle for View: a materialised tensor of buffer indices.
//
// Oracle starts as arange(N) (so an element's value IS its buffer index) and every movement op
// is applied by an explicit loop over the output's coordinates, numpy style. Padding is stored
// as kPad. A View built with the same ops must, for every logical element, be valid exactly
// where the oracle is not padding and then point at the oracle's buffer index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "shape/view.h"
#include "symbolic/expr.h"

namespace viewtest {

using luminal::DimMap;
using luminal::Expr;
using luminal::View;
using Shape = std::vector<int64_t>;

inline constexpr int64_t kPad = -1;

inline int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major coordinates of flat index `flat` in `shape`.
inline Shape unravel(int64_t flat, const Shape& shape) {
  Shape c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

inline int64_t ravel(const Shape& coords, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + coords[d];
  return f;
}

inline std::string str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

inline std::vector<Expr> exprs(const Shape& s) { return std::vector<Expr>(s.begin(), s.end()); }

struct Oracle {
  Shape shape;
  std::vector<int64_t> data;  // buffer index per logical element (row-major), or kPad
  float pad_value = 0.0f;

  static Oracle arange(const Shape& shape) {
    Oracle o;
    o.shape = shape;
    o.data.resize(numel_of(shape));
    for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = static_cast<int64_t>(i);
    return o;
  }

  int64_t at(const Shape& coords) const { return data[ravel(coords, shape)]; }

  // Builds a tensor of `out_shape` whose element at `dst` is this tensor's element at src(dst),
  // or padding when src returns nullopt.
  Oracle gather(const Shape& out_shape, const std::function<std::optional<Shape>(const Shape&)>& src) const {
    Oracle r;
    r.shape = out_shape;
    r.pad_value = pad_value;
    r.data.resize(numel_of(out_shape));
    for (int64_t i = 0; i < numel_of(out_shape); ++i) {
      std::optional<Shape> s = src(unravel(i, out_shape));
      r.data[i] = s ? at(*s) : kPad;
    }
    return r;
  }

  Oracle permute(const std::vector<size_t>& perm) const {
    Shape out(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) out[i] = shape[perm[i]];
    return gather(out, [&](const Shape& d) {
      Shape s(d.size());
      for (size_t i = 0; i < perm.size(); ++i) s[perm[i]] = d[i];
      return std::optional<Shape>(s);
    });
  }

  Oracle unsqueeze(size_t axis) const {
    Shape out = shape;
    out.insert(out.begin() + axis, 1);
    return gather(out, [&](const Shape& d) {
      Shape s = d;
      s.erase(s.begin() + axis);
      return std::optional<Shape>(s);
    });
  }

  Oracle squeeze(size_t axis) const {
    EXPECT_EQ(shape[axis], 1) << "oracle: squeeze of a non-1 dim";
    Shape out = shape;
    out.erase(out.begin() + axis);
    return gather(out, [&](const Shape& d) {
      Shape s = d;
      s.insert(s.begin() + axis, 0);
      return std::optional<Shape>(s);
    });
  }

  Oracle expand(size_t axis, int64_t size) const {
    EXPECT_TRUE(shape[axis] == 1 || shape[axis] == size) << "oracle: expand of a non-1 dim";
    Shape out = shape;
    out[axis] = size;
    int64_t n = shape[axis];
    return gather(out, [&](const Shape& d) {
      Shape s = d;
      if (n == 1) s[axis] = 0;
      return std::optional<Shape>(s);
    });
  }

  // numpy broadcasting: align trailing dims, new dims in front.
  Oracle broadcast_to(const Shape& target) const {
    size_t lead = target.size() - shape.size();
    return gather(target, [&](const Shape& d) {
      Shape s(shape.size());
      for (size_t i = 0; i < shape.size(); ++i) s[i] = shape[i] == 1 ? 0 : d[lead + i];
      return std::optional<Shape>(s);
    });
  }

  Oracle reshape(const Shape& out) const {
    EXPECT_EQ(numel_of(out), numel_of(shape)) << "oracle: reshape changes the element count";
    Oracle r = *this;
    r.shape = out;
    return r;
  }

  // Python's x[start:end:step] along axis.
  Oracle slice(size_t axis, int64_t start, int64_t end, int64_t step) const {
    Shape out = shape;
    out[axis] = end > start ? (end - start + step - 1) / step : 0;
    return gather(out, [&](const Shape& d) {
      Shape s = d;
      s[axis] = start + step * d[axis];
      return std::optional<Shape>(s);
    });
  }

  Oracle pad(size_t axis, int64_t before, int64_t after, float value) const {
    Shape out = shape;
    out[axis] += before + after;
    int64_t n = shape[axis];
    Oracle r = gather(out, [&](const Shape& d) -> std::optional<Shape> {
      Shape s = d;
      s[axis] -= before;
      if (s[axis] < 0 || s[axis] >= n) return std::nullopt;
      return s;
    });
    r.pad_value = value;
    return r;
  }

  Oracle flip(size_t axis) const {
    int64_t n = shape[axis];
    return gather(shape, [&](const Shape& d) {
      Shape s = d;
      s[axis] = n - 1 - d[axis];
      return std::optional<Shape>(s);
    });
  }

  // torch.Tensor.unfold(axis, size, step): axis becomes the window count, a new last dim
  // of length `size` walks inside the window.
  Oracle unfold(size_t axis, int64_t size, int64_t step) const {
    Shape out = shape;
    out[axis] = (shape[axis] - size) / step + 1;
    out.push_back(size);
    return gather(out, [&](const Shape& d) {
      Shape s(d.begin(), d.end() - 1);
      s[axis] = d[axis] * step + d.back();
      return std::optional<Shape>(s);
    });
  }

  bool has_padding() const {
    for (int64_t x : data)
      if (x == kPad) return true;
    return false;
  }
};

// Which index expressions view_matches evaluates.
enum class Via {
  kBoth,    // flat_index() (symbolic in the index variable, so simplified) and index(coords)
  kCoords,  // only index(coords) with constant coords: the View's arithmetic, folded to constants
};

// Checks a view against the oracle for every logical element, through flat_index() and/or
// index(coords). `checked` (if given) is increased by the number of elements compared.
inline ::testing::AssertionResult view_matches(const View& v, const Oracle& o, const DimMap& dims = {},
                                               int64_t* checked = nullptr, Via via = Via::kBoth) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\n  view:   " << v.to_string()
                                         << "\n  oracle shape: " << str(o.shape);
  };
  if (v.rank() != o.shape.size())
    return fail("rank " + std::to_string(v.rank()) + " != oracle rank " + std::to_string(o.shape.size()));
  try {
    for (size_t d = 0; d < v.rank(); ++d)
      if (v.shape()[d].eval(dims) != o.shape[d])
        return fail("dim " + std::to_string(d) + " is " + v.shape()[d].to_string() + " = " +
                    std::to_string(v.shape()[d].eval(dims)));
    if (v.numel().eval(dims) != numel_of(o.shape)) return fail("numel mismatch");
  } catch (const std::exception& e) {
    return fail(std::string("shape eval threw: ") + e.what());
  }
  if (o.has_padding() && v.pad_value() != o.pad_value)
    return fail("pad value " + std::to_string(v.pad_value()) + " != " + std::to_string(o.pad_value));

  luminal::IndexExprs flat = via == Via::kBoth ? v.flat_index() : luminal::IndexExprs{0, 0};
  for (int64_t i = 0; i < numel_of(o.shape); ++i) {
    Shape c = unravel(i, o.shape);
    int64_t want = o.data[i];
    std::ostringstream at;
    at << "element " << i << " " << str(c) << " (oracle " << (want == kPad ? "pad" : std::to_string(want)) << ")";
    try {
      luminal::IndexExprs byc = v.index(exprs(c));
      struct Got {
        const char* how;
        const luminal::IndexExprs& e;
        int64_t valid, index;
      };
      std::vector<Got> got;
      if (via == Via::kBoth) got.push_back({"flat_index()", flat, flat.valid.eval(dims, i), 0});
      got.push_back({"index(coords)", byc, byc.valid.eval(dims), 0});
      if (via == Via::kBoth && got[0].valid) got[0].index = flat.index.eval(dims, i);
      if (got.back().valid) got.back().index = byc.index.eval(dims);
      for (const Got& g : got) {
        std::string valid_expr = "\n  valid expr: " + g.e.valid.to_string();
        if (g.valid != 0 && g.valid != 1)
          return fail(at.str() + ": " + g.how + " valid = " + std::to_string(g.valid) + " (not 0/1)" + valid_expr);
        if (want == kPad && g.valid)
          return fail(at.str() + ": " + g.how + " says valid (index " + std::to_string(g.index) +
                      "), oracle says pad" + valid_expr);
        if (want != kPad && !g.valid) return fail(at.str() + ": " + g.how + " says invalid" + valid_expr);
        if (want != kPad && g.index != want)
          return fail(at.str() + ": " + g.how + " index = " + std::to_string(g.index) +
                      "\n  index expr: " + g.e.index.to_string());
      }
    } catch (const std::exception& e) {
      return fail(at.str() + ": evaluation threw: " + e.what() +
                  (via == Via::kBoth ? "\n  flat index expr: " + flat.index.to_string() +
                                           "\n  flat valid expr: " + flat.valid.to_string()
                                     : std::string()));
    }
    if (checked) ++*checked;
  }
  return ::testing::AssertionSuccess();
}

// A View and its oracle, moved in lockstep (constant shapes only).
struct Twin {
  View v;
  Oracle o;

  static Twin arange(const Shape& shape) { return {View::contiguous(exprs(shape)), Oracle::arange(shape)}; }

  Twin permute(const std::vector<size_t>& p) const { return {v.permute(p), o.permute(p)}; }
  Twin unsqueeze(size_t a) const { return {v.unsqueeze(a), o.unsqueeze(a)}; }
  Twin squeeze(size_t a) const { return {v.squeeze(a), o.squeeze(a)}; }
  Twin expand(size_t a, int64_t n) const { return {v.expand(a, n), o.expand(a, n)}; }
  Twin broadcast_to(const Shape& s) const { return {v.broadcast_to(exprs(s)), o.broadcast_to(s)}; }
  Twin reshape(const Shape& s) const { return {v.reshape(exprs(s)), o.reshape(s)}; }
  Twin slice(size_t a, int64_t b, int64_t e, int64_t step = 1) const {
    return {v.slice(a, b, e, step), o.slice(a, b, e, step)};
  }
  Twin pad(size_t a, int64_t before, int64_t after, float value = 0.0f) const {
    return {v.pad(a, before, after, value), o.pad(a, before, after, value)};
  }
  Twin flip(size_t a) const { return {v.flip(a), o.flip(a)}; }
  Twin unfold(size_t a, int64_t size, int64_t step) const { return {v.unfold(a, size, step), o.unfold(a, size, step)}; }
};

inline ::testing::AssertionResult matches(const Twin& t, int64_t* checked = nullptr, Via via = Via::kBoth) {
  return view_matches(t.v, t.o, {}, checked, via);
}

// Succeeds when `body` throws luminal::Error (its message goes to *message); fails otherwise.
template <typename F>
::testing::AssertionResult throws_error(F&& body, std::string* message = nullptr) {
  try {
    body();
  } catch (const luminal::Error& e) {
    if (message) *message = e.what();
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-luminal::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace viewtest
