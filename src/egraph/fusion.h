#pragma once
#include "egraph/egraph.h"

namespace luminal {

// Adds fused elementwise kernels (and reductions with their elementwise prologue) as
// alternatives in every class where they apply; returns how many were added.
size_t fuse_elementwise(EGraph& g);

}  // namespace luminal
