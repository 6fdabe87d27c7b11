#pragma once
// The reference interpreter: runs any HLIR graph with exact semantics, one element at a time.
// It is the oracle every other backend is tested against, so it favours clarity over speed.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/buffer.h"
#include "runtime/reader.h"
#include "runtime/run_invariants.h"

namespace luminal {

class Interpreter {
 public:
  explicit Interpreter(Graph graph);

  // Inputs persist across runs (set weights once, run many times). A buffer of another dtype
  // is converted to the input's dtype. Dims that appear bare in an input's declared shape
  // are bound from the buffer's shape unless set explicitly. A Scatter whose destination is an
  // input that nothing else reads updates that input in place (a KV cache): later runs see it.
  // Values computed from inputs and constants alone, with no dynamic dim, are kept from run to
  // run until one of their inputs is set again (runtime/run_invariants.h).
  void set_input(const std::string& name, Buffer data);
  void set_dim(const std::string& name, int64_t value);
  void run();

  const Buffer& output(const std::string& name) const;      // as computed, in its own dtype
  Buffer read_output(const std::string& name, DType as) const;  // converted to `as`
  // The output's buffer itself, moved out to the caller (no copy; output() no longer has it
  // until the next run).
  Buffer take_output(const std::string& name);
  std::vector<float> output_f32(const std::string& name) const { return read_output(name, DType::F32).to_f32(); }
  // Raw typed access: T must match the output's dtype exactly (float for f32, int32_t for i32).
  template <class T>
  std::vector<T> output_as(const std::string& name) const;

  const Graph& graph() const { return graph_; }

  // A backend's kernels: called for every Kernel node and every elementwise primitive (Cast,
  // unary, binary) before the reference implementation, with readers of its inputs (through
  // their views) and their concrete shapes; returns false to leave the node to the reference.
  using KernelHook = std::function<bool(const Node& n, const std::vector<Reader>& in,
                                        const std::vector<std::vector<int64_t>>& shapes, Buffer& out)>;
  void set_kernel_hook(KernelHook hook) { hook_ = std::move(hook); }
  const DimMap& dims() const { return dims_; }

  // Per-kernel timing: with profiling on, run() adds each node's wall time under a label
  // ("native Matmul", "reference Softmax", "Add"). Entries come back slowest first.
  struct ProfileEntry {
    std::string label;
    int64_t calls = 0;
    double ms = 0;
  };
  void set_profiling(bool on) { profiling_ = on; }
  void clear_profile() { profile_.clear(); }
  std::vector<ProfileEntry> profile() const;

 private:
  void bind_dims();
  Buffer eval(NodeId id, const Node& n, const std::vector<const Buffer*>& in);
  bool scatter_in_place(const Node& n, const std::vector<int>& uses) const;
  void scatter_into(NodeId id, const Node& n, Buffer& dest, const Buffer& idx, const Buffer& src);
  std::vector<int64_t> concrete(const std::vector<Expr>& shape) const;

  Graph graph_;
  std::map<NodeId, Buffer> inputs_;
  std::map<std::string, Buffer> outputs_;
  DimMap explicit_dims_;
  KernelHook hook_;
  std::vector<std::vector<std::optional<IndexExprs>>> index_exprs_;  // per node, per input
  const IndexExprs& index_exprs(NodeId node, size_t input);
  std::multimap<size_t, Storage> free_storage_;  // freed intermediates, by capacity
  void free_buffer(std::vector<std::optional<Buffer>>& live, NodeId id);
  Storage take_storage(DType dtype, const std::vector<int64_t>& shape);
  DimMap dims_;
  std::vector<NodeId> order_;  // topological order, computed on the first run
  std::vector<int> readers_;   // per node: how many edges read it
  std::optional<std::vector<std::string>> graph_dims_;
  std::vector<std::optional<ExprProgram>> iota_programs_;  // per Iota node without dims  // the graph's dynamic dims, on first use
  bool profiling_ = false;
  bool last_native_ = false;  // the hook ran the last Kernel node (a profile label)
  std::map<std::string, ProfileEntry> profile_;
  RunInvariants invariants_;  // values kept from one run to the next (weights' casts, tables)
};

// Profile entries by label, slowest first (every runner reports its profile this way).
std::vector<Interpreter::ProfileEntry> slowest_first(const std::map<std::string, Interpreter::ProfileEntry>& by_label);

}  // namespace luminal
