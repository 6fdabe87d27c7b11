#pragma once
// The ops an e-graph can hold: the HLIR primitives, View (an edge's view made explicit), and
// ops declared at run time by rule files (fused kernels, backend kernels). Ops are numbered per
// table, so rule files from several backends can extend one table.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/op.h"

namespace luminal {

using OpId = uint16_t;

struct OpInfo {
  std::string name;
  int arity = -1;  // -1: any number of children
  bool primitive = false;  // one of graph/op.h's ops
  OpKind kind = OpKind::Input;  // when primitive
};

class OpTable {
 public:
  OpTable();  // holds every primitive plus View
  OpId add(const std::string& name, int arity);  // returns the existing id if already declared
  const OpInfo& info(OpId id) const { return ops_.at(id); }
  std::optional<OpId> find(const std::string& name) const;
  OpId primitive(OpKind k) const { return static_cast<OpId>(k); }
  OpId view() const { return view_; }
  size_t size() const { return ops_.size(); }
  std::string names() const;  // comma-separated, for error messages

 private:
  std::vector<OpInfo> ops_;
  std::unordered_map<std::string, OpId> by_name_;
  OpId view_;
};

}  // namespace luminal
