#include "backends/cpu/cpu_plan_timer.h"

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/fused_jit.h"
#include "backends/cpu/thread_pool.h"
#include "runtime/time_plan.h"

namespace luminal::cpu {

CpuPlanTimer::CpuPlanTimer(ThreadPool& pool, bool jit, std::string cache_dir)
    : pool_(pool), jit_(jit), cache_dir_(std::move(cache_dir)), library_(std::make_shared<KernelLibrary>()) {}

std::optional<double> CpuPlanTimer::time(const Graph& plan, const DimMap& dims, int trials, double timeout_ms) {
  FusedJit jit(library_);  // outlives the runner below, whose hook points at it
  return time_plan(
      plan, dims, trials, timeout_ms,
      [&](Interpreter& rt) {
        if (jit_) jit.prepare(rt.graph(), cache_dir_);
        rt.set_kernel_hook(cpu_kernels(pool_, jit_ ? &jit : nullptr));
      },
      &inputs_);
}

void CpuPlanTimer::prepare(const std::vector<const Graph*>& plans) {
  if (jit_) library_->add_for(plans, cache_dir_, static_cast<int>(pool_.size()));
}

void search_on_cpu(CompileOptions& opts, ThreadPool& pool, bool jit, const std::string& cache_dir) {
  auto timer = std::make_shared<CpuPlanTimer>(pool, jit, cache_dir);
  opts.profiler = [timer](const Graph& plan, const SearchOptions& s) {
    return timer->time(plan, s.profile_dims, s.trials, s.candidate_timeout_ms);
  };
  opts.prepare_candidates = [timer](const std::vector<const Graph*>& plans) { timer->prepare(plans); };
}

}  // namespace luminal::cpu
