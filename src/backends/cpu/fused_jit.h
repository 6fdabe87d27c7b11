#pragma once
// Generated kernels for a plan's elementwise work (fused elementwise kernels and lone
// elementwise primitives) and fused reductions: prepare() writes one source for all of them (identical programs
// share a function), compiles it once through JitModule and binds each node to its function;
// run() executes a node on the thread pool. Nodes without a kernel (no compiler, an uncovered
// op) are left to the other kernels.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/fused_codegen.h"
#include "backends/cpu/jit_module.h"
#include "graph/graph.h"
#include "runtime/reader.h"

namespace luminal::cpu {

class ThreadPool;

// Compiled kernels by name, from every module loaded so far.
class KernelLibrary {
 public:
  void* find(const std::string& name) const;  // the function, to cast to its kernel ABI
  // Compiles (or loads from `cache_dir`) every kernel these plans need that is not loaded yet,
  // split over up to `jobs` modules whose compilers run side by side; returns why not, or "".
  std::string add_for(const std::vector<const Graph*>& plans, const std::string& cache_dir, int jobs);
  // The same for kernel sources by name.
  std::string add(const std::map<std::string, std::string>& sources, const std::string& cache_dir, int jobs);
  size_t modules() const { return modules_.size(); }
  bool last_from_cache() const { return !modules_.empty() && modules_.back()->from_cache(); }
  std::string last_path() const { return modules_.empty() ? "" : modules_.back()->path(); }

 private:
  std::vector<std::unique_ptr<JitModule>> modules_;
  std::unordered_map<std::string, void*> fns_;
};

class FusedJit {
 public:
  // Kernels come from (and new ones go to) `library`: share one between plans that will be
  // prepared one after another, such as a search's candidates.
  explicit FusedJit(std::shared_ptr<KernelLibrary> library = nullptr) : library_(std::move(library)) {}

  // `cache_dir` holds compiled kernels (in its kernels/ folder). Nodes are remembered by
  // address: pass the graph the plan runner executes, not a copy.
  void prepare(const Graph& plan, const std::string& cache_dir);
  bool run(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
           ThreadPool& pool) const;

  // One line on what prepare did: kernels compiled or loaded, time taken, or why not.
  const std::string& status() const { return status_; }
  size_t kernels() const { return by_node_.size(); }
  bool from_cache() const { return library_ && library_->last_from_cache(); }

 private:
  struct Bound {
    void* fn;
    bool reduce;                     // FusedReduceFn, else FusedKernelFn
    std::vector<InnerStride> inner;  // per input, along the last axis (reduce: the reduced one)
    int64_t min_chunk;               // elements per thread worth a split (fewer: one thread)
  };
  bool run_reduce(const Node& n, const Bound& b, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes,
                  Buffer& out, ThreadPool& pool) const;
  std::shared_ptr<KernelLibrary> library_;
  std::unordered_map<const Node*, Bound> by_node_;
  std::string status_ = "not prepared";
};

}  // namespace luminal::cpu
