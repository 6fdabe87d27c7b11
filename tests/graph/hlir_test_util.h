#pragma once
// Helpers for building primitive graphs by hand and running them on the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "graph/graph.h"
#include "runtime/interpreter.h"

namespace hlirtest {

using luminal::Buffer;
using luminal::DType;
using luminal::Edge;
using luminal::Expr;
using luminal::Graph;
using luminal::Interpreter;
using luminal::NodeId;
using luminal::OpKind;
using luminal::View;

using Shape = std::vector<int64_t>;

inline std::vector<Expr> exprs(const Shape& s) { return {s.begin(), s.end()}; }
inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// An edge reading a node's whole output contiguously, or through a given view.
inline Edge edge(const Graph& g, NodeId id) { return Edge{id, View::contiguous(g.node(id).shape)}; }
inline Edge edge(NodeId id, View v) { return Edge{id, std::move(v)}; }
inline View contiguous(const Shape& s) { return View::contiguous(exprs(s)); }

inline std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> r(n);
  for (float& x : r) x = d(rng);
  return r;
}
inline std::vector<int32_t> random_ints(size_t n, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> r(n);
  for (int32_t& x : r) x = d(rng);
  return r;
}
inline std::vector<float> arange_f(int64_t n, float start = 0, float step = 1) {
  std::vector<float> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = start + step * static_cast<float>(i);
  return r;
}

// Runs g with the given inputs and returns the interpreter (to read outputs from).
inline Interpreter run(Graph g, std::vector<std::pair<std::string, Buffer>> inputs) {
  Interpreter it(std::move(g));
  for (auto& [name, buf] : inputs) it.set_input(name, std::move(buf));
  it.run();
  return it;
}

// One input "x" (dtype, shape), `build` makes the result node from x; output "out" reads it
// contiguously. Returns the interpreter after one run with `x`.
inline Interpreter run_unary_graph(DType dtype, const Shape& shape, Buffer x,
                                   const std::function<NodeId(Graph&, NodeId)>& build) {
  Graph g;
  NodeId in = g.input("x", dtype, exprs(shape));
  NodeId r = build(g, in);
  g.output("out", edge(g, r));
  return run(std::move(g), {{"x", std::move(x)}});
}

inline bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Element-wise exact comparison (NaN equals NaN, -0 differs from +0); reports the first mismatches.
inline ::testing::AssertionResult all_same(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << ", want " << want.size();
  int bad = 0;
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  for (size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i]) && bad++ < 8) r << "\n  at " << i << ": got " << got[i] << ", want " << want[i];
  if (bad == 0) return ::testing::AssertionSuccess();
  return r << "\n  (" << bad << " mismatches)";
}
#define EXPECT_FLOATS_SAME(got, want) EXPECT_TRUE(::hlirtest::all_same((got), (want)))

// Runs `fn`, which must throw luminal::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts, const char* file,
                         int line) {
  try {
    fn();
  } catch (const luminal::Error& e) {
    std::string msg = e.what();
    for (const std::string& p : parts)
      if (msg.find(p) == std::string::npos) ADD_FAILURE_AT(file, line) << "message lacks '" << p << "': " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE_AT(file, line) << "threw something other than luminal::Error: " << e.what();
    return;
  }
  ADD_FAILURE_AT(file, line) << "did not throw";
}
#define EXPECT_LM_ERROR(stmt, ...) ::hlirtest::expect_error([&] { stmt; }, {__VA_ARGS__}, __FILE__, __LINE__)

}  // namespace hlirtest
