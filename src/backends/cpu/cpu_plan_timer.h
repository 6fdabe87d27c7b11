#pragma once
// Times candidate plans on the CPU backend itself (native kernels, generated kernels, threads),
// so the search picks what is fastest on this machine rather than on the reference runtime.
// Generated kernels go to one library shared by all candidates: a candidate compiles only the
// kernels no earlier candidate had.
#include <memory>
#include <optional>
#include <string>

#include "graph/graph.h"
#include "symbolic/expr.h"

namespace luminal::cpu {

class ThreadPool;
class KernelLibrary;

class CpuPlanTimer {
 public:
  // `jit`: generate kernels (else fused nodes run on the kernel interpreter, as without a
  // compiler); `cache_dir` holds compiled kernels.
  CpuPlanTimer(ThreadPool& pool, bool jit, std::string cache_dir);
  // Median ms over `trials` runs with inputs of ones; nullopt rejects the plan (see time_plan).
  std::optional<double> time(const Graph& plan, const DimMap& dims, int trials, double timeout_ms) const;

 private:
  ThreadPool& pool_;
  bool jit_;
  std::string cache_dir_;
  std::shared_ptr<KernelLibrary> library_;
};

}  // namespace luminal::cpu
