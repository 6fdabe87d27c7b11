#include "tokenizer/post_processor.h"

namespace luminal {

void PostProcessor::add_template(std::vector<Item> items) { templates_.push_back(std::move(items)); }

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  for (const auto& tmpl : templates_) {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Item& item : tmpl) {
      const auto& src = item.is_sequence ? ids : item.ids;
      out.insert(out.end(), src.begin(), src.end());
    }
    ids = std::move(out);
  }
  return ids;
}

std::optional<int32_t> PostProcessor::leading_special() const {
  if (templates_.empty()) return std::nullopt;
  for (const Item& item : templates_.front()) {
    if (item.is_sequence) break;
    if (!item.ids.empty()) return item.ids.front();
  }
  return std::nullopt;
}

}  // namespace luminal
