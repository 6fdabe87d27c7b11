#pragma once
// Top-k ranks: a fused reduction that counts, for each of a token's E values, the values before
// it in top-k order (larger, or equal at a lower index; a NaN is before nothing and has nothing
// before it), and maps each count through an epilogue that is constant from some k on. That is
// the MoE routing's choice of experts as the decoder writes it (src/models/decoder_graph.cpp,
// route()): E² comparisons, which a small group shared out over 16 blocks and a count of
// finished blocks. A warp gets the same counts from k rounds of argmax (the first k in order get
// their rank, the rest all map to the epilogue's constant tail), so the group runs as one block.
//
// Recognised by proof, not by the graph's shape: the two float inputs read one vector, a row's
// own value and the compared one (their index expressions evaluated at every pair); the third
// input is exactly [k < e] (evaluated at every pair); the prologue touches the floats only
// through comparisons in f32 with each other or with ±inf, so its value is a function of their
// order type, and it is evaluated at a value of every order type against the predicate above;
// the epilogue is evaluated at every count.
#include <cstdint>
#include <optional>

#include "graph/graph.h"

namespace luminal::cuda {

struct TopRanks {
  int64_t values = 0;  // E: a token's values, the count's rows and its reduced length
  int64_t rounds = 0;  // k: counts from k on map to the epilogue's one value
  size_t mine = 0;     // the input that reads a row's own value (at element (e, 0) for row e)
};

// Node `id`'s top-k ranks form for one token (its first dim bound to 1), or nullopt.
std::optional<TopRanks> top_ranks_of(const Graph& g, NodeId id);

}  // namespace luminal::cuda
