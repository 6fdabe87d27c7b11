#include "tokenizer/chat_format.h"

#include <string_view>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace luminal {
namespace {

// Python's str.isspace, which Jinja's trim filter (str.strip) uses.
bool python_space(char32_t c) { return utf8::is_whitespace(c) || (c >= 0x1C && c <= 0x1F); }

std::string trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    size_t i = begin;
    if (!python_space(utf8::decode(s, i))) break;
    begin = i;
  }
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!python_space(utf8::decode(s, i))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

std::string_view strip_newlines_left(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view strip_newlines_right(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Meta-Llama-3-Instruct's template.
std::string format_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += "<|begin_of_text|>";
    out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + trim(messages[i].content) +
           "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Gemma 3's template: the system message becomes a prefix of the first user turn.
std::string format_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out = "<bos>";
  std::string first_prefix;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    first_prefix = messages[0].content + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const size_t turn = i - first;
    if ((messages[i].role == "user") != (turn % 2 == 0)) {
      throw Error("format_chat(Gemma): message " + std::to_string(i) + " has role '" + messages[i].role +
                  "'; Gemma conversations must alternate user/assistant/user/... after an optional "
                  "system message");
    }
    const std::string role = messages[i].role == "assistant" ? "model" : messages[i].role;
    out += "<start_of_turn>" + role + "\n" + (turn == 0 ? first_prefix : "");
    out += trim(messages[i].content);
    out += "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// Qwen3's template (without tools): reasoning in earlier assistant turns is dropped; an
// assistant turn after the last user query keeps a <think> block.
std::string format_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  const size_t n = messages.size();
  if (n > 0 && messages[0].role == "system") out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  // The last user message that is not a wrapped tool response.
  size_t last_query = n == 0 ? 0 : n - 1;
  for (size_t k = n; k-- > 0;) {
    const ChatMessage& m = messages[k];
    if (m.role == "user" && !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content, reasoning;
      if (const size_t close = m.content.find("</think>"); close != std::string::npos) {
        content = strip_newlines_left(std::string_view(m.content).substr(m.content.rfind("</think>") + 8));
        std::string_view before = strip_newlines_right(std::string_view(m.content).substr(0, close));
        if (const size_t open = before.rfind("<think>"); open != std::string_view::npos) before = before.substr(open + 7);
        reasoning = strip_newlines_left(before);
      }
      const bool is_last = i + 1 == n;
      if (i > last_query && (is_last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n" + std::string(strip_newlines_right(strip_newlines_left(reasoning))) +
               "\n</think>\n\n" + std::string(strip_newlines_left(content));
      } else {
        out += "<|im_start|>assistant\n" + std::string(content);
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == n || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  return out;
}

}  // namespace

std::string format_chat(ChatStyle style, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  switch (style) {
    case ChatStyle::Llama3:
      return format_llama3(messages, add_generation_prompt);
    case ChatStyle::ChatML:
      return format_chatml(messages, add_generation_prompt);
    case ChatStyle::Gemma:
      return format_gemma(messages, add_generation_prompt);
    case ChatStyle::Qwen3:
      return format_qwen3(messages, add_generation_prompt);
  }
  throw Error("format_chat: unknown chat style " + std::to_string(static_cast<int>(style)));
}

std::optional<ChatStyle> chat_style_from_template(const std::string& t) {
  if (t.find("<|start_header_id|>") != std::string::npos) return ChatStyle::Llama3;
  if (t.find("<start_of_turn>") != std::string::npos) return ChatStyle::Gemma;
  if (t.find("<|im_start|>") != std::string::npos)
    return t.find("<think>") != std::string::npos ? ChatStyle::Qwen3 : ChatStyle::ChatML;
  return std::nullopt;
}

}  // namespace luminal
