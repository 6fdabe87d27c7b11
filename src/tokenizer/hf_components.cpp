#include "tokenizer/hf_components.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace luminal {
namespace {

using json = nlohmann::json;

[[noreturn]] void unsupported(const char* stage, const std::string& type, const std::string& origin) {
  throw Error(origin + ": " + stage + " type '" + type +
              "' is not supported by luminal's tokenizer (see docs/tokenizer.md for the supported "
              "components)");
}

std::string type_of(const json& spec, const char* stage, const std::string& origin) {
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    throw Error(origin + ": a " + std::string(stage) + " has no \"type\" string");
  return spec["type"].get<std::string>();
}

template <typename T>
T field(const json& spec, const char* name, T fallback) {
  auto it = spec.find(name);
  return it == spec.end() || it->is_null() ? fallback : it->get<T>();
}

// A Hugging Face pattern: {"String": literal} or {"Regex": pattern}.
struct Pattern {
  std::string literal;
  std::optional<std::string> regex;
};

Pattern pattern_of(const json& spec, const char* stage, const std::string& origin) {
  const json& p = spec.at("pattern");
  if (p.contains("String")) return {p["String"].get<std::string>(), std::nullopt};
  if (p.contains("Regex")) return {{}, p["Regex"].get<std::string>()};
  throw Error(origin + ": " + stage + " pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

void add_normalizer(Normalizer& n, const json& spec, const std::string& origin) {
  const std::string type = type_of(spec, "normalizer", origin);
  if (type == "Sequence") {
    for (const json& s : spec.at("normalizers")) add_normalizer(n, s, origin);
  } else if (type == "NFC") {
    n.add_nfc();
  } else if (type == "Replace") {
    Pattern p = pattern_of(spec, "Replace normalizer", origin);
    std::optional<Regex> regex;
    if (p.regex) regex.emplace(*p.regex, origin);
    n.add_replace(p.literal, std::move(regex), spec.at("content").get<std::string>());
  } else if (type == "Prepend") {
    n.add_prepend(spec.at("prepend").get<std::string>());
  } else {
    unsupported("normalizer", type, origin);
  }
}

SplitBehavior behavior_of(const std::string& name, const std::string& origin) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  throw Error(origin + ": Split pre-tokenizer behavior '" + name + "' is unknown");
}

void add_pre_tokenizer(PreTokenizer& pt, const json& spec, const std::string& origin) {
  const std::string type = type_of(spec, "pre-tokenizer", origin);
  if (type == "Sequence") {
    for (const json& s : spec.at("pretokenizers")) add_pre_tokenizer(pt, s, origin);
  } else if (type == "Split") {
    Pattern p = pattern_of(spec, "Split pre-tokenizer", origin);
    Regex regex(p.regex ? *p.regex : regex_escape(p.literal), origin);
    pt.add_split(std::move(regex), behavior_of(spec.at("behavior").get<std::string>(), origin),
                 field(spec, "invert", false));
  } else if (type == "ByteLevel") {
    pt.add_byte_level(field(spec, "add_prefix_space", true), field(spec, "use_regex", true));
  } else {
    unsupported("pre-tokenizer", type, origin);
  }
}

void add_decoder(Decoder& d, const json& spec, const std::string& origin) {
  const std::string type = type_of(spec, "decoder", origin);
  if (type == "Sequence") {
    for (const json& s : spec.at("decoders")) add_decoder(d, s, origin);
    return;
  }
  if (type == "Fuse") {
    d.add_fuse();
    return;
  }
  if (d.fused() && type != "Replace" && type != "Strip") {
    throw Error(origin + ": decoder type '" + type +
                "' after Fuse is not supported by luminal's tokenizer (only Replace and Strip may follow Fuse)");
  }
  if (type == "ByteLevel") {
    d.add_byte_level();
  } else if (type == "ByteFallback") {
    d.add_byte_fallback();
  } else if (type == "Replace") {
    Pattern p = pattern_of(spec, "Replace decoder", origin);
    if (p.regex) throw Error(origin + ": Replace decoder with a Regex pattern is not supported; only String patterns");
    size_t i = 0;
    if (d.fused() && (p.literal.empty() || (utf8::decode(p.literal, i), i != p.literal.size())))
      throw Error(origin + ": Replace decoder after Fuse must replace a single character");
    d.add_replace(p.literal, spec.at("content").get<std::string>());
  } else if (type == "Strip") {
    const std::string content = spec.at("content").get<std::string>();
    const size_t start = spec.at("start").get<size_t>(), stop = spec.at("stop").get<size_t>();
    if (d.fused() && stop > 0)
      throw Error(origin + ": Strip decoder with stop > 0 after Fuse is not supported (it needs the end of the text)");
    d.add_strip(content, start, stop);
  } else {
    unsupported("decoder", type, origin);
  }
}

void add_post_processor(PostProcessor& pp, const json& spec, const std::string& origin,
                        const std::function<std::optional<int32_t>(std::string_view)>& token_id) {
  const std::string type = type_of(spec, "post-processor", origin);
  if (type == "Sequence") {
    for (const json& s : spec.at("processors")) add_post_processor(pp, s, origin, token_id);
  } else if (type == "ByteLevel") {
    // Adjusts offsets only.
  } else if (type == "TemplateProcessing") {
    const json& specials = spec.contains("special_tokens") ? spec["special_tokens"] : json::object();
    std::vector<PostProcessor::Item> items;
    for (const json& piece : spec.at("single")) {
      if (piece.contains("Sequence")) {
        if (piece["Sequence"].value("id", "A") != "A")
          throw Error(origin + ": TemplateProcessing single template may only use sequence A");
        items.push_back({true, {}});
        continue;
      }
      const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
      std::vector<int32_t> ids;
      if (specials.contains(name)) {
        for (const json& id : specials[name].at("ids")) ids.push_back(id.get<int32_t>());
      } else if (auto id = token_id(name)) {
        ids.push_back(*id);
      } else {
        throw Error(origin + ": TemplateProcessing names special token '" + name + "' that the vocabulary lacks");
      }
      items.push_back({false, std::move(ids)});
    }
    pp.add_template(std::move(items));
  } else {
    unsupported("post-processor", type, origin);
  }
}

}  // namespace

Normalizer build_normalizer(const json& spec, const std::string& origin) {
  Normalizer n;
  if (!spec.is_null()) add_normalizer(n, spec, origin);
  return n;
}

PreTokenizer build_pre_tokenizer(const json& spec, const std::string& origin) {
  PreTokenizer pt;
  if (!spec.is_null()) add_pre_tokenizer(pt, spec, origin);
  return pt;
}

Decoder build_decoder(const json& spec, const std::string& origin) {
  Decoder d;
  if (spec.is_null()) {
    d.set_join_with_spaces(true);
  } else {
    add_decoder(d, spec, origin);
  }
  return d;
}

PostProcessor build_post_processor(const json& spec, const std::string& origin,
                                   const std::function<std::optional<int32_t>(std::string_view)>& token_id) {
  PostProcessor pp;
  if (!spec.is_null()) add_post_processor(pp, spec, origin, token_id);
  return pp;
}

}  // namespace luminal
