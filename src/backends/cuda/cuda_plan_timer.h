#pragma once
// Times candidate plans on the GPU for the search: each candidate runs on the CUDA executor
// (its kernels from NVRTC, cached on disk like any plan's), so the search keeps the plan that is
// fastest on this device, not on the reference interpreter. Inputs (ones) are made once on the
// host and lent to every candidate.
#include <optional>
#include <string>

#include "compiler/compile.h"
#include "graph/graph.h"
#include "runtime/time_plan.h"
#include "symbolic/expr.h"

namespace luminal::cuda {

class CudaPlanTimer {
 public:
  // `cache_dir`: where compiled kernels are kept (empty: none).
  explicit CudaPlanTimer(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}
  // Median ms of `trials` runs after two untimed ones (the first computes what runs keep, the
  // second records the CUDA graph later runs replay, as a decode step does). nullopt rejects the
  // plan: NaN or Inf in a float output, an error, or a first timed run over `timeout_ms`. Never
  // throws.
  std::optional<double> time(const Graph& plan, const DimMap& dims, int trials, double timeout_ms);

 private:
  std::string cache_dir_;
  ProfileInputs inputs_;
};

// Makes the search of `opts` time its candidates on the GPU. Throws at once, saying why, where
// the CUDA backend cannot run (require_usable).
void search_on_cuda(CompileOptions& opts, const std::string& cache_dir);

}  // namespace luminal::cuda
