#include "runtime/time_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace luminal {

namespace {

// Filled by pattern, not element by element: a model's embedding alone has 10^8 elements.
Buffer ones(DType t, const std::vector<int64_t>& shape) {
  Buffer b(t, shape);
  Buffer one(t, {1});
  one.set(0, 1.0);
  const size_t es = dtype_size(t);
  uint8_t* p = b.bytes();
  for (size_t i = 0; i < b.numel(); ++i) std::memcpy(p + i * es, one.bytes(), es);
  return b;
}

}  // namespace

std::optional<double> time_plan(const Graph& plan, const DimMap& profile_dims, int trials, double timeout_ms,
                                const std::function<void(Interpreter&)>& setup) {
  try {
    Interpreter rt(plan);
    if (setup) setup(rt);
    DimMap dims = profile_dims;
    for (const std::string& d : plan.dims())
      if (!dims.count(d)) dims[d] = 16;
    for (const auto& [name, value] : dims) rt.set_dim(name, value);
    for (NodeId id : plan.inputs()) {
      const Node& n = plan.node(id);
      std::vector<int64_t> shape;
      for (const Expr& e : n.shape) shape.push_back(e.eval(dims));
      rt.set_input(n.name, ones(n.dtype, shape));
    }
    std::vector<double> times;
    for (int t = 0; t < std::max(1, trials); ++t) {
      auto t0 = std::chrono::steady_clock::now();
      rt.run();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      times.push_back(ms);
      if (t == 0) {
        if (ms > timeout_ms) return std::nullopt;
        for (NodeId id : plan.outputs()) {
          const Buffer& out = rt.output(plan.node(id).name);
          if (!is_float(out.dtype())) continue;
          for (size_t i = 0; i < out.numel(); ++i)
            if (!std::isfinite(out.get(i))) return std::nullopt;
        }
      }
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  } catch (const std::exception&) {
    return std::nullopt;  // a failing candidate is rejected, not fatal
  }
}

}  // namespace luminal
