#include "tokenizer/tokenizer_json_parse.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace luminal {
namespace {

using json = nlohmann::json;

// A SAX handler that builds a tree except under model.vocab and model.merges.
class Handler : public nlohmann::json_sax<json> {
 public:
  Handler(const std::string& origin, TokenizerJsonTables& tables) : origin_(origin), tables_(tables) {}

  json root;

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return mode_ == Mode::Vocab ? vocab_entry(v) : value(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return mode_ == Mode::Vocab ? vocab_entry(static_cast<int64_t>(v)) : value(v);
  }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool binary(binary_t&) override { return value(nullptr); }

  bool string(string_t& s) override {
    if (mode_ == Mode::Merges) {
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw Error(origin_ + ": merge \"" + s + "\" is not two tokens separated by one space");
      tables_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::MergePair) {
      pair_.push_back(std::move(s));
      return true;
    }
    return value(std::move(s));
  }

  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::Dom && at_model_member("vocab")) {
      mode_ = Mode::Vocab;
      tables_.has_vocab = true;
      return true;
    }
    if (mode_ != Mode::Dom) throw Error(origin_ + ": unexpected object inside model.vocab or model.merges");
    return open(json::object());
  }

  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Dom;
      return true;
    }
    return close();
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::Dom && at_model_member("merges")) {
      mode_ = Mode::Merges;
      tables_.has_merges = true;
      return true;
    }
    if (mode_ == Mode::Merges) {
      mode_ = Mode::MergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::Dom) throw Error(origin_ + ": unexpected array inside model.vocab or model.merges");
    return open(json::array());
  }

  bool end_array() override {
    if (mode_ == Mode::MergePair) {
      if (pair_.size() != 2) throw Error(origin_ + ": a merge given as an array must hold exactly two tokens");
      tables_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::Merges;
      return true;
    }
    if (mode_ == Mode::Merges) {
      mode_ = Mode::Dom;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    throw Error(origin_ + ": malformed JSON near byte " + std::to_string(position) + ": " + ex.what());
  }

 private:
  enum class Mode { Dom, Vocab, Merges, MergePair };

  // True when the container about to open is root["model"][name].
  bool at_model_member(const char* name) const {
    return stack_.size() == 2 && keys_.size() == 2 && keys_[1] == "model" && key_ == name &&
           stack_.back()->is_object();
  }

  bool vocab_entry(int64_t id) {
    tables_.vocab.emplace_back(std::move(key_), id);
    return true;
  }

  // Where the next value goes: root, a member of the open object, or the end of the open array.
  json& slot() {
    if (stack_.empty()) return root;
    json& top = *stack_.back();
    if (top.is_object()) return top[key_];
    top.push_back(nullptr);
    return top.back();
  }

  bool value(json v) {
    if (mode_ != Mode::Dom) throw Error(origin_ + ": unexpected value inside model.vocab or model.merges");
    slot() = std::move(v);
    return true;
  }

  bool open(json container) {
    const std::string k = stack_.empty() || !stack_.back()->is_object() ? std::string() : key_;
    json& s = slot();
    s = std::move(container);
    stack_.push_back(&s);
    keys_.push_back(k);
    return true;
  }

  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  const std::string& origin_;
  TokenizerJsonTables& tables_;
  Mode mode_ = Mode::Dom;
  std::vector<json*> stack_;       // open containers; pointers stay valid while they are open
  std::vector<std::string> keys_;  // the key each open container sits under ("" at the root)
  std::string key_;
  std::vector<std::string> pair_;
};

}  // namespace

nlohmann::json parse_tokenizer_json(const std::string& text, const std::string& origin,
                                    TokenizerJsonTables& tables) {
  Handler handler(origin, tables);
  json::sax_parse(text, &handler);
  return std::move(handler.root);
}

}  // namespace luminal
