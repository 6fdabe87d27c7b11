#include "models/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "core/error.h"

namespace luminal {

Sampler::Sampler(const SamplingOptions& o) : o_(o), rng_(o.seed) {
  if (o.temperature < 0) throw Error("temperature must be >= 0 (0 is greedy), got " + std::to_string(o.temperature));
  if (o.top_p <= 0 || o.top_p > 1) throw Error("top-p must be in (0, 1], got " + std::to_string(o.top_p));
  if (o.min_p < 0 || o.min_p > 1) throw Error("min-p must be in [0, 1], got " + std::to_string(o.min_p));
  if (o.top_k < 0) throw Error("top-k must be >= 0 (0 is off), got " + std::to_string(o.top_k));
  if (o.repetition_penalty <= 0) throw Error("repetition penalty must be > 0, got " + std::to_string(o.repetition_penalty));
}

int32_t Sampler::next(std::vector<float> logits, const std::vector<int32_t>& history) {
  if (logits.empty()) throw Error("sampler: empty logits");
  if (o_.repetition_penalty != 1.0) {
    std::unordered_set<int32_t> seen(history.begin(), history.end());
    for (int32_t t : seen)
      if (t >= 0 && static_cast<size_t>(t) < logits.size()) {
        float& l = logits[static_cast<size_t>(t)];
        l = l > 0 ? static_cast<float>(l / o_.repetition_penalty) : static_cast<float>(l * o_.repetition_penalty);
      }
  }
  auto argmax = [&] { return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
  if (o_.temperature == 0) return argmax();

  // Candidates sorted by logit, highest first (ties by id, for determinism).
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  size_t keep = ids.size();
  if (o_.top_k > 0) keep = std::min(keep, static_cast<size_t>(o_.top_k));
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), better);
  ids.resize(keep);

  std::vector<double> p(keep);
  double mx = logits[ids[0]] / o_.temperature, total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp(logits[ids[i]] / o_.temperature - mx);
  for (double& x : p) x /= total;
  // top-p: the smallest prefix whose mass reaches top_p (always at least one token).
  if (o_.top_p < 1.0) {
    double mass = 0;
    size_t n = 0;
    while (n < keep && (n == 0 || mass < o_.top_p)) mass += p[n++];
    p.resize(n), ids.resize(n), keep = n;
  }
  // min-p: drop tokens below min_p times the most likely one.
  if (o_.min_p > 0) {
    size_t n = 1;
    while (n < keep && p[n] >= o_.min_p * p[0]) ++n;
    p.resize(n), ids.resize(n), keep = n;
  }
  std::discrete_distribution<size_t> pick(p.begin(), p.end());
  return ids[pick(rng_)];
}

}  // namespace luminal
