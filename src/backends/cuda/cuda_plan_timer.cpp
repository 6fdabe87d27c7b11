#include "backends/cuda/cuda_plan_timer.h"

#include <memory>

#include "backends/cuda/cuda_executor.h"
#include "core/error.h"

namespace luminal::cuda {

std::optional<double> CudaPlanTimer::time(const Graph& whole_plan, const DimMap& profile_dims, int trials, double timeout_ms) {
  try {
    Graph plan = whole_plan;
    plan.remove_dead();  // inputs no output reads (other layers' weights) are not uploaded
    // Every candidate with the same schedules (the first of each node's): tuning them is the
    // executor's work at run time, and the search compares plans, not schedules.
    CudaOptions options;
    options.tune_variants = false;
    CudaExecutor ex(plan, cache_dir_, options);
    PlanRunner runner{[&](const std::string& d, int64_t v) { ex.set_dim(d, v); },
                      [&](const std::string& name, const Buffer& b) { ex.set_input(name, b); }, [&] { ex.run(); },
                      [&](const std::string& name) { return ex.output(name); }};
    // Two untimed runs: the first casts weights and picks library algorithms, the second records
    // the CUDA graph later runs replay. With the timeout on the first run, most candidates of an
    // 8B layer were rejected.
    return time_runs(plan, profile_dims, trials, timeout_ms, 2, runner, &inputs_);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void search_on_cuda(CompileOptions& opts, const std::string& cache_dir) {
  require_usable();
  auto timer = std::make_shared<CudaPlanTimer>(cache_dir);
  opts.profiler = [timer](const Graph& plan, const SearchOptions& s) {
    return timer->time(plan, s.profile_dims, s.trials, s.candidate_timeout_ms);
  };
}

}  // namespace luminal::cuda
