#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace luminal {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Match data is per call: a Regex is shared between threads and holds nothing mutable.
struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

// Returns the match result; falls back to the interpreter if the JIT runs out of stack.
int run_match(const pcre2_code* code, std::string_view text, size_t start, uint32_t options,
              pcre2_match_data* md) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), start, options | PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, subject, text.size(), start, options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                     md, nullptr);
  }
  return rc;
}

void check_match_result(int rc, const std::string& pattern) {
  if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return;
  PCRE2_UCHAR msg[256];
  pcre2_get_error_message(rc, msg, sizeof(msg));
  throw Error("tokenizer regex /" + pattern + "/ failed to run: " + reinterpret_cast<char*>(msg));
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& origin) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error(origin + ": cannot compile pre-tokenizer regex /" + pattern + "/ at offset " +
                std::to_string(offset) + ": " + reinterpret_cast<char*>(msg));
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // optional: a speed-up only
  code_ = std::move(c);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  MatchData md(code_->code);
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = run_match(code_->code, text, pos, 0, md.data);
    check_match_result(rc, pattern_);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // An empty match: step over one character so the scan moves on.
      pos = b + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  return out;
}

bool Regex::matches_at(std::string_view text, size_t at) const {
  MatchData md(code_->code);
  const int rc = run_match(code_->code, text, at, PCRE2_ANCHORED, md.data);
  check_match_result(rc, pattern_);
  return rc >= 0;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace luminal
