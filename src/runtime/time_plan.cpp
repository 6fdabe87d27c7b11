#include "runtime/time_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace luminal {

namespace {

// Filled by doubling copies, not element by element: a model's embedding has 10^8 elements.
Buffer ones(DType t, const std::vector<int64_t>& shape) {
  Buffer b(t, shape);
  if (b.numel() == 0) return b;
  b.set(0, 1.0);
  const size_t total = b.numel() * dtype_size(t);
  uint8_t* p = b.bytes();
  for (size_t done = dtype_size(t); done < total; done *= 2) std::memcpy(p + done, p, std::min(done, total - done));
  return b;
}

// Per node: whether the plan may overwrite it, as the destination of a scatter (written in
// place when possible).
std::vector<bool> scatter_destinations(const Graph& plan) {
  std::vector<bool> r(plan.size(), false);
  for (const Node& n : plan.nodes())
    if (n.op == OpKind::Scatter && !n.inputs.empty()) r[n.inputs[0].src] = true;
  return r;
}

}  // namespace

Buffer ProfileInputs::get(const std::string& name, DType t, const std::vector<int64_t>& shape, bool written) {
  std::string key = name + "|" + dtype_name(t);
  for (int64_t d : shape) key += "," + std::to_string(d);
  std::shared_ptr<Buffer>& slot = pool_[key];
  if (!slot) slot = std::make_shared<Buffer>(ones(t, shape));
  if (written) return *slot;  // a copy of a pool buffer owns its bytes
  return Buffer::borrow(t, shape, slot->bytes(), slot);
}

std::optional<double> time_runs(const Graph& plan, const DimMap& profile_dims, int trials, double timeout_ms, int warmups,
                                const PlanRunner& runner, ProfileInputs* pool) {
  DimMap dims = profile_dims;
  for (const std::string& d : plan.dims()) {
    if (!dims.count(d)) dims[d] = 16;
    runner.set_dim(d, dims.at(d));
  }
  const std::vector<bool> written = scatter_destinations(plan);
  for (NodeId id : plan.inputs()) {
    const Node& n = plan.node(id);
    std::vector<int64_t> shape;
    for (const Expr& e : n.shape) shape.push_back(e.eval(dims));
    runner.set_input(n.name, pool ? pool->get(n.name, n.dtype, shape, written[id]) : ones(n.dtype, shape));
  }
  for (int w = 0; w < warmups; ++w) runner.run();
  std::vector<double> times;
  for (int t = 0; t < std::max(1, trials); ++t) {
    auto t0 = std::chrono::steady_clock::now();
    runner.run();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    times.push_back(ms);
    if (t == 0) {
      if (ms > timeout_ms) return std::nullopt;
      for (NodeId id : plan.outputs()) {
        const Buffer out = runner.output(plan.node(id).name);
        if (!is_float(out.dtype())) continue;
        for (size_t i = 0; i < out.numel(); ++i)
          if (!std::isfinite(out.get(i))) return std::nullopt;
      }
    }
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::optional<double> time_plan(const Graph& whole_plan, const DimMap& profile_dims, int trials, double timeout_ms,
                                const std::function<void(Interpreter&)>& setup, ProfileInputs* pool) {
  try {
    // Inputs no output depends on are left out: the graph around a model's repeated layers
    // passes every layer's weights through without reading them.
    Graph plan = whole_plan;
    plan.remove_dead();
    Interpreter rt(plan);
    if (setup) setup(rt);
    PlanRunner runner{[&](const std::string& d, int64_t v) { rt.set_dim(d, v); },
                      [&](const std::string& name, const Buffer& b) { rt.set_input(name, b); }, [&] { rt.run(); },
                      [&](const std::string& name) { return rt.output(name); }};
    return time_runs(plan, profile_dims, trials, timeout_ms, 0, runner, pool);
  } catch (const std::exception&) {
    return std::nullopt;  // a failing candidate is rejected, not fatal
  }
}

}  // namespace luminal
