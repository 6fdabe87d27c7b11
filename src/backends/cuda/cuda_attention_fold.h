#pragma once
// A decode attention that computes its inputs' last step itself (Qwen3's decode: the q and k
// norms before RoPE, and the cache writes of the new key and value). In the plan, a layer's
// attention reads
//   q      = RMSNormRotary(q projection, q gain, cos, sin)          (read by nothing else)
//   keys   = Scatter(key cache, index, RMSNormRotary(k projection, k gain, cos, sin))
//   values = Scatter(value cache, index, v projection)
// and a decode runs those as one joined launch between the q/k/v GEMV and the attention. Folded,
// the attention's blocks norm and rotate their q rows as they load them, and the blocks whose
// slice holds the new key compute its row and its value row from the projections, use them, and
// store them into the caches: one launch a layer fewer.
//
// Recognised by proof, not by the graph's shape alone: for sampled dims (one token, the other
// dims at several values), every element (batch b, token s, element p) of a Scatter's update
// goes, by its index program evaluated there (index_values.h), to the very element the
// attention reads as batch b's key (or value) number keys - S + s, element p, where S is the
// update's tokens: the new keys are the last S, and no other key's row changes.
#include <optional>

#include "graph/graph.h"

namespace luminal::cuda {

struct AttentionNorms {
  NodeId q_norm = 0, k_norm = 0;    // the RMSNormRotary nodes of q and of the new keys
  NodeId k_write = 0, v_write = 0;  // the Scatters into the key and value caches
  Expr tokens;                      // S: the update's tokens (a decode's 1)
};

// Attention node `id`'s fold (above), or nullopt. The caller still checks, at run time, that the
// Scatters update their caches in place and that S is 1.
std::optional<AttentionNorms> attention_norms(const Graph& g, NodeId id);

}  // namespace luminal::cuda
