#pragma once
// Common subexpression merging on a plan: nodes that compute the same thing (same op,
// attributes and inputs read through the same views) become one. Layer dedup stitches the
// compiled block into every copy, so each layer gets its own copy of work that does not depend
// on the layer: the KV cache's scatter indices and the causal mask's casts. Merged, they run once
// per step instead of once per layer.
#include "graph/graph.h"

namespace luminal {

// Inputs and Outputs are never merged (callers address them by name); ids are renumbered.
Graph merge_common_subexpressions(const Graph& plan);

}  // namespace luminal
