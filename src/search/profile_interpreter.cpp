// Profiling on the reference interpreter: real runs, so the search's machinery is exercised
// end to end before the fast backends exist.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/interpreter.h"
#include "search/search.h"

namespace luminal {

std::optional<double> profile_on_interpreter(const Graph& plan, const SearchOptions& opts) {
  try {
    Interpreter rt(plan);
    DimMap dims = opts.profile_dims;
    for (const std::string& d : plan.dims())
      if (!dims.count(d)) dims[d] = 16;
    for (const auto& [name, value] : dims) rt.set_dim(name, value);
    for (NodeId id : plan.inputs()) {
      const Node& n = plan.node(id);
      std::vector<int64_t> shape;
      for (const Expr& e : n.shape) shape.push_back(e.eval(dims));
      Buffer ones(n.dtype, shape);
      for (size_t i = 0; i < ones.numel(); ++i) ones.set(i, 1.0);
      rt.set_input(n.name, std::move(ones));
    }
    std::vector<double> times;
    for (int t = 0; t < std::max(1, opts.trials); ++t) {
      auto t0 = std::chrono::steady_clock::now();
      rt.run();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      times.push_back(ms);
      if (t == 0) {
        if (ms > opts.candidate_timeout_ms) return std::nullopt;
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
