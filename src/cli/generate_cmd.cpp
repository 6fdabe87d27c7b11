#include "cli/generate_cmd.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/model_session.h"
#include "core/error.h"
#include "models/generate.h"
#include "tokenizer/chat_format.h"

namespace luminal::cli {

namespace {

void add_sampling_options(Args& a) {
  a.option("--max-new-tokens", "N", "tokens to generate at most", "128")
      .option("--temperature", "T", "sampling temperature; 0 is greedy", "0")
      .option("--top-k", "K", "sample among the K most likely tokens (0: all)", "0")
      .option("--top-p", "P", "sample within the smallest set of tokens of total probability P", "1")
      .option("--min-p", "P", "drop tokens less likely than P times the most likely one", "0")
      .option("--repetition-penalty", "R", "penalise tokens already present (1: off)", "1")
      .option("--seed", "S", "random seed for sampling", "0")
      .option("--stop", "TEXT", "stop when the output contains TEXT")
      .flag("--ignore-eos", "keep generating past end-of-sequence tokens");
}

GenerateOptions generate_options(const Args& a) {
  GenerateOptions g;
  g.max_new_tokens = a.integer("--max-new-tokens");
  if (g.max_new_tokens < 0) throw Error("--max-new-tokens must be >= 0");
  g.sampling.temperature = a.number("--temperature");
  g.sampling.top_k = a.integer("--top-k");
  g.sampling.top_p = a.number("--top-p");
  g.sampling.min_p = a.number("--min-p");
  g.sampling.repetition_penalty = a.number("--repetition-penalty");
  g.sampling.seed = static_cast<uint64_t>(a.integer("--seed"));
  g.ignore_eos = a.has("--ignore-eos");
  if (a.has("--stop")) g.stop_strings.push_back(a.str("--stop"));
  return g;
}

// The chat style: the tokenizer's template if it names one, else the model family's.
ChatStyle chat_style(const Tokenizer& tok, const ModelConfig& c) {
  if (auto t = tok.chat_template())
    if (auto s = chat_style_from_template(*t)) return *s;
  if (c.model_type == "llama") return ChatStyle::Llama3;
  if (c.model_type.rfind("gemma", 0) == 0) return ChatStyle::Gemma;
  return ChatStyle::ChatML;
}

}  // namespace

int run_generate(int argc, char** argv) {
  Args a("luminal generate --model PATH (--prompt TEXT | --ids \"1 2 3\") [options]",
         "Generates text: the prompt is prefilled in one step, then tokens are decoded through the KV cache.");
  add_model_options(a);
  a.option("--prompt", "TEXT", "the prompt text").option("--ids", "\"1 2 3\"", "prompt token ids instead of text");
  a.flag("--chat", "wrap the prompt as a user message in the model's chat format")
      .option("--system", "TEXT", "a system message for --chat");
  add_sampling_options(a);
  a.flag("--json", "print one JSON object: new_token_ids, text, compile_ms, ttft_ms, tpot_ms, prompt_tokens");
  if (!a.parse(argc, argv)) return 0;
  if (a.has("--prompt") == a.has("--ids")) throw Error("give exactly one of --prompt TEXT or --ids \"1 2 3\"");

  LanguageModel m = load_model(a);
  std::optional<Tokenizer> tok = open_tokenizer(a.str("--model"));
  std::vector<int32_t> prompt;
  if (a.has("--ids")) {
    prompt = parse_ids(a.str("--ids"));
  } else {
    if (!tok) throw Error("'" + a.str("--model") + "' has no tokenizer.json; give the prompt as --ids \"1 2 3\"");
    std::string text = a.str("--prompt");
    if (a.has("--chat")) {
      std::vector<ChatMessage> msgs;
      if (a.has("--system")) msgs.push_back({"system", a.str("--system")});
      msgs.push_back({"user", text});
      text = format_chat(chat_style(*tok, m.config()), msgs, true);
      prompt = tok->encode(text, false);
    } else {
      prompt = tok->encode(text, true);
    }
  }
  GenerateOptions g = generate_options(a);
  g.eos_ids = default_stop_ids(m, tok ? &*tok : nullptr);
  bool json = a.has("--json");
  auto print = [&](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  if (!json && a.has("--prompt") && !a.has("--chat")) print(a.str("--prompt"));
  GenerateResult r = generate(m, prompt, g, tok ? &*tok : nullptr, json ? nullptr : std::function<void(const std::string&)>(print));
  if (json) {
    nlohmann::json j;
    j["new_token_ids"] = r.new_tokens;
    j["text"] = r.text;
    j["compile_ms"] = m.compile_ms();
    j["load_ms"] = m.load_ms();
    j["ttft_ms"] = r.ttft_ms;
    j["tpot_ms"] = r.tpot_ms;
    j["prompt_tokens"] = prompt.size();
    j["stop_reason"] = r.stop_reason;
    std::cout << j.dump() << "\n";
  } else {
    if (!tok) std::cout << "new token ids: " << json_ids(r.new_tokens);
    std::cout << "\n" << std::flush;
    double tps = r.tpot_ms > 0 ? 1000.0 / r.tpot_ms : 0;
    std::fprintf(stderr, "[%zu prompt tokens, %zu new (%s); compile %.0f ms, load %.0f ms, TTFT %.1f ms, TPOT %.1f ms (%.1f tok/s)]\n",
                 prompt.size(), r.new_tokens.size(), r.stop_reason.c_str(), m.compile_ms(), m.load_ms(), r.ttft_ms,
                 r.tpot_ms, tps);
  }
  return 0;
}

int run_chat(int argc, char** argv) {
  Args a("luminal chat --model PATH [options]",
         "Interactive multi-turn chat in the terminal. Type a message and press enter; /reset starts over, /quit ends.");
  add_model_options(a);
  a.option("--system", "TEXT", "a system message");
  add_sampling_options(a);
  if (!a.parse(argc, argv)) return 0;
  LanguageModel m = load_model(a);
  std::optional<Tokenizer> tok = open_tokenizer(a.str("--model"));
  if (!tok) throw Error("'" + a.str("--model") + "' has no tokenizer; chat needs one");
  ChatStyle style = chat_style(*tok, m.config());
  GenerateOptions g = generate_options(a);
  g.eos_ids = default_stop_ids(m, &*tok);
  std::vector<ChatMessage> history;
  if (a.has("--system")) history.push_back({"system", a.str("--system")});
  std::vector<int32_t> cached;  // the tokens the KV cache holds, to reuse the shared prefix
  bool tty = isatty(0);
  std::string line;
  while (true) {
    if (tty) std::cout << "\n> " << std::flush;
    if (!std::getline(std::cin, line) || line == "/quit" || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/reset") {
      history.resize(a.has("--system") ? 1 : 0);
      continue;
    }
    history.push_back({"user", line});
    std::vector<int32_t> ids = tok->encode(format_chat(style, history, true), false);
    size_t common = 0;
    while (common < cached.size() && common + 1 < ids.size() && cached[common] == ids[common]) ++common;
    m.rewind(static_cast<int64_t>(common));
    std::vector<int32_t> fresh(ids.begin() + static_cast<std::ptrdiff_t>(common), ids.end());
    GenerateResult r = generate(m, fresh, g, &*tok, [](const std::string& s) {
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
    });
    std::cout << "\n";
    history.push_back({"assistant", r.text});
    cached = ids;
    cached.insert(cached.end(), r.new_tokens.begin(), r.new_tokens.end());
    if (static_cast<int64_t>(cached.size()) > m.position()) cached.resize(static_cast<size_t>(m.position()));
  }
  return 0;
}

}  // namespace luminal::cli
