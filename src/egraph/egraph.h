#pragma once
// The e-graph: hash-consed e-nodes in e-classes joined by a union-find, with deferred
// rebuilding (egg's invariant restoration) and a tensor analysis (dtype + shape) per class.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "egraph/attr.h"
#include "egraph/op_table.h"

namespace luminal {

using ClassId = uint32_t;

struct ENode {
  OpId op = 0;
  AttrId attr = AttrTable::kNone;
  std::vector<ClassId> kids;
  bool operator==(const ENode& o) const { return op == o.op && attr == o.attr && kids == o.kids; }
};

struct ENodeHash {
  size_t operator()(const ENode& n) const {
    uint64_t h = (static_cast<uint64_t>(n.op) << 32) ^ n.attr;
    for (ClassId k : n.kids) h = (h ^ k) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// What every e-node of a class computes: the same dtype and shape. Checked on every union.
struct TensorInfo {
  DType dtype = DType::F32;
  std::vector<Expr> shape;
};

struct EClass {
  std::vector<ENode> nodes;
  std::vector<std::pair<ENode, ClassId>> parents;  // nodes that use this class, and their class
  TensorInfo info;
};

class EGraph {
 public:
  explicit EGraph(OpTable& ops) : ops_(ops) {}

  // Adds a node (children are canonicalised) and returns its class. The analysis is inferred
  // from the op; ops without a rule for it (kernels declared by rule files) need `info`.
  ClassId add(ENode n);
  ClassId add(ENode n, const TensorInfo& info);
  ClassId find(ClassId id) const;
  // Unions two classes; `why` names the rule, so a disagreeing analysis points at it.
  bool merge(ClassId a, ClassId b, const std::string& why);
  void rebuild();  // restores congruence after merges

  const EClass& eclass(ClassId id) const { return classes_[find(id)]; }
  const TensorInfo& info(ClassId id) const { return eclass(id).info; }
  std::vector<ClassId> class_ids() const;  // canonical ids
  size_t node_count() const { return memo_.size(); }
  size_t class_count() const { return class_count_; }
  bool clean() const { return pending_.empty(); }
  uint64_t version() const { return version_; }  // bumps on every change

  OpTable& ops() { return ops_; }
  const OpTable& ops() const { return ops_; }
  AttrTable& attrs() { return attrs_; }
  const AttrTable& attrs() const { return attrs_; }
  const Attr& attr(const ENode& n) const { return attrs_.get(n.attr); }

  TensorInfo infer(const ENode& n) const;  // throws Error when the op has no rule
  std::string describe(const ENode& n) const;
  std::string to_dot() const;  // Graphviz: a cluster per class

 private:
  ENode canonical(ENode n) const;
  void repair(ClassId id);

  OpTable& ops_;
  AttrTable attrs_;
  mutable std::vector<ClassId> parent_;  // union-find; path-compressed on find
  std::vector<EClass> classes_;
  std::unordered_map<ENode, ClassId, ENodeHash> memo_;
  std::vector<ClassId> pending_;
  size_t class_count_ = 0;
  uint64_t version_ = 0;
};

}  // namespace luminal
