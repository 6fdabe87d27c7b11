#pragma once
// Between HLIR graphs and e-graphs: every node becomes an e-node, every non-identity edge view
// an explicit View e-node; an extracted choice (one e-node per class) becomes a graph again.
#include <unordered_map>
#include <vector>

#include "egraph/egraph.h"
#include "graph/graph.h"

namespace luminal {

struct Seeded {
  std::vector<ClassId> node_class;  // per graph node
  std::vector<ClassId> inputs;      // classes of the Input nodes, in graph order (used or not)
  std::vector<ClassId> outputs;     // classes of the Output nodes, in graph order
  std::vector<ClassId> roots() const;  // inputs then outputs: what a plan must keep
};
Seeded add_graph(EGraph& eg, const Graph& g);

// One chosen e-node per canonical class id.
using Choice = std::unordered_map<ClassId, ENode>;

// Rebuilds a graph from the chosen nodes reachable from `roots` (Seeded::roots()). View nodes fold into the
// consuming edge (composed with views below them). Throws Error if a chosen op is not an HLIR
// primitive and InternalError if the choice is cyclic.
Graph choice_to_graph(const EGraph& eg, const Choice& choice, const std::vector<ClassId>& roots);

}  // namespace luminal
