#pragma once
// Runs a graph and a compiled plan on the same random inputs and compares their outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/interpreter.h"

namespace luminal::plancheck {

// How many kernel nodes named `kernel` ("Matmul", "Softmax") the plan has.
inline int count_kernels(const Graph& plan, const std::string& kernel) {
  int n = 0;
  for (const Node& node : plan.nodes()) n += node.op == OpKind::Kernel && node.kernel == kernel;
  return n;
}

// Sets every input of `g` (and the dims) on `rt` with values uniform in [-range, range]
// (small non-negative integers for i32 inputs, so they work as indices).
inline void fill_random(Interpreter& rt, const Graph& g, const DimMap& dims, uint32_t seed, float range) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-range, range);
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    std::vector<int64_t> shape;
    for (const Expr& e : n.shape) shape.push_back(e.eval(dims));
    Buffer buf(n.dtype, shape);
    for (size_t i = 0; i < buf.numel(); ++i)
      buf.set(i, n.dtype == DType::I32 ? static_cast<double>(rng() % 7) : static_cast<double>(val(rng)));
    rt.set_input(n.name, std::move(buf));
  }
  for (const auto& [k, v] : dims) rt.set_dim(k, v);
}

// Every output of `g` equals the plan's: bit for bit when `tol` is 0, else within
// tol * (1 + |value|).
inline void expect_same_outputs(const Graph& g, const Graph& plan, const DimMap& dims, double tol, float range = 2.0f) {
  Interpreter a(g), b(plan);
  fill_random(a, g, dims, 5, range);
  fill_random(b, g, dims, 5, range);  // the same values: inputs are filled in the graph's order
  a.run();
  b.run();
  for (NodeId id : g.outputs()) {
    const std::string& name = g.node(id).name;
    std::vector<float> x = a.output_f32(name), y = b.output_f32(name);
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      if (tol == 0) ASSERT_EQ(std::memcmp(&x[i], &y[i], 4), 0) << name << "[" << i << "]: " << x[i] << " vs " << y[i];
      else ASSERT_NEAR(x[i], y[i], tol * (1 + std::fabs(x[i]))) << name << "[" << i << "]";
    }
  }
}

}  // namespace luminal::plancheck
