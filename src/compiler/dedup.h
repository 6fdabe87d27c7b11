#pragma once
// Layer dedup: finds the repeated blocks of a graph (the 32 identical layers of a Llama) by a
// structural hash, so the compiler builds, saturates and searches one e-graph per distinct
// block and stitches the chosen plan into every copy.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace luminal {

struct RepeatedBlocks {
  size_t start = 0, period = 0, copies = 0;  // block k holds node ids [start + k*period, +period)
  // A block's nodes are the ids in its range except Input and Output nodes, which stay outside
  // (their names differ per copy).
  bool in_block(NodeId id, size_t* block = nullptr) const;
};

// The longest run of isomorphic blocks in the graph's creation order, or nullopt.
std::optional<RepeatedBlocks> find_repeated_blocks(const Graph& g);

// The graph cut into a template block and an outer graph, each compiled on its own.
struct BlockSplit {
  Graph block;  // block 0, with placeholder inputs "__ext_N" and outputs "__out_N"
  Graph outer;  // everything else, with placeholder inputs "__blk_K_P" and outputs "__outer_N"
};
BlockSplit split_blocks(const Graph& g, const RepeatedBlocks& rb);

// Instantiates the compiled block plan once per copy inside the compiled outer plan.
Graph stitch_blocks(const Graph& g, const RepeatedBlocks& rb, const Graph& block_plan, const Graph& outer_plan);

}  // namespace luminal
