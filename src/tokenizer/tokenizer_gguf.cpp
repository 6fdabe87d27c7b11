// Tokenizer::from_gguf: the tokenizer stored in GGUF metadata (tokenizer.ggml.*), rebuilt as the
// equivalent Hugging Face pipeline so that one encoder serves both sources.
//   "gpt2":  byte-level BPE with ranked merges; tokenizer.ggml.pre names the split regexes.
//   "llama": SentencePiece BPE: merges are implied by token scores (a pair merges into the token
//            their concatenation spells; higher score first), unknown characters fall back to
//            <0xXX> byte tokens.
#include <algorithm>
#include <map>

#include "core/error.h"
#include "loader/gguf.h"
#include "tokenizer/gguf_pre_tokenizers.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace luminal {
namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

const char* kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's visible space

// Control, unknown, user-defined and unused tokens are matched in the text as whole tokens, as
// in the Hugging Face tokenizers these GGUF files come from; control and unknown ones are special.
std::vector<AddedToken> added_tokens_of(const std::vector<std::string>& tokens, const std::vector<int64_t>& types) {
  std::vector<AddedToken> out;
  for (size_t id = 0; id < types.size() && id < tokens.size(); ++id) {
    const int64_t t = types[id];
    if (t != Control && t != Unknown && t != UserDefined && t != Unused) continue;
    if (tokens[id].empty()) continue;
    AddedToken a;
    a.id = static_cast<int32_t>(id);
    a.content = tokens[id];
    a.special = t == Control || t == Unknown;
    out.push_back(std::move(a));
  }
  return out;
}

void add_byte_level_merges(BpeModel& model, const std::vector<std::string>& merges, const std::string& origin) {
  model.reserve_merges(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t space = m.find(' ');
    if (space == std::string::npos) throw Error(origin + ": tokenizer.ggml.merges entry '" + m + "' has no space");
    const std::string a = m.substr(0, space), b = m.substr(space + 1);
    auto left = model.token_to_id(a), right = model.token_to_id(b), merged = model.token_to_id(a + b);
    if (!left || !right || !merged)
      throw Error(origin + ": tokenizer.ggml.merges entry '" + m + "' uses a token that is not in tokenizer.ggml.tokens");
    model.add_merge(*left, *right, *merged, static_cast<int32_t>(rank));
  }
}

// Every split of a token into two tokens is a merge, ranked by the token's score (higher first;
// equal scores share a rank, so the leftmost pair wins, as in llama.cpp).
void add_score_merges(BpeModel& model, const std::vector<double>& scores, const std::vector<int64_t>& types) {
  const size_t n = static_cast<size_t>(model.size());
  std::vector<double> distinct;
  for (size_t id = 0; id < n; ++id) distinct.push_back(id < scores.size() ? scores[id] : 0.0);
  std::sort(distinct.begin(), distinct.end(), std::greater<double>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  auto rank_of = [&](double s) {
    return static_cast<int32_t>(std::lower_bound(distinct.begin(), distinct.end(), s, std::greater<double>()) -
                                distinct.begin());
  };
  for (size_t id = 0; id < n; ++id) {
    const int64_t type = id < types.size() ? types[id] : Normal;
    const std::string* text = model.token(static_cast<int32_t>(id));
    if (!text || (type != Normal && type != UserDefined && type != Undefined)) continue;
    const std::string& t = *text;
    const int32_t rank = rank_of(id < scores.size() ? scores[id] : 0.0);
    for (size_t cut = utf8::char_length(static_cast<unsigned char>(t[0])); cut < t.size();
         cut += utf8::char_length(static_cast<unsigned char>(t[cut]))) {
      auto left = model.token_to_id(std::string_view(t).substr(0, cut));
      if (!left) continue;
      auto right = model.token_to_id(std::string_view(t).substr(cut));
      if (right) model.add_merge(*left, *right, static_cast<int32_t>(id), rank);
    }
  }
}

std::optional<int32_t> id_key(const GgufFile& gguf, const char* key, size_t n_tokens) {
  auto v = gguf.get_int(key);
  if (!v || *v < 0 || static_cast<size_t>(*v) >= n_tokens) return std::nullopt;
  return static_cast<int32_t>(*v);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string& origin = gguf.path();
  const auto model_name = gguf.get_string("tokenizer.ggml.model");
  if (!model_name) throw Error(origin + ": the GGUF file has no tokenizer (tokenizer.ggml.model is missing)");
  std::vector<std::string> tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) throw Error(origin + ": tokenizer.ggml.tokens is missing or empty");
  const std::vector<int64_t> types = gguf.get_int_array("tokenizer.ggml.token_type");
  const size_t n = tokens.size();

  TokenizerParts parts;
  parts.origin = origin;
  parts.added_tokens = added_tokens_of(tokens, types);
  bool add_bos = false;
  if (*model_name == "gpt2") {
    const std::string pre_name = gguf.get_string("tokenizer.ggml.pre").value_or("default");
    auto pre = gguf_pre_tokenizer(pre_name);
    if (!pre) {
      throw Error(origin + ": tokenizer.ggml.pre '" + pre_name + "' is not supported by luminal's tokenizer; known: " +
                  known_gguf_pre_tokenizers());
    }
    for (const std::string& r : pre->regexes) parts.pre_tokenizer.add_split(Regex(r, origin), SplitBehavior::Isolated, false);
    parts.pre_tokenizer.add_byte_level(false, false);
    parts.decoder.add_byte_level();
    BpeOptions options;
    options.ignore_merges = pre->ignore_merges;
    parts.model = BpeModel(std::move(tokens), options);
    add_byte_level_merges(parts.model, gguf.get_string_array("tokenizer.ggml.merges"), origin);
    add_bos = pre->add_bos;
  } else if (*model_name == "llama") {
    const bool space_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    if (space_prefix) parts.normalizer.add_prepend(kSpace);
    parts.normalizer.add_replace(" ", std::nullopt, kSpace);
    parts.decoder.add_replace(kSpace, " ");
    parts.decoder.add_byte_fallback();
    parts.decoder.add_fuse();
    if (space_prefix) parts.decoder.add_strip(" ", 1, 0);
    BpeOptions options;
    options.byte_fallback = true;
    options.unk_id = id_key(gguf, "tokenizer.ggml.unknown_token_id", n);
    if (!options.unk_id) {
      auto it = std::find(types.begin(), types.end(), int64_t{Unknown});
      if (it != types.end()) options.unk_id = static_cast<int32_t>(it - types.begin());
    }
    parts.model = BpeModel(std::move(tokens), options);
    add_score_merges(parts.model, gguf.get_float_array("tokenizer.ggml.scores"), types);
    add_bos = true;
  } else {
    throw Error(origin + ": tokenizer.ggml.model '" + *model_name +
                "' is not supported by luminal's tokenizer; supported: gpt2 (byte-level BPE), llama (SentencePiece)");
  }

  const auto bos = id_key(gguf, "tokenizer.ggml.bos_token_id", n);
  const auto eos = id_key(gguf, "tokenizer.ggml.eos_token_id", n);
  add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token").value_or(add_bos);
  const bool add_eos = gguf.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  std::vector<PostProcessor::Item> items;
  if (add_bos && bos) items.push_back({false, {*bos}});
  items.push_back({true, {}});
  if (add_eos && eos) items.push_back({false, {*eos}});
  if (items.size() > 1) parts.post_processor.add_template(std::move(items));

  parts.bos_id = bos;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    auto id = id_key(gguf, key, n);
    if (id && std::find(parts.eos_ids.begin(), parts.eos_ids.end(), *id) == parts.eos_ids.end())
      parts.eos_ids.push_back(*id);
  }
  parts.chat_template = gguf.get_string("tokenizer.chat_template");
  return make_tokenizer(std::move(parts));
}

}  // namespace luminal
