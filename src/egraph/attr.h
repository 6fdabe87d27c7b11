#pragma once
// Attributes of e-nodes (input names, constants, views, axes, fused programs), interned per
// e-graph so an e-node stays (op, attr id, children) and hashes cheaply.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "shape/view.h"

namespace luminal {

using AttrId = uint32_t;

struct Attr {
  std::string name;          // Input / Output name
  DType dtype = DType::F32;  // Input dtype, Cast target, kernel output dtype
  double number = 0;         // Constant value
  int64_t axis = 0;          // reductions
  std::vector<Expr> exprs;   // Input shape; Iota {expr, n}
  std::optional<View> view;  // View
  std::vector<int64_t> code; // encoded program of a fused kernel

  bool operator==(const Attr& o) const;
  uint64_t hash() const;
  std::string to_string() const;
};

class AttrTable {
 public:
  AttrTable();  // id 0 is the empty attribute
  AttrId intern(const Attr& a);
  const Attr& get(AttrId id) const { return attrs_.at(id); }
  static constexpr AttrId kNone = 0;

 private:
  std::vector<Attr> attrs_;
  std::unordered_multimap<uint64_t, AttrId> by_hash_;
};

}  // namespace luminal
