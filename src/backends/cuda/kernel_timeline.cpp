#include "backends/cuda/kernel_timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace luminal::cuda {

std::string kernel_kind(const std::string& name) {
  if (name.rfind("lm_", 0) == 0) {
    const size_t last = name.rfind('_');
    if (last > 3) return name.substr(3, last - 3);
    return name;
  }
  return name.substr(0, 48);
}

namespace {

// One step's kernels in start order with what each adds; fills the step's totals.
std::vector<KernelCost> costs_of(std::vector<KernelRecord> ks, TimelineReport::Step& step) {
  std::sort(ks.begin(), ks.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  std::vector<KernelCost> out;
  uint64_t reach = 0;  // the latest end so far
  double busy = 0;
  for (const KernelRecord& k : ks) {
    const uint64_t end = std::max(k.end_ns, k.start_ns);
    KernelCost c;
    c.kind = kernel_kind(k.name);
    c.us = static_cast<double>(end - k.start_ns) * 1e-3;
    const uint64_t from = out.empty() ? k.start_ns : std::max(reach, k.start_ns);
    c.adds_us = end > from ? static_cast<double>(end - from) * 1e-3 : 0.0;
    c.blocks = k.blocks;
    c.threads = k.threads;
    busy += c.adds_us;
    reach = out.empty() ? end : std::max(reach, end);
    out.push_back(c);
  }
  step.kernels = static_cast<int>(ks.size());
  step.span_us = ks.empty() ? 0 : static_cast<double>(reach - ks.front().start_ns) * 1e-3;
  step.busy_us = busy;
  step.idle_us = step.span_us - busy;
  return out;
}

}  // namespace

TimelineReport analyse_timeline(const std::vector<std::vector<KernelRecord>>& steps) {
  TimelineReport r;
  std::vector<std::vector<KernelCost>> all;
  for (const auto& ks : steps) {
    if (ks.empty()) continue;
    TimelineReport::Step s;
    all.push_back(costs_of(ks, s));
    r.steps.push_back(s);
  }
  if (all.empty()) return r;
  std::map<std::string, KindCost> by_kind;
  for (const auto& costs : all)
    for (const KernelCost& c : costs) {
      KindCost& k = by_kind[c.kind];
      k.kind = c.kind;
      k.count += 1;
      k.us += c.us;
      k.adds_us += c.adds_us;
    }
  const double n = static_cast<double>(all.size());
  for (auto& [name, k] : by_kind) {
    k.count /= n;
    k.us /= n;
    k.adds_us /= n;
    r.kinds.push_back(k);
  }
  std::sort(r.kinds.begin(), r.kinds.end(), [](const KindCost& a, const KindCost& b) { return a.adds_us > b.adds_us; });
  // The step of median span, so one slow step (a page fault, a clock change) does not set the listing.
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.steps[a].span_us < r.steps[b].span_us; });
  r.sequence = all[order[order.size() / 2]];
  return r;
}

std::string format_timeline(const TimelineReport& r, size_t show) {
  std::string out;
  char line[256];
  out += "kernel timeline: step  kernels  span_us  busy_us  idle_us\n";
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const auto& s = r.steps[i];
    std::snprintf(line, sizeof line, "  %4zu %8d %9.1f %8.1f %8.1f\n", i, s.kernels, s.span_us, s.busy_us, s.idle_us);
    out += line;
  }
  out += "per step, by kind (most added first): count  us  adds_us\n";
  for (const KindCost& k : r.kinds) {
    std::snprintf(line, sizeof line, "  %-40s %7.1f %9.1f %9.1f\n", k.kind.c_str(), k.count, k.us, k.adds_us);
    out += line;
  }
  std::snprintf(line, sizeof line, "the median step's first %zu kernels: us  adds_us  blocks x threads\n", std::min(show, r.sequence.size()));
  out += line;
  for (size_t i = 0; i < r.sequence.size() && i < show; ++i) {
    const KernelCost& c = r.sequence[i];
    std::snprintf(line, sizeof line, "  %4zu %-40s %7.1f %7.1f  %d x %d\n", i, c.kind.c_str(), c.us, c.adds_us, c.blocks, c.threads);
    out += line;
  }
  return out;
}

}  // namespace luminal::cuda
