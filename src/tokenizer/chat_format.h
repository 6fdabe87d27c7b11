#pragma once
// Chat prompts in the exact text the model families' Jinja chat templates produce, without a
// Jinja engine. Encode the result with add_special_tokens = false: the text already holds BOS
// where the family wants it (Hugging Face's apply_chat_template does the same).
#include <optional>
#include <string>
#include <vector>

namespace luminal {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (and "tool" for Qwen3)
  std::string content;
};

enum class ChatStyle {
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>, BOS first
  ChatML,  // plain <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2.5)
  Gemma,   // <start_of_turn>user|model\n...<end_of_turn>\n, BOS first, system folded into turn 1
  Qwen3,   // ChatML plus Qwen3's <think> handling; the generation prompt is non-thinking
};

// Throws luminal::Error for a conversation the family's template rejects (Gemma: roles must
// alternate user/assistant after an optional system message).
std::string format_chat(ChatStyle style, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

// The family of a Jinja chat template, recognised by its markers; nullopt for an unknown one.
std::optional<ChatStyle> chat_style_from_template(const std::string& jinja_template);

}  // namespace luminal
