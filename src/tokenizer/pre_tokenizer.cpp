#include "tokenizer/pre_tokenizer.h"

#include <utility>

#include "tokenizer/byte_level.h"

namespace luminal {
namespace {

struct Span {
  size_t begin, end;
  bool is_match;
};

// The whole text as alternating matched / unmatched spans.
std::vector<Span> spans_of(const Regex& pattern, std::string_view text, bool invert) {
  std::vector<Span> spans;
  size_t pos = 0;
  for (auto [b, e] : pattern.find_all(text)) {
    if (b > pos) spans.push_back({pos, b, invert});
    spans.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < text.size()) spans.push_back({pos, text.size(), invert});
  return spans;
}

// Groups spans into pieces as `behavior` says; a piece is a [begin, end) range.
std::vector<std::pair<size_t, size_t>> group(const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Span& s : spans)
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Isolated:
      for (const Span& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool next_match = false;
      std::vector<std::pair<size_t, size_t>> reversed;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !next_match && !reversed.empty()) {
          reversed.back().first = it->begin;
        } else {
          reversed.emplace_back(it->begin, it->end);
        }
        next_match = it->is_match;
      }
      out.assign(reversed.rbegin(), reversed.rend());
      break;
    }
    case SplitBehavior::Contiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && previous_match) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    }
  }
  return out;
}

void split_into(const Regex& pattern, SplitBehavior behavior, bool invert, const std::string& piece,
                std::vector<std::string>& out) {
  for (auto [b, e] : group(spans_of(pattern, piece, invert), behavior)) {
    if (e > b) out.push_back(piece.substr(b, e - b));
  }
}

}  // namespace

void PreTokenizer::add_split(Regex pattern, SplitBehavior behavior, bool invert) {
  steps_.push_back(Split{std::move(pattern), behavior, invert});
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  std::optional<Regex> gpt2;
  if (use_regex) gpt2.emplace(kGpt2Pattern, "GPT-2 pre-tokenizer");
  steps_.push_back(ByteLevel{add_prefix_space, std::move(gpt2)});
}

std::vector<std::string> PreTokenizer::apply(std::string text) const {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.push_back(std::move(text));
  for (const auto& step : steps_) {
    std::vector<std::string> next;
    next.reserve(pieces.size());
    if (const auto* split = std::get_if<Split>(&step)) {
      for (const std::string& p : pieces) split_into(split->pattern, split->behavior, split->invert, p, next);
    } else {
      const auto& bl = std::get<ByteLevel>(step);
      for (std::string& p : pieces) {
        if (bl.add_prefix_space && p[0] != ' ') p.insert(p.begin(), ' ');
        std::vector<std::string> words;
        if (bl.gpt2) {
          split_into(*bl.gpt2, SplitBehavior::Isolated, false, p, words);
        } else {
          words.push_back(std::move(p));
        }
        for (const std::string& w : words) next.push_back(byte_level::encode(w));
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace luminal
