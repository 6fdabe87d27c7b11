#pragma once
// Local search on the plan's true (DAG) cost. Greedy extraction ranks nodes by tree costs with
// each shared class split among its readers: a heuristic that undervalues chains whose input is
// read twice (softmax's max and exp both read the scores), so a kernel that replaces the whole
// chain (Attention) can lose on paper while it wins on every byte. This pass tries every other
// node of every class in the plan and keeps a swap when the plan's DAG cost (plan_cost: each
// reachable class once) drops and no cycle forms.
#include "egraph/extract.h"

namespace luminal {

// Improves `choice` in place; returns the number of swaps kept. Rounds stop when one keeps none.
int improve_dag_cost(const EGraph& eg, Choice& choice, const std::vector<ClassId>& roots, const CostModel& cm, int max_rounds = 3);

}  // namespace luminal
