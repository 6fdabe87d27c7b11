#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backends/cuda/cupti_capture.h"
#include "cli/model_cmds.h"
#include "cli/model_session.h"
#include "core/error.h"
#include "models/generate.h"

namespace luminal::cli {

namespace {

void print_table(const char* title, const std::vector<Interpreter::ProfileEntry>& entries, double per) {
  double total = 0;
  for (const auto& e : entries) total += e.ms;
  std::fprintf(stderr, "%s: %.2f ms\n", title, total / per);
  for (const auto& e : entries)
    std::fprintf(stderr, "  %-28s %8.3f ms %5.1f%%  %6.1f calls\n", e.label.c_str(), e.ms / per, 100 * e.ms / total,
                 static_cast<double>(e.calls) / per);
}

// One prefill of the prompt, then decode steps, each profiled kernel by kernel.
void print_profile(LanguageModel& m, const std::vector<int32_t>& prompt) {
  m.reset();
  m.clear_profile();
  m.set_profiling(true);
  m.step(prompt);
  print_table("prefill", m.profile(), 1);
  m.clear_profile();
  const int steps = 8;
  for (int i = 0; i < steps; ++i) m.step({prompt[static_cast<size_t>(i) % prompt.size()]});
  print_table("decode (per token)", m.profile(), steps);
  m.set_profiling(false);
}

// A prefill, a few warm decode steps (the second records the CUDA graph), then `steps` decode
// steps recorded by CUPTI, each waited for, so that every kernel falls in its own step's window.
nlohmann::json print_timeline(LanguageModel& m, const std::vector<int32_t>& prompt, int64_t steps, size_t show) {
  m.reset();
  int32_t tok = m.step_greedy(prompt);
  for (int i = 0; i < 4; ++i) tok = m.step_greedy({tok});
  auto capture = cuda::CuptiCapture::start();
  std::vector<std::pair<uint64_t, uint64_t>> windows;
  for (int64_t i = 0; i < steps; ++i) {
    const uint64_t t0 = capture->now_ns();
    tok = m.step_greedy({tok});
    windows.emplace_back(t0, capture->now_ns());
  }
  const std::vector<cuda::KernelRecord> records = capture->stop();
  std::vector<std::vector<cuda::KernelRecord>> by_step(windows.size());
  for (const cuda::KernelRecord& k : records)
    for (size_t i = 0; i < windows.size(); ++i)
      if (k.start_ns >= windows[i].first && k.start_ns < windows[i].second) by_step[i].push_back(k);
  const cuda::TimelineReport r = cuda::analyse_timeline(by_step);
  std::fputs(cuda::format_timeline(r, show).c_str(), stderr);
  nlohmann::json j;
  std::vector<double> span, busy;
  for (const auto& s : r.steps) {
    span.push_back(s.span_us);
    busy.push_back(s.busy_us);
  }
  j["steps"] = r.steps.size();
  j["kernels"] = r.steps.empty() ? 0 : r.steps.front().kernels;
  j["span_us"] = median(span);
  j["busy_us"] = median(busy);
  for (const auto& k : r.kinds) j["adds_us"][k.kind] = k.adds_us;
  return j;
}

}  // namespace

int run_bench(int argc, char** argv) {
  Args a("luminal bench --model PATH [--prompt-tokens N] [--new-tokens N] [--iters N]",
         "Measures compile time, time to first token and time per output token (medians over iterations); "
         "prints one JSON line.");
  add_model_options(a);
  a.option("--prompt-tokens", "N", "prompt length (token ids cycle through the vocabulary)", "128")
      .option("--new-tokens", "N", "tokens to decode per iteration", "32")
      .option("--iters", "N", "iterations", "3")
      .flag("--profile", "after the iterations, print where one prefill and one decode step spend their time (stderr)")
      .option("--timeline", "N",
              "after the iterations, record N decode steps' kernels on the GPU (CUPTI) and print what each kind adds to a "
              "step (stderr; --backend cuda)",
              "0")
      .option("--timeline-show", "N", "kernels of the median step to list in order", "64");
  if (!a.parse(argc, argv)) return 0;
  int64_t prompt_len = a.integer("--prompt-tokens"), new_tokens = a.integer("--new-tokens"), iters = a.integer("--iters");
  if (prompt_len < 1 || new_tokens < 1 || iters < 1) throw Error("--prompt-tokens, --new-tokens and --iters must be >= 1");
  const int64_t timeline = a.integer("--timeline");
  if (timeline < 0 || a.integer("--timeline-show") < 0) throw Error("--timeline and --timeline-show must be >= 0");
  if (timeline > 0 && a.str("--backend") != "cuda") throw Error("--timeline records GPU kernels: it needs --backend cuda");
  LanguageModel m = load_model(a);
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 13) % m.config().vocab);
  GenerateOptions g;
  g.max_new_tokens = new_tokens;
  g.ignore_eos = true;
  std::vector<double> ttft, tpot;
  for (int64_t it = 0; it < iters; ++it) {
    m.reset();
    GenerateResult r = generate(m, prompt, g);
    ttft.push_back(r.ttft_ms);
    tpot.push_back(r.tpot_ms);
  }
  if (a.on("--profile")) print_profile(m, prompt);
  nlohmann::json j;
  if (timeline > 0) j["timeline"] = print_timeline(m, prompt, timeline, static_cast<size_t>(a.integer("--timeline-show")));
  j["model"] = a.str("--model");
  j["backend"] = a.str("--backend");
  j["activations"] = a.str("--activations");
  j["prompt_tokens"] = prompt_len;
  j["new_tokens"] = new_tokens;
  j["iters"] = iters;
  j["compile_ms"] = m.compile_ms();
  j["load_ms"] = m.load_ms();
  j["ttft_ms"] = median(ttft);
  j["tpot_ms"] = median(tpot);
  j["ttft_ms_each"] = ttft;  // every iteration, in order (the first also warms caches and allocations)
  j["tpot_ms_each"] = tpot;
  j["tokens_per_s"] = median(tpot) > 0 ? 1000.0 / median(tpot) : 0;
  j["weight_bytes"] = m.weight_bytes();
  j["packed_weights"] = m.packed_weights();
  j["kv_cache_bytes"] = m.cache_bytes();
  j["peak_rss_bytes"] = peak_rss_bytes();
  j["kernels"] = m.jit_status();
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace luminal::cli
