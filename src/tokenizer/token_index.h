#pragma once
// Text -> id lookup over a vocabulary held elsewhere. An open-addressing table of (hash tag, id)
// pairs: a probe touches token text only when the tags agree, which keeps loading a 262k-token
// vocabulary (a million lookups to resolve its merges) fast.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luminal {

class TokenIndex {
 public:
  TokenIndex() = default;
  // Indexes tokens[id] for every non-empty text; when texts repeat, the first id wins. The
  // vector's elements must outlive the index and not change (moving the vector is fine).
  explicit TokenIndex(const std::vector<std::string>& tokens);

  std::optional<int32_t> find(std::string_view text) const;

 private:
  struct Slot {
    uint32_t tag;
    int32_t id;  // -1: empty
  };
  const std::string* tokens_ = nullptr;  // the vocabulary's element array
  std::vector<Slot> slots_;
};

}  // namespace luminal
