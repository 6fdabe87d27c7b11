// Tokenizer::from_json_file / from_json_text: Hugging Face tokenizer.json (BPE models), plus the
// bos/eos tokens and chat template from tokenizer_config.json / generation_config.json beside it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/hf_components.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json_parse.h"

namespace luminal {
namespace {

using json = nlohmann::json;

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(std::string("cannot open ") + what + " '" + path +
                "': check that the path exists and is readable");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

BpeModel build_bpe(const json& model, TokenizerJsonTables& tables, const std::string& origin) {
  const std::string type = model.value("type", tables.has_merges ? "BPE" : "");
  if (type != "BPE") {
    throw Error(origin + ": model type '" + type +
                "' is not supported by luminal's tokenizer; only BPE models (see docs/tokenizer.md)");
  }
  if (!tables.has_vocab) throw Error(origin + ": the BPE model has no \"vocab\" object");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(affix) && model[affix].is_string() && !model[affix].get<std::string>().empty())
      throw Error(origin + ": BPE " + affix + " is not supported by luminal's tokenizer");
  }
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0)
    throw Error(origin + ": BPE dropout is not supported (it makes encoding random); set it to null");

  int64_t max_id = -1;
  for (const auto& [text, id] : tables.vocab) {
    if (id < 0 || id > INT32_MAX) throw Error(origin + ": token '" + text + "' has invalid id " + std::to_string(id));
    max_id = std::max(max_id, id);
  }
  std::vector<std::string> tokens(static_cast<size_t>(max_id + 1));
  for (auto& [text, id] : tables.vocab) tokens[id] = std::move(text);
  tables.vocab = {};

  BpeOptions options;
  options.byte_fallback = model.value("byte_fallback", false);
  options.ignore_merges = model.value("ignore_merges", false);
  options.fuse_unk = model.value("fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    auto it = std::find(tokens.begin(), tokens.end(), unk);
    if (it == tokens.end()) throw Error(origin + ": unk_token '" + unk + "' is not in the vocabulary");
    options.unk_id = static_cast<int32_t>(it - tokens.begin());
  }
  BpeModel bpe(std::move(tokens), options);

  bpe.reserve_merges(tables.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < tables.merges.size(); ++rank) {
    const auto& [a, b] = tables.merges[rank];
    joined.assign(a).append(b);
    auto left = bpe.token_to_id(a), right = bpe.token_to_id(b), merged = bpe.token_to_id(joined);
    if (!left || !right || !merged) {
      throw Error(origin + ": merge \"" + a + " " + b + "\" uses a token that is not in the vocabulary ('" +
                  (!left ? a : !right ? b : joined) + "')");
    }
    bpe.add_merge(*left, *right, *merged, static_cast<int32_t>(rank));
  }
  tables.merges = {};
  return bpe;
}

std::vector<AddedToken> build_added_tokens(const json& doc, const std::string& origin) {
  std::vector<AddedToken> out;
  if (!doc.contains("added_tokens") || doc["added_tokens"].is_null()) return out;
  for (const json& t : doc["added_tokens"]) {
    AddedToken a;
    a.id = t.at("id").get<int32_t>();
    a.content = t.at("content").get<std::string>();
    a.special = t.value("special", false);
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !a.special);
    if (a.content.empty()) throw Error(origin + ": added token " + std::to_string(a.id) + " has empty content");
    out.push_back(std::move(a));
  }
  return out;
}

TokenizerParts load_parts(const std::string& text, const std::string& origin) {
  TokenizerJsonTables tables;
  json doc = parse_tokenizer_json(text, origin, tables);
  if (!doc.is_object()) throw Error(origin + ": not a tokenizer.json (the top level is not an object)");
  if (!doc.contains("model") || !doc["model"].is_object())
    throw Error(origin + ": not a tokenizer.json (it has no \"model\" object)");
  try {
    TokenizerParts parts;
    parts.origin = origin;
    parts.model = build_bpe(doc["model"], tables, origin);
    parts.added_tokens = build_added_tokens(doc, origin);
    parts.normalizer = build_normalizer(doc.value("normalizer", json()), origin);
    parts.pre_tokenizer = build_pre_tokenizer(doc.value("pre_tokenizer", json()), origin);
    parts.decoder = build_decoder(doc.value("decoder", json()), origin);
    const auto& added = parts.added_tokens;
    const BpeModel& model = parts.model;
    auto token_id = [&](std::string_view t) -> std::optional<int32_t> {
      for (const AddedToken& a : added)
        if (a.content == t) return a.id;
      return model.token_to_id(t);
    };
    parts.post_processor = build_post_processor(doc.value("post_processor", json()), origin, token_id);
    return parts;
  } catch (const json::exception& e) {
    throw Error(origin + ": malformed tokenizer.json: " + e.what());
  }
}

// A token in tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

std::optional<json> read_optional_json(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const std::string text = read_file(path.string(), "config file");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(path.string() + ": malformed JSON: " + e.what());
  }
}

// bos/eos and the chat template live in the config files beside tokenizer.json.
void read_neighbour_configs(const std::string& tokenizer_path, TokenizerParts& parts) {
  const auto dir = std::filesystem::path(tokenizer_path).parent_path();
  auto lookup = [&](const std::string& t) -> std::optional<int32_t> {
    for (const AddedToken& a : parts.added_tokens)
      if (a.content == t) return a.id;
    return parts.model.token_to_id(t);
  };
  auto add_eos = [&](int32_t id) {
    if (std::find(parts.eos_ids.begin(), parts.eos_ids.end(), id) == parts.eos_ids.end()) parts.eos_ids.push_back(id);
  };
  if (auto config = read_optional_json(dir / "tokenizer_config.json")) {
    if (auto bos = config_token(*config, "bos_token")) parts.bos_id = lookup(*bos);
    if (auto eos = config_token(*config, "eos_token"))
      if (auto id = lookup(*eos)) add_eos(*id);
    if (config->contains("chat_template")) {
      const json& t = (*config)["chat_template"];
      if (t.is_string()) {
        parts.chat_template = t.get<std::string>();
      } else if (t.is_array()) {  // [{"name": ..., "template": ...}]: the default one
        for (const json& named : t)
          if (named.value("name", "") == "default") parts.chat_template = named.value("template", "");
      }
    }
  }
  if (auto gen = read_optional_json(dir / "generation_config.json")) {
    if (gen->contains("eos_token_id")) {
      const json& e = (*gen)["eos_token_id"];
      if (e.is_number_integer()) add_eos(e.get<int32_t>());
      if (e.is_array())
        for (const json& id : e) add_eos(id.get<int32_t>());
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_json_text(const std::string& text) {
  return make_tokenizer(load_parts(text, "tokenizer.json text"));
}

Tokenizer Tokenizer::from_json_file(const std::string& path) {
  TokenizerParts parts = load_parts(read_file(path, "tokenizer file"), path);
  try {
    read_neighbour_configs(path, parts);
  } catch (const json::exception& e) {
    throw Error(path + ": unexpected value in tokenizer_config.json or generation_config.json: " + e.what());
  }
  return make_tokenizer(std::move(parts));
}

}  // namespace luminal
