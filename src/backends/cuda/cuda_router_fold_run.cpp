// When a decode's router runs inside its o projection's launch (fold_routers_through_o,
// cuda_router_fold.cpp; CudaOptions::routers_through_o), and the weights it needs for that.
#include "backends/cuda/cuda_executor.h"

namespace luminal::cuda {

void CudaExecutor::prepare_router_folds(const std::map<std::string, void*>& by_name) {
  if (!options_.routers_through_o) return;
  for (size_t g = 0; g < kernels_.small_groups.size(); ++g) {
    const SmallGroup& grp = kernels_.small_groups[g];
    if (!grp.router_through_o || !small_group_runs_[g].valid) continue;
    const RouterThroughO& f = *grp.router_through_o;
    const NodeKernels* twin = kernels_.per_node[f.o] ? kernels_.per_node[f.o]->router_logits.get() : nullptr;
    // Both weights whole in buffers of their own (a linear group's weights move into its allocation).
    if (!twin || group_of_member_.count(f.o) || group_of_member_.count(f.router) || group_of_weight_.count(f.router_weight) ||
        group_of_weight_.count(f.o_weight))
      continue;
    RouterFold r;
    r.group = g;
    r.form = load_form(twin, by_name);
    r.group_function = by_name.at(f.group_function);
    r.prep_function = by_name.at(f.prep_function);
    router_folds_[f.o] = r;
  }
}

std::optional<size_t> CudaExecutor::router_fold_at(NodeId o, bool gemv_residual, bool capture) {
  const auto it = router_folds_.find(o);
  if (it == router_folds_.end() || !gemv_residual) return std::nullopt;
  RouterFold& r = it->second;
  const SmallGroup& grp = kernels_.small_groups[r.group];
  const RouterThroughO& f = *grp.router_through_o;
  const Node& n = graph_.node(o);
  // One token; the group launched on its own this run, reading the router's value alone.
  if (eval(n.shape[0]) != 1 || eval_true(n.shape[0]) != 1 || keeps(o) || keeps(f.router) || reader_lists_[o].size() != 1 ||
      reader_lists_[o][0] != f.sum || !runs_small_group(r.group) || !small_group_norms_deferred(grp))
    return std::nullopt;
  const auto wr = inputs_.find(f.router_weight), g = inputs_.find(f.gain), wo = inputs_.find(f.o_weight);
  if (wr == inputs_.end() || g == inputs_.end() || wo == inputs_.end()) return std::nullopt;
  // M and A are values kept from the weights: a weight set again after them drops the recorded
  // graphs (invariant_inputs_, new_values), which replay the launches that read them, and then
  // changes between runs, so the router runs on its own from then on. Never made while a graph
  // is recorded (its replays would make them every step).
  const std::array<NodeId, 3> weights = {f.router_weight, f.gain, f.o_weight};
  for (NodeId w : weights)
    if (changing_inputs_.count(w)) return std::nullopt;
  const std::array<uint64_t, 3> versions = {input_versions_[f.router_weight], input_versions_[f.gain], input_versions_[f.o_weight]};
  if (!r.weights || r.versions != versions) {
    if (capture) return std::nullopt;
    for (NodeId w : weights) invariant_inputs_.insert(w);
    if (!r.weights) r.weights = ctx_.alloc(static_cast<size_t>(f.experts * (f.attention_width + f.hidden)) * sizeof(float));
    std::vector<DevicePtr> args = {wr->second.ptr, g->second.ptr, wo->second.ptr};
    DevicePtr out = r.weights, dims = dims_dev_;
    std::vector<void*> a = {&out, &args[0], &args[1], &args[2], &dims};
    const unsigned blocks = static_cast<unsigned>(std::max(1, ctx_.info().multiprocessors) * 4);
    ctx_.launch(r.prep_function, blocks, 1, 1, static_cast<unsigned>(kBlockThreads), 0, a.data(), false);
    r.versions = versions;
  }
  return r.group;
}

}  // namespace luminal::cuda
