#include "backends/cpu/cpu_plan_timer.h"

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/fused_jit.h"
#include "runtime/time_plan.h"

namespace luminal::cpu {

CpuPlanTimer::CpuPlanTimer(ThreadPool& pool, bool jit, std::string cache_dir)
    : pool_(pool), jit_(jit), cache_dir_(std::move(cache_dir)), library_(std::make_shared<KernelLibrary>()) {}

std::optional<double> CpuPlanTimer::time(const Graph& plan, const DimMap& dims, int trials, double timeout_ms) const {
  FusedJit jit(library_);  // outlives the runner below, whose hook points at it
  return time_plan(plan, dims, trials, timeout_ms, [&](Interpreter& rt) {
    if (jit_) jit.prepare(rt.graph(), cache_dir_);
    rt.set_kernel_hook(cpu_kernels(pool_, jit_ ? &jit : nullptr));
  });
}

}  // namespace luminal::cpu
