#include "tokenizer/normalizer.h"

#include "tokenizer/unicode_nfc.h"

namespace luminal {
namespace {

std::string replace_literal(std::string_view text, std::string_view find, std::string_view with) {
  if (find.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(find, pos)) != std::string_view::npos; pos = hit + find.size()) {
    out.append(text.substr(pos, hit - pos));
    out.append(with);
  }
  out.append(text.substr(pos));
  return out;
}

std::string replace_regex(std::string_view text, const Regex& regex, std::string_view with) {
  std::string out;
  size_t pos = 0;
  for (auto [b, e] : regex.find_all(text)) {
    out.append(text.substr(pos, b - pos));
    out.append(with);
    pos = e;
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

void Normalizer::add_nfc() { steps_.push_back({Kind::Nfc, {}, std::nullopt, {}}); }

void Normalizer::add_replace(std::string literal, std::optional<Regex> regex, std::string content) {
  steps_.push_back({Kind::Replace, std::move(literal), std::move(regex), std::move(content)});
}

void Normalizer::add_prepend(std::string prefix) {
  steps_.push_back({Kind::Prepend, {}, std::nullopt, std::move(prefix)});
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::Nfc:
        s = to_nfc(s);
        break;
      case Kind::Replace:
        s = step.regex ? replace_regex(s, *step.regex, step.content)
                       : replace_literal(s, step.literal, step.content);
        break;
      case Kind::Prepend:
        if (!s.empty()) s = step.content + s;
        break;
    }
  }
  return s;
}

}  // namespace luminal
