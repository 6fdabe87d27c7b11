#pragma once
// Times candidate plans on the CPU backend itself (native kernels, generated kernels, threads),
// so the search picks what is fastest on this machine rather than on the reference runtime.
// Generated kernels go to one library shared by all candidates: a candidate compiles only the
// kernels no earlier candidate had. Inputs (filled with ones) are made once and lent to every
// candidate.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "graph/graph.h"
#include "runtime/time_plan.h"
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
  std::optional<double> time(const Graph& plan, const DimMap& dims, int trials, double timeout_ms);
  // Compiles the kernels of a batch of candidates together (see PrepareCandidates).
  void prepare(const std::vector<const Graph*>& plans);

 private:
  ThreadPool& pool_;
  bool jit_;
  std::string cache_dir_;
  std::shared_ptr<KernelLibrary> library_;
  ProfileInputs inputs_;
};

// Makes the search of `opts` time its candidates on this backend (profiler and batch step).
void search_on_cpu(CompileOptions& opts, ThreadPool& pool, bool jit, const std::string& cache_dir);

}  // namespace luminal::cpu
