#pragma once
// A lossless text form of graphs (and so of plans), for the on-disk plan cache.
#include <string>

#include "graph/graph.h"

namespace luminal {

std::string serialize(const Graph& g);
Graph deserialize(const std::string& text);  // throws Error naming the line on malformed input

}  // namespace luminal
