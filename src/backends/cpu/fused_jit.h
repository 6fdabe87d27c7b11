#pragma once
// Generated kernels for a plan's elementwise work (fused elementwise kernels and lone
// elementwise primitives): prepare() writes one C++ source for all of them (identical programs
// share a function), compiles it once through JitModule and binds each node to its function;
// run() executes a node on the thread pool. Nodes without a kernel (no compiler, an uncovered
// op) are left to the other kernels.
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
  FusedKernelFn find(const std::string& name) const;
  // Compiles (or loads from `cache_dir`) one module defining the named sources; returns why
  // not, or "" on success.
  std::string add(const std::vector<std::pair<std::string, std::string>>& named_sources, const std::string& cache_dir);
  bool last_from_cache() const { return !modules_.empty() && modules_.back()->from_cache(); }
  std::string last_path() const { return modules_.empty() ? "" : modules_.back()->path(); }

 private:
  std::vector<std::unique_ptr<JitModule>> modules_;
  std::unordered_map<std::string, FusedKernelFn> fns_;
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
    FusedKernelFn fn;
    std::vector<InnerStride> inner;
  };
  std::shared_ptr<KernelLibrary> library_;
  std::unordered_map<const Node*, Bound> by_node_;
  std::string status_ = "not prepared";
};

}  // namespace luminal::cpu
