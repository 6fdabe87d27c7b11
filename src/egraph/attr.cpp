#include "egraph/attr.h"

#include <cstring>
#include <sstream>

namespace luminal {

bool Attr::operator==(const Attr& o) const {
  // Compare numbers by bits so NaN constants intern and -0 differs from 0.
  return name == o.name && dtype == o.dtype && std::memcmp(&number, &o.number, sizeof number) == 0 &&
         axis == o.axis && exprs == o.exprs && view == o.view && code == o.code;
}

uint64_t Attr::hash() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; h ^= h >> 31; };
  for (char c : name) mix(static_cast<unsigned char>(c));
  mix(static_cast<uint64_t>(dtype));
  uint64_t bits;
  std::memcpy(&bits, &number, 8);
  mix(bits);
  mix(static_cast<uint64_t>(axis));
  for (const Expr& e : exprs) mix(e.hash());
  if (view) mix(view->hash());
  for (int64_t c : code) mix(static_cast<uint64_t>(c));
  return h;
}

std::string Attr::to_string() const {
  std::ostringstream s;
  if (!name.empty()) s << '"' << name << "\" ";
  if (view) s << view->to_string();
  return s.str();
}

AttrTable::AttrTable() { attrs_.emplace_back(); by_hash_.emplace(attrs_[0].hash(), 0); }

AttrId AttrTable::intern(const Attr& a) {
  uint64_t h = a.hash();
  auto [lo, hi] = by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (attrs_[it->second] == a) return it->second;
  AttrId id = static_cast<AttrId>(attrs_.size());
  attrs_.push_back(a);
  by_hash_.emplace(h, id);
  return id;
}

}  // namespace luminal
