// Refining tuned schedules inside the recorded step (CudaOptions::refine_in_step).
#include <algorithm>
#include <cstdio>

#include "backends/cuda/cuda_executor.h"

namespace luminal::cuda {

namespace {

// Trials a graph: this many for each runner-up a choice may have (24 at the default 3); each
// trial is a recording and 11 replays of the step.
constexpr size_t kRefineTrialsPerRunnerUp = 8;

// The nodes `from` reads, transitively, itself included.
std::vector<bool> ancestors(const Graph& g, const std::vector<NodeId>& from) {
  std::vector<bool> seen(g.size(), false);
  std::vector<NodeId> stack(from);
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    for (const auto& in : g.node(id).inputs) stack.push_back(in.src);
  }
  return seen;
}

}  // namespace

bool refine_safe(const Graph& plan) {
  for (NodeId id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(id);
    if (n.op != OpKind::Scatter || n.inputs.empty()) continue;
    NodeId dst = n.inputs[0].src;  // through scatters into scatters, to the buffer written
    while (plan.node(dst).op == OpKind::Scatter && !plan.node(dst).inputs.empty()) dst = plan.node(dst).inputs[0].src;
    if (plan.node(dst).op != OpKind::Input) continue;  // a scatter into a fresh buffer: rewritten each run
    std::vector<NodeId> sources;
    for (size_t k = 1; k < n.inputs.size(); ++k) sources.push_back(n.inputs[k].src);
    if (ancestors(plan, sources)[dst]) return false;
  }
  return true;
}

void CudaExecutor::drop_graph(RecordedGraph& g) {
  ctx_.synchronize();  // its replays are done with it
  ctx_.destroy_graph(g.exec);
  g.exec = nullptr;
  for (auto& [name, b] : g.outputs) ctx_.free(b.ptr);
  g.outputs.clear();
  g.choices.clear();
}

// The step's inputs are this run's, set before it (and nothing has replaced them since), so each
// replay below computes what this run is about to: timing them changes no result.
void CudaExecutor::refine_graph(const std::vector<int64_t>& key) {
  if (!replays_repeat_) replays_repeat_ = refine_safe(graph_);
  if (!*replays_repeat_) return;
  RecordedGraph& g = graphs_.at(key);
  // The runners-up close to each choice, the choices with the longest tuning times first (where
  // the step spends most).
  std::vector<std::pair<Choice, size_t>> trials;
  std::vector<Choice> choices;
  for (const Choice& c : g.choices)
    if (!refined_.count(c) && timings_.count(c) && timings_.at(c).size() > 1) choices.push_back(c);
  std::sort(choices.begin(), choices.end(), [&](const Choice& a, const Choice& b) { return timings_.at(a)[0].first > timings_.at(b)[0].first; });
  const size_t max_trials = kRefineTrialsPerRunnerUp * static_cast<size_t>(options_.refine_runners_up);
  for (const Choice& c : choices) {
    refined_.insert(c);
    const auto& t = timings_.at(c);
    for (size_t i = 1; i < t.size() && i <= static_cast<size_t>(options_.refine_runners_up); ++i)
      if (t[i].first <= t[0].first * (1 + options_.refine_within) && trials.size() < max_trials) trials.emplace_back(c, t[i].second);
  }
  // What the step kept, for later processes (CudaOptions::schedule_cache).
  auto remember = [&] {
    for (const Choice& c : choices) schedules_.put(c.first, c.second, {variant_functions_.at(c).at(chosen_.at(c)), true});
    schedules_.save();
  };
  if (trials.empty()) return remember();
  // The runs below are the refinement's, not the caller's: its counters stay as they were.
  int64_t* const counters[] = {&launches_paired_, &joins_compiled_, &norms_folded_, &products_folded_, &experts_summed_,
                               &softmaxes_folded_, &scatters_folded_, &small_groups_run_, &residuals_folded_, &scratch_copies_skipped_,
                               &launches_, &narrowed_groups_, &words_stored_, &experts_in_one_run_, &expert_sums_early_};
  std::vector<int64_t> saved;
  for (int64_t* c : counters) saved.push_back(*c);
  const GraphStats stats = graph_stats_;
  // The graph recorded again with chosen_ as it stands: a run with these dims captures it.
  auto record = [&] {
    drop_graph(g);
    run(true);
  };
  // The median of five pairs of replays (one untimed first: the new graph's upload).
  Context::Timer timer(ctx_);
  auto step_ms = [&] {
    ctx_.launch_graph(g.exec);
    std::vector<double> ms;
    for (int s = 0; s < 5; ++s) {
      timer.start();
      for (int r = 0; r < 2; ++r) ctx_.launch_graph(g.exec);
      ms.push_back(timer.stop_ms() / 2);
    }
    std::sort(ms.begin(), ms.end());
    return ms[2];
  };
  double best = step_ms();
  const bool log = tune_log();
  if (log) std::fprintf(stderr, "luminal cuda: refining %zu choices in the step (%.1f us)\n", trials.size(), best * 1000);
  bool recorded_best = true;
  for (const auto& [c, v] : trials) {
    const size_t was = chosen_.at(c);
    chosen_[c] = v;
    record();
    const double ms = step_ms();
    ++refinements_tried_;
    const bool keep = ms < best;
    if (log) std::fprintf(stderr, "luminal cuda:   %s variant %zu for %zu: %.1f us%s\n", c.first.c_str(), v, was, ms * 1000, keep ? " (kept)" : "");
    if (keep) {
      best = ms;
      ++refinements_kept_;
    } else {
      chosen_[c] = was;
    }
    recorded_best = keep;
  }
  if (!recorded_best) record();
  remember();
  for (size_t i = 0; i < saved.size(); ++i) *counters[i] = saved[i];
  graph_stats_ = stats;
}

}  // namespace luminal::cuda
