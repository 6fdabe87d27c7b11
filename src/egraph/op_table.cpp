#include "egraph/op_table.h"

#include "core/error.h"

namespace luminal {

OpTable::OpTable() {
  for (int k = 0; k <= static_cast<int>(OpKind::Scatter); ++k) {  // primitives; Kernel is not one
    OpKind kind = static_cast<OpKind>(k);
    int arity = kind == OpKind::Input || kind == OpKind::Constant || kind == OpKind::Iota ? 0
                : is_binary(kind) || kind == OpKind::Gather                               ? 2
                : kind == OpKind::Scatter                                                 ? 3
                                                                                          : 1;
    ops_.push_back({op_name(kind), arity, true, kind});
    by_name_[op_name(kind)] = static_cast<OpId>(k);
  }
  view_ = add("View", 1);
}

OpId OpTable::add(const std::string& name, int arity) {
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    if (ops_[it->second].arity != arity)
      throw Error("op '" + name + "' is already declared with " + std::to_string(ops_[it->second].arity) +
                  " inputs, not " + std::to_string(arity));
    return it->second;
  }
  LM_ASSERT(ops_.size() < UINT16_MAX, "too many ops");
  OpId id = static_cast<OpId>(ops_.size());
  ops_.push_back({name, arity, false, OpKind::Input});
  by_name_[name] = id;
  return id;
}

std::optional<OpId> OpTable::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::string OpTable::names() const {
  std::string s;
  for (const OpInfo& o : ops_) s += (s.empty() ? "" : ", ") + o.name;
  return s;
}

}  // namespace luminal
