// When a plan's small groups (SmallGroup, cuda_codegen.h) run, and where in the plan's order.
#include <algorithm>

#include "backends/cuda/cuda_executor.h"

namespace luminal::cuda {

void CudaExecutor::prepare_small_groups(const std::map<std::string, void*>& by_name) {
  position_.assign(graph_.size(), 0);
  for (size_t i = 0; i < order_.size(); ++i) position_[order_[i]] = i;
  small_group_runs_.assign(kernels_.small_groups.size(), {});
  for (size_t g = 0; g < kernels_.small_groups.size(); ++g) {
    const SmallGroup& grp = kernels_.small_groups[g];
    SmallGroupRun& r = small_group_runs_[g];
    r.function = by_name.at(grp.launch.function);
    size_t after = 0;  // the leaves' last place, inputs aside (always there)
    for (NodeId l : grp.leaves)
      if (graph_.node(l).op != OpKind::Input) after = std::max(after, position_[l] + 1);
    auto first = std::find_if(grp.nodes.begin(), grp.nodes.end(), [&](NodeId m) { return position_[m] >= after; });
    if (first == grp.nodes.end()) continue;
    r.launch_at = *first;
    // A linear group's member may have no value of its own (its GEMV stores only their gated product).
    // (A member in a linear group runs with it: a router read beside other layers.)
    auto in_linear_group = [&](NodeId l) { return group_of_member_.count(l) > 0; };
    r.valid = std::none_of(grp.leaves.begin(), grp.leaves.end(), in_linear_group) && std::none_of(grp.nodes.begin(), grp.nodes.end(), in_linear_group);
    for (NodeId m : grp.nodes)
      for (NodeId reader : reader_lists_[m])
        if (std::find(grp.nodes.begin(), grp.nodes.end(), reader) == grp.nodes.end() && position_[reader] <= position_[r.launch_at])
          r.valid = false;
    if (r.valid)
      for (NodeId m : grp.nodes) small_group_of_[m] = g;
    if (r.valid && grp.tail_producer && tail_forms_.count(*grp.tail_producer)) tail_group_of_[*grp.tail_producer] = g;
    if (r.valid && grp.fold_reader) fold_group_of_[*grp.fold_reader] = g;
  }
}

bool CudaExecutor::small_group_norms_deferred(const SmallGroup& grp) const {
  // A linear member (a router) reads the x and gain of the norm before it, not the norm: x then
  // stays live only while the norm's value is deferred to its readers (uses of the norm keep its
  // inputs); a norm that ran has let x go after its last reader outside the group.
  for (NodeId m : grp.nodes) {
    const Node& n = graph_.node(m);
    if (n.op != OpKind::Kernel || n.kernel != "Matmul") continue;
    const Node& a = graph_.node(n.inputs[0].src);
    if (a.op == OpKind::Kernel && (a.kernel == "RMSNorm" || a.kernel == "RMSNormMul") && !deferred_norms_.count(n.inputs[0].src)) return false;
  }
  return true;
}

bool CudaExecutor::runs_small_group(size_t g) {
  if (!options_.small_groups || !small_group_runs_[g].valid) return false;
  for (NodeId m : kernels_.small_groups[g].nodes) {
    const Node& n = graph_.node(m);
    if (keeps(m) || eval(n.shape[0]) != 1 || eval_true(n.shape[0]) != 1) return false;
  }
  return true;
}

std::pair<DevicePtr, uint64_t> CudaExecutor::weights_after(NodeId at) const {
  for (size_t p = position_[at] + 1; p < order_.size(); ++p) {
    const Node& n = graph_.node(order_[p]);
    const std::optional<NodeKernels>& k = kernels_.per_node[order_[p]];
    if (n.op != OpKind::Kernel || n.kernel != "Matmul" || !k || !k->linear) continue;
    const auto w = inputs_.find(n.inputs[1].src);
    if (w == inputs_.end()) return {0, 0};  // its weight is computed: nothing to ask for early
    DevicePtr start = w->second.ptr;
    uint64_t bytes = w->second.bytes;
    if (auto g = group_of_member_.find(order_[p]); g != group_of_member_.end() && weights_in_place(groups_[g->second]))
      start = groups_[g->second].base, bytes = groups_[g->second].offsets.back();
    return {start, std::min<uint64_t>(bytes, static_cast<uint64_t>(options_.group_prefetch_bytes)) & ~uint64_t{15}};
  }
  return {0, 0};
}

}  // namespace luminal::cuda
