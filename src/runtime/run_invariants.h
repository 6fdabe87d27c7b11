#pragma once
// Values that cannot change from one run to the next: nodes that read only constants, constant
// iotas and inputs (weights), with no dynamic dim anywhere in their shapes or views. A decode
// step otherwise recomputes them every token: casts of norm weights, index tables, constant
// masks (about 400 of a Qwen3 step's 900 kernel calls). The interpreter keeps each one after its
// first run and reuses it until one of the inputs it reads is set again or written in place.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "graph/graph.h"
#include "runtime/buffer.h"

namespace luminal {

class RunInvariants {
 public:
  // Marks the invariant nodes of `g`; `order` is a topological order of the nodes to run.
  void analyse(const Graph& g, const std::vector<NodeId>& order);
  bool invariant(NodeId id) const { return id < invariant_.size() && invariant_[id]; }
  // The inputs an invariant node depends on (for backends that keep values themselves).
  const std::vector<NodeId>& reads(NodeId id) const { return reads_.at(id); }

  // An input's contents changed (set again, or a Scatter wrote into it).
  void input_changed(NodeId input) { ++version_[input]; }

  // The kept value of `id` when the inputs it read are unchanged since, else nullopt.
  std::optional<Buffer> reuse(NodeId id);
  // Keeps `value` (computed now) when the budget allows; returns what the run should use: a
  // read-only view of the kept bytes, or `value` itself. A node whose kept value is replaced
  // before it was ever reused (its inputs change every run: a fixed-shape graph's activations)
  // is not kept again, so its storage goes back to the interpreter's free list as before.
  Buffer keep(NodeId id, Buffer value);

  // Kept values are capped in total: copies of large weights would double the model's memory.
  static constexpr size_t kMaxKeptBytes = size_t(64) << 20;
  static constexpr size_t kMaxInputsPerValue = 4;

 private:
  std::vector<uint8_t> invariant_;
  std::vector<std::vector<NodeId>> reads_;  // per invariant node: the inputs it depends on
  std::map<NodeId, uint64_t> version_;
  struct Kept {
    Buffer value;
    std::vector<uint64_t> versions;  // of reads_[id], when it was computed
    bool reused = false;
  };
  std::map<NodeId, Kept> kept_;
  size_t kept_bytes_ = 0;
  std::vector<uint64_t> versions_of(NodeId id) const;
};

}  // namespace luminal
