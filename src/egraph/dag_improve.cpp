#include "egraph/dag_improve.h"

#include <cmath>
#include <unordered_set>

namespace luminal {

namespace {

// The plan a choice gives, as reference counts: how many chosen parents (and roots) read each
// class. A class whose count drops to zero leaves the plan with its cost; one that rises from
// zero joins it. Adding before removing keeps a shared upstream from leaving and coming back.
class DagCost {
 public:
  DagCost(const EGraph& eg, Choice& choice, const CostModel& cm) : eg_(eg), choice_(choice), cm_(cm) {}

  double add(ClassId c) {
    c = eg_.find(c);
    if (refs_[c]++ > 0) return 0;
    const ENode& n = choice_.at(c);
    double d = cm_.node_cost(eg_, n, eg_.info(c));
    for (ClassId k : n.kids) d += add(k);
    return d;
  }

  double remove(ClassId c) {
    c = eg_.find(c);
    if (--refs_[c] > 0) return 0;
    const ENode& n = choice_.at(c);
    double d = -cm_.node_cost(eg_, n, eg_.info(c));
    for (ClassId k : n.kids) d += remove(k);
    return d;
  }

  bool in_plan(ClassId c) const {
    auto it = refs_.find(c);
    return it != refs_.end() && it->second > 0;
  }

  // Whether the chosen plan below `kids` reads `target` (a swap that would close a cycle).
  bool reaches(const std::vector<ClassId>& kids, ClassId target) const {
    std::vector<ClassId> stack(kids.begin(), kids.end());
    std::unordered_set<ClassId> seen;
    while (!stack.empty()) {
      ClassId c = eg_.find(stack.back());
      stack.pop_back();
      if (c == target) return true;
      if (!seen.insert(c).second) continue;
      for (ClassId k : choice_.at(c).kids) stack.push_back(k);
    }
    return false;
  }

 private:
  const EGraph& eg_;
  Choice& choice_;
  const CostModel& cm_;
  std::unordered_map<ClassId, int64_t> refs_;
};

ENode canonical(const EGraph& eg, ENode n) {
  for (ClassId& k : n.kids) k = eg.find(k);
  return n;
}

}  // namespace

int improve_dag_cost(const EGraph& eg, Choice& choice, const std::vector<ClassId>& roots, const CostModel& cm, int max_rounds) {
  DagCost dag(eg, choice, cm);
  for (ClassId r : roots) dag.add(r);
  int swaps = 0;
  for (int round = 0; round < max_rounds; ++round) {
    int before = swaps;
    for (ClassId c : eg.class_ids()) {
      if (!dag.in_plan(c)) continue;
      for (const ENode& raw : eg.eclass(c).nodes) {
        ENode n = canonical(eg, raw);
        const ENode old = choice.at(c);
        if (n == canonical(eg, old)) continue;
        bool usable = true;
        for (ClassId k : n.kids) usable = usable && k != c && choice.count(k);
        if (!usable) continue;
        // Relative slack: float noise in long sums must not count as a gain (and loop forever).
        const double slack = -1e-9 * (1 + std::abs(cm.node_cost(eg, old, eg.info(c))));
        auto try_swap = [&]() {
          double delta = cm.node_cost(eg, n, eg.info(c)) - cm.node_cost(eg, old, eg.info(c));
          for (ClassId k : n.kids) delta += dag.add(k);
          for (ClassId k : old.kids) delta += dag.remove(k);
          if (delta < slack && !dag.reaches(n.kids, c)) {
            choice[c] = n;
            ++swaps;
            return true;
          }
          for (ClassId k : old.kids) dag.add(k);
          for (ClassId k : n.kids) dag.remove(k);
          return false;
        };
        if (try_swap()) continue;
        // Two steps at once: the node with a child that joins the plan in another of its forms
        // (a cast read through a view, whose class holds the fused cast). Greedy choices for
        // classes outside the plan were made with shares of readers the plan never has.
        bool swapped = false;
        for (ClassId k : n.kids) {
          if (swapped || dag.in_plan(k) || k == c) continue;
          const ENode kept = choice.at(k);
          for (const ENode& raw_alt : eg.eclass(k).nodes) {
            ENode alt = canonical(eg, raw_alt);
            if (alt == canonical(eg, kept)) continue;
            bool ok = true;
            for (ClassId j : alt.kids) ok = ok && j != k && j != c && choice.count(j);
            if (!ok) continue;
            choice[k] = alt;
            if (!dag.reaches(alt.kids, k) && try_swap()) {
              swapped = true;
              break;
            }
          }
          if (!swapped) choice[k] = kept;
        }
      }
    }
    if (swaps == before) break;
  }
  return swaps;
}

}  // namespace luminal
