#pragma once
// An MoE block's expert products as the model builder writes them: every expert's matmul over
// every token, its rows scaled by the routing, summed over experts. The experts no token
// chooses hold NaN weights: a plan that reads them (instead of skipping rows whose scale is
// zero) gives NaN, so the tests that use this case fail unless those weights are never read.
// Shared by the CPU tests (tests/egraph) and the GPU ones (tests/cuda).
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "frontend/ops.h"
#include "graph/graph.h"
#include "runtime/buffer.h"

namespace luminal::moetest {

struct MoeExperts {
  int64_t experts = 6, n = 40, k = 24;
  DType weight_dtype = DType::BF16;

  // out[s, n] = sum_e matmul(x * routing[:, e], W_eᵀ): x [s, k], W [experts, n, k], routing [s, experts].
  Graph graph() const {
    Graph g;
    Expr s = Expr::var("s");
    Tensor x = input(g, "x", DType::F32, {s, k});
    Tensor w = input(g, "w", weight_dtype, {experts, n, k});
    Tensor routing = input(g, "routing", DType::F32, {s, experts});
    Tensor per_expert = unsqueeze(permute(routing, {1, 0}), 2);  // [experts, s, 1]
    Tensor xs = expand(unsqueeze(x, 0), {Expr(experts), s, Expr(k)}) * per_expert;
    Tensor wf = weight_dtype == DType::F32 ? w : cast(w, DType::F32);
    sum(matmul(xs, transpose(wf, 1, 2)), {0}).output("out");
    return g;
  }

  // Token t chooses experts t % 3 and (t + 1) % 3 (weights 0.75 and 0.25; one of them 0 for
  // odd t: chosen with a zero weight); experts 3.. are never chosen and their weights are NaN.
  std::map<std::string, Buffer> inputs(int64_t s) const {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-1, 1);
    std::vector<float> x(static_cast<size_t>(s * k)), w(static_cast<size_t>(experts * n * k)), r(static_cast<size_t>(s * experts), 0.0f);
    for (float& v : x) v = d(rng);
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t i = 0; i < n * k; ++i) w[static_cast<size_t>(e * n * k + i)] = e < 3 ? d(rng) : std::numeric_limits<float>::quiet_NaN();
    for (int64_t t = 0; t < s; ++t) {
      r[static_cast<size_t>(t * experts + t % 3)] = 0.75f;
      r[static_cast<size_t>(t * experts + (t + 1) % 3)] = t % 2 ? 0.0f : 0.25f;
    }
    std::map<std::string, Buffer> in;
    in.emplace("x", Buffer::f32(x, {s, k}));
    in.emplace("w", Buffer::f32(w, {experts, n, k}).cast(weight_dtype));
    in.emplace("routing", Buffer::f32(r, {s, experts}));
    return in;
  }

  // The chosen experts' products in double, from the inputs as given (bf16 weights rounded).
  std::vector<double> expected(const std::map<std::string, Buffer>& in, int64_t s) const {
    const Buffer &x = in.at("x"), &w = in.at("w"), &r = in.at("routing");
    std::vector<double> out(static_cast<size_t>(s * n), 0.0);
    for (int64_t t = 0; t < s; ++t)
      for (int64_t e = 0; e < experts; ++e) {
        double scale = r.get(static_cast<size_t>(t * experts + e));
        if (scale == 0) continue;
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += x.get(static_cast<size_t>(t * k + p)) * w.get(static_cast<size_t>((e * n + j) * k + p));
          out[static_cast<size_t>(t * n + j)] += scale * acc;
        }
      }
    return out;
  }
};

}  // namespace luminal::moetest
