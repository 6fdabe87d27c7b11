// Which decode attentions compute their q norms and new rows this run (CudaOptions::attention_norms,
// cuda_attention_fold.h), decided before the run reaches the nodes they replace.
#include "backends/cuda/cuda_executor.h"

namespace luminal::cuda {

void CudaExecutor::plan_attention_folds() {
  attention_fold_of_.clear();
  norms_in_attention_.clear();
  if (!options_.attention_norms || !options_.attention_once) return;
  for (const auto& [id, function] : once_folded_functions_) {
    const NodeKernels& k = *kernels_.per_node[id];
    const AttentionNorms& f = *k.norms;
    if (eval(k.once_slices) > k.once_max_slices || (k.tiled && use_tiled(k))) continue;
    // One token at every dim value this run stands for (a recorded graph replays for its bucket).
    if (eval(f.tokens) != 1 || eval_true(f.tokens) != 1) continue;
    const std::vector<NodeId> nodes = {id, f.q_norm, f.k_norm, f.k_write, f.v_write};
    bool ok = std::none_of(nodes.begin(), nodes.end(), [&](NodeId m) { return keeps(m); });
    // The writes go into their caches' own buffers: nothing else reads those.
    for (NodeId w : {f.k_write, f.v_write}) {
      const Node& n = graph_.node(w);
      ok = ok && scatter_can_update_input(graph_, n) && readers_[n.inputs[0].src] == 1;
    }
    if (!ok) continue;
    for (NodeId m : nodes) attention_fold_of_[m] = id;
  }
}

}  // namespace luminal::cuda
