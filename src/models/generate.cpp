#include "models/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace luminal {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

GenerateResult generate(LanguageModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o,
                        const Tokenizer* tokenizer, const std::function<void(const std::string&)>& on_text) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) throw Error("generate: the prompt is empty (give at least one token)");
  if (!o.stop_strings.empty() && !tokenizer) throw Error("generate: stop strings need a tokenizer");
  int64_t room = model.context() - model.position();
  if (static_cast<int64_t>(prompt.size()) > room)
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens but only " + std::to_string(room) +
                " fit in the context of " + std::to_string(model.context()) + " (shorten the prompt or raise --context)");
  std::vector<int32_t> eos = o.eos_ids;
  if (eos.empty()) eos = model.config().eos_ids;

  GenerateResult r;
  Sampler sampler(o.sampling);
  std::vector<int32_t> history = prompt;
  std::optional<StreamDecoder> stream;
  if (tokenizer) stream.emplace(*tokenizer);

  // The next token after `ids`: greedy choices are found where the logits are (on the device,
  // for cuda), so only the token crosses to the host.
  auto step = [&](const std::vector<int32_t>& ids) {
    return sampler.greedy() ? model.step_greedy(ids) : sampler.next(model.step(ids), history);
  };
  // Greedy on cuda: steps are queued one ahead of the host (LanguageModel::queue_greedy), each
  // taking the last one's choice on the device, so the device never waits for the host's loop.
  const bool queued = sampler.greedy() && model.queues_greedy();
  int64_t to_queue = o.max_new_tokens - 1;  // decode steps the loop may still need
  auto queue_ahead = [&] {
    if (to_queue > 0 && model.position() < model.context()) {
      model.queue_greedy();
      --to_queue;
    }
  };
  auto t0 = clock::now();
  int32_t next;
  if (queued) {
    model.queue_greedy(prompt);
    queue_ahead();
    next = model.take_greedy();
  } else {
    next = step(prompt);
  }
  auto taken = clock::now();
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    if (i == 0) r.ttft_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    bool is_eos = std::find(eos.begin(), eos.end(), next) != eos.end();
    if (is_eos && !o.ignore_eos) {
      r.stop_reason = "eos";
      break;
    }
    r.new_tokens.push_back(next);
    history.push_back(next);
    if (stream) {
      std::string piece = stream->push(next);
      r.text += piece;
      bool stopped = false;
      for (const std::string& s : o.stop_strings) {
        size_t at = r.text.find(s);
        if (at != std::string::npos) {
          // Print only what precedes the stop string.
          size_t before = r.text.size() - piece.size();
          if (on_text && at > before) on_text(r.text.substr(before, at - before));
          r.text.resize(at);
          stopped = true;
          break;
        }
      }
      if (stopped) {
        r.stop_reason = "stop_string";
        break;
      }
      if (on_text && !piece.empty()) on_text(piece);
    }
    if (i + 1 == o.max_new_tokens) {
      r.stop_reason = "max_new_tokens";
      break;
    }
    if (queued) {  // the next token's step is queued already, unless the context is full
      if (model.greedy_queued() == 0) {
        r.stop_reason = "context";
        break;
      }
      queue_ahead();
      next = model.take_greedy();
      // A token's time is the interval between two choices reaching the host.
      const auto now = clock::now();
      r.step_ms.push_back(std::chrono::duration<double, std::milli>(now - taken).count());
      taken = now;
      continue;
    }
    if (model.position() >= model.context()) {
      r.stop_reason = "context";
      break;
    }
    auto s0 = clock::now();
    next = step({next});
    r.step_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - s0).count());
  }
  if (queued) model.drop_greedy();  // a step queued past a stop: its token is not the caller's
  if (r.stop_reason.empty()) r.stop_reason = "max_new_tokens";
  if (stream && r.stop_reason != "stop_string") {
    std::string rest = stream->flush();
    r.text += rest;
    if (on_text && !rest.empty()) on_text(rest);
  }
  r.tpot_ms = median(r.step_ms);
  return r;
}

std::vector<int32_t> default_stop_ids(const LanguageModel& m, const Tokenizer* tok) {
  std::vector<int32_t> ids = m.config().eos_ids;
  if (tok)
    for (int32_t e : tok->eos_ids())
      if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
  if (tok)
    for (const char* t : {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end_of_text|>", "<turn|>"})
      if (auto id = tok->token_to_id(t); id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  return ids;
}

}  // namespace luminal
