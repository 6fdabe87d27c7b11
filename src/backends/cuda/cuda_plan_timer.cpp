#include "backends/cuda/cuda_plan_timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_executor.h"
#include "core/error.h"

namespace luminal::cuda {

std::optional<double> CudaPlanTimer::time(const Graph& whole_plan, const DimMap& profile_dims, int trials, double timeout_ms) {
  try {
    Graph plan = whole_plan;
    plan.remove_dead();  // inputs no output reads (other layers' weights) are not uploaded
    DimMap dims = profile_dims;
    for (const std::string& d : plan.dims())
      if (!dims.count(d)) dims[d] = 16;  // as time_plan does
    std::vector<bool> written(plan.size(), false);  // scatter destinations are written in place
    for (const Node& n : plan.nodes())
      if (n.op == OpKind::Scatter && !n.inputs.empty()) written[n.inputs[0].src] = true;
    // Every candidate with the same schedules (the first of each node's): tuning them is the
    // executor's work at run time, and the search compares plans, not schedules.
    CudaOptions options;
    options.tune_variants = false;
    CudaExecutor ex(plan, cache_dir_, options);
    for (const std::string& d : plan.dims()) ex.set_dim(d, dims.at(d));
    for (NodeId id : plan.inputs()) {
      const Node& n = plan.node(id);
      std::vector<int64_t> shape;
      for (const Expr& e : n.shape) shape.push_back(e.eval(dims));
      ex.set_input(n.name, inputs_.get(n.name, n.dtype, shape, written[id]));
    }
    auto timed_run = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      ex.run();  // returns once the device is done
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    ex.run();
    for (NodeId id : plan.outputs()) {
      const Buffer out = ex.output(plan.node(id).name);
      if (!is_float(out.dtype())) continue;
      for (size_t i = 0; i < out.numel(); ++i)
        if (!std::isfinite(out.get(i))) return std::nullopt;
    }
    ex.run();
    // The timeout applies from the first steady run: the first two also cast weights, pick
    // library algorithms and record a graph, which took several times a steady run and had
    // most candidates of an 8B layer rejected.
    std::vector<double> times{timed_run()};
    if (times[0] > timeout_ms) return std::nullopt;
    for (int t = 1; t < std::max(1, trials); ++t) times.push_back(timed_run());
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void search_on_cuda(CompileOptions& opts, const std::string& cache_dir) {
  auto timer = std::make_shared<CudaPlanTimer>(cache_dir);
  opts.profiler = [timer](const Graph& plan, const SearchOptions& s) {
    return timer->time(plan, s.profile_dims, s.trials, s.candidate_timeout_ms);
  };
}

}  // namespace luminal::cuda
