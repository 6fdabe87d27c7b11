#pragma once
// The post-processor stage, run by encode(add_special_tokens = true): templates that wrap the
// encoded ids with special tokens (Hugging Face's TemplateProcessing for single sequences; its
// ByteLevel post-processor changes only offsets, so it is nothing here).
#include <cstdint>
#include <optional>
#include <vector>

namespace luminal {

class PostProcessor {
 public:
  // One template item: either the special ids to insert, or the encoded sequence itself.
  struct Item {
    bool is_sequence;
    std::vector<int32_t> ids;
  };
  // Templates apply in order, each to the previous one's result.
  void add_template(std::vector<Item> items);

  std::vector<int32_t> apply(std::vector<int32_t> ids) const;
  // The id the first template puts before the sequence (its BOS), if any.
  std::optional<int32_t> leading_special() const;

 private:
  std::vector<std::vector<Item>> templates_;
};

}  // namespace luminal
