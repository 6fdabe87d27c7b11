#pragma once
// Index values evaluated at compile time: what a node made only of iotas, constants and cheap
// arithmetic on them (a cache write's positions, the routing's tie-break mask) holds at one
// flat position, for proofs about the code that reads it (cuda_top_ranks.cpp,
// cuda_attention_fold.cpp).
#include <cstdint>
#include <optional>

#include "graph/graph.h"

namespace luminal::cuda {

// How deep index_value_at follows a value's inputs.
constexpr int kMaxIndexDepth = 8;

// The value of node `id` at flat position q with the dims bound as in `dims`, where it is an
// index value: an Iota, a constant, or casts, sums, products, remainders and comparisons of
// such values (as nodes or as a Fused kernel's program) through unmasked views; nullopt
// elsewhere.
std::optional<double> index_value_at(const Graph& g, NodeId id, int64_t q, const DimMap& dims, int depth = 0);

}  // namespace luminal::cuda
