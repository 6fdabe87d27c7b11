#include "egraph/egraph.h"

#include <algorithm>

#include "core/error.h"

namespace luminal {

ClassId EGraph::find(ClassId id) const {
  ClassId root = id;
  while (parent_[root] != root) root = parent_[root];
  while (parent_[id] != root) {
    ClassId next = parent_[id];
    parent_[id] = root;
    id = next;
  }
  return root;
}

ENode EGraph::canonical(ENode n) const {
  for (ClassId& k : n.kids) k = find(k);
  return n;
}

ClassId EGraph::add(ENode n) {
  n = canonical(std::move(n));
  if (auto it = memo_.find(n); it != memo_.end()) return find(it->second);
  return add(n, infer(n));
}

ClassId EGraph::add(ENode n, const TensorInfo& info) {
  n = canonical(std::move(n));
  if (auto it = memo_.find(n); it != memo_.end()) return find(it->second);
  const OpInfo& op = ops_.info(n.op);
  LM_ASSERT(op.arity < 0 || static_cast<size_t>(op.arity) == n.kids.size(),
            op.name + " takes " + std::to_string(op.arity) + " inputs, got " + std::to_string(n.kids.size()));
  ClassId id = static_cast<ClassId>(classes_.size());
  parent_.push_back(id);
  classes_.emplace_back();
  classes_[id].nodes.push_back(n);
  classes_[id].info = info;
  for (ClassId k : n.kids) classes_[k].parents.emplace_back(n, id);
  memo_.emplace(std::move(n), id);
  ++class_count_;
  ++version_;
  return id;
}

static bool same_info(const TensorInfo& a, const TensorInfo& b) {
  return a.dtype == b.dtype && provably_equal(a.shape, b.shape);
}

bool EGraph::merge(ClassId a, ClassId b, const std::string& why) {
  a = find(a);
  b = find(b);
  if (a == b) return false;
  if (!same_info(classes_[a].info, classes_[b].info))
    throw InternalError("rule '" + why + "' equated a " + dtype_name(classes_[a].info.dtype) +
                        to_string(classes_[a].info.shape) + " class with a " + dtype_name(classes_[b].info.dtype) +
                        to_string(classes_[b].info.shape) + " one; the rule is wrong");
  if (classes_[a].parents.size() < classes_[b].parents.size()) std::swap(a, b);
  parent_[b] = a;
  EClass& ca = classes_[a];
  EClass& cb = classes_[b];
  ca.nodes.insert(ca.nodes.end(), cb.nodes.begin(), cb.nodes.end());
  ca.parents.insert(ca.parents.end(), cb.parents.begin(), cb.parents.end());
  cb.nodes.clear();
  cb.nodes.shrink_to_fit();
  cb.parents.clear();
  cb.parents.shrink_to_fit();
  pending_.push_back(a);
  --class_count_;
  ++version_;
  return true;
}

void EGraph::repair(ClassId id) {
  EClass& c = classes_[id];
  // Re-canonicalise every parent node in the memo; congruent parents merge.
  std::vector<std::pair<ENode, ClassId>> parents = std::move(c.parents);
  for (auto& [node, cls] : parents) {
    memo_.erase(node);
    node = canonical(std::move(node));
    auto [it, fresh] = memo_.emplace(node, find(cls));
    if (!fresh && find(it->second) != find(cls)) merge(it->second, cls, "congruence");
    cls = find(cls);
  }
  std::unordered_map<ENode, ClassId, ENodeHash> seen;
  std::vector<std::pair<ENode, ClassId>> kept;
  for (auto& [node, cls] : parents) {
    auto [it, fresh] = seen.emplace(node, find(cls));
    if (fresh) kept.emplace_back(node, find(cls));
  }
  classes_[find(id)].parents.insert(classes_[find(id)].parents.end(), kept.begin(), kept.end());
}

void EGraph::rebuild() {
  while (!pending_.empty()) {
    std::vector<ClassId> todo = std::move(pending_);
    pending_.clear();
    for (ClassId& t : todo) t = find(t);
    std::sort(todo.begin(), todo.end());
    todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
    for (ClassId t : todo) repair(t);
  }
  // Canonical, duplicate-free node lists for matching and extraction.
  for (ClassId id = 0; id < classes_.size(); ++id) {
    if (find(id) != id) continue;
    std::vector<ENode>& nodes = classes_[id].nodes;
    for (ENode& n : nodes) n = canonical(std::move(n));
    std::sort(nodes.begin(), nodes.end(), [](const ENode& x, const ENode& y) {
      if (x.op != y.op) return x.op < y.op;
      if (x.attr != y.attr) return x.attr < y.attr;
      return x.kids < y.kids;
    });
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  }
}

std::vector<ClassId> EGraph::class_ids() const {
  std::vector<ClassId> r;
  for (ClassId id = 0; id < classes_.size(); ++id)
    if (find(id) == id) r.push_back(id);
  return r;
}

std::string EGraph::describe(const ENode& n) const {
  std::string s = ops_.info(n.op).name;
  if (n.attr != AttrTable::kNone) s += "[" + attrs_.get(n.attr).to_string() + "]";
  s += "(";
  for (size_t i = 0; i < n.kids.size(); ++i) s += (i ? ", " : "") + std::string("c") + std::to_string(find(n.kids[i]));
  return s + ")";
}

}  // namespace luminal
