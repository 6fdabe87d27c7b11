#pragma once
// Runs one LLIR kernel node through the CPU backend's hook and through the reference kernel,
// on the same buffers and views, and compares the outputs element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "runtime/kernels.h"

namespace luminal::cpu::testing {

struct KernelInput {
  Buffer buf;
  View view;
};

inline std::vector<Expr> exprs(const std::vector<int64_t>& shape) {
  std::vector<Expr> e;
  for (int64_t d : shape) e.push_back(Expr(d));
  return e;
}

inline Buffer random_f32(std::vector<int64_t> shape, uint32_t seed, float lo = -3, float hi = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return Buffer::f32(v, std::move(shape));
}

// A whole buffer read contiguously.
inline KernelInput whole(Buffer b) {
  View v = View::contiguous(exprs(b.shape()));
  return {std::move(b), v};
}

inline Node kernel_node(const std::string& kernel, size_t axis = 0, float constant = 0, std::vector<int64_t> code = {}) {
  Node n;
  n.op = OpKind::Kernel;
  n.dtype = DType::F32;
  n.kernel = kernel;
  n.axis = axis;
  n.constant = constant;
  n.code = std::move(code);
  return n;
}

struct Tolerance {
  double rel = 0, abs = 0;  // |got - want| <= rel * |want| + abs; NaN must match NaN
};

// Expects the hook to handle the node natively (or not, when `native` is false: it must then
// leave the output alone) and, when it does, to agree with the reference.
inline void compare(const Node& n, const std::vector<KernelInput>& ins, const std::vector<int64_t>& out_shape, Tolerance tol,
                    bool native = true) {
  static ThreadPool pool(2);
  std::vector<Reader> readers;
  std::vector<std::vector<int64_t>> shapes;
  for (const KernelInput& k : ins) {
    readers.emplace_back(k.buf, k.view, DimMap{});
    std::vector<int64_t> s;
    for (const Expr& e : k.view.shape()) s.push_back(e.eval({}));
    shapes.push_back(s);
  }
  Buffer want(DType::F32, out_shape), got(DType::F32, out_shape);
  run_reference_kernel(n, readers, shapes, want);
  for (size_t i = 0; i < got.numel(); ++i) got.set(i, -12345.0);
  bool ran = cpu_kernels(pool)(n, readers, shapes, got);
  ASSERT_EQ(ran, native) << n.kernel << (native ? " fell back to the reference" : " ran natively");
  int bad = 0;
  for (size_t i = 0; i < want.numel() && bad < 5; ++i) {
    double w = want.get(i), g = got.get(i);
    if (!native) {
      if (g != -12345.0) ADD_FAILURE() << n.kernel << " wrote element " << i << " and then fell back", ++bad;
      continue;
    }
    bool ok = std::isnan(w) ? std::isnan(g) : g == w || std::abs(g - w) <= tol.rel * std::abs(w) + tol.abs;
    if (!ok) {
      ADD_FAILURE() << n.kernel << " element " << i << ": native " << g << ", reference " << w;
      ++bad;
    }
  }
}

}  // namespace luminal::cpu::testing
