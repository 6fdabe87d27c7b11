#include "compiler/buckets.h"

#include <algorithm>

#include "core/error.h"

namespace luminal {

static std::string describe(const std::string& dim, const std::vector<DimRange>& rs) {
  std::string s;
  for (const DimRange& r : rs) s += (s.empty() ? "" : ", ") + std::to_string(r.lo) + "-" + std::to_string(r.hi);
  return "'" + dim + "' buckets: " + s;
}

BucketedPlans compile_buckets(const Graph& g, const BucketSpec& buckets, const CompileOptions& opts) {
  for (const auto& [dim, rs] : buckets) {
    if (rs.empty()) throw Error("buckets for '" + dim + "': at least one range is needed");
    std::vector<DimRange> sorted = rs;
    std::sort(sorted.begin(), sorted.end(), [](const DimRange& a, const DimRange& b) { return a.lo < b.lo; });
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i].lo > sorted[i].hi || sorted[i].lo < 0)
        throw Error("buckets for '" + dim + "': range " + std::to_string(sorted[i].lo) + "-" + std::to_string(sorted[i].hi) + " is empty or negative");
      if (i > 0 && sorted[i].lo <= sorted[i - 1].hi) throw Error("overlapping " + describe(dim, rs));
    }
  }
  // Every combination of one range per dim.
  std::vector<std::map<std::string, DimRange>> combos{{}};
  for (const auto& [dim, rs] : buckets) {
    std::vector<std::map<std::string, DimRange>> next;
    for (const auto& c : combos)
      for (const DimRange& r : rs) {
        auto m = c;
        m[dim] = r;
        next.push_back(m);
      }
    combos = next;
  }
  BucketedPlans out;
  for (const auto& ranges : combos) {
    CompileOptions o = opts;
    for (const auto& [dim, r] : ranges) {
      int64_t at = std::min(r.hi, std::max<int64_t>(r.lo, 1) * 4);
      o.search.profile_dims[dim] = at;
      o.cost.dims[dim] = at;
    }
    out.plans.push_back({ranges, compile(g, o)});
  }
  return out;
}

size_t BucketedPlans::select(const DimMap& dims) const {
  for (size_t i = 0; i < plans.size(); ++i) {
    bool fits = true;
    for (const auto& [dim, r] : plans[i].ranges) {
      auto it = dims.find(dim);
      if (it == dims.end())
        throw Error("dynamic dim '" + dim + "' is not bound: bind it before running (set_dim(\"" + dim + "\", value))");
      fits = fits && it->second >= r.lo && it->second <= r.hi;
    }
    if (fits) return i;
  }
  std::string s;
  std::map<std::string, std::vector<DimRange>> all;
  for (const BucketPlan& p : plans)
    for (const auto& [dim, r] : p.ranges) {
      auto& v = all[dim];
      if (std::none_of(v.begin(), v.end(), [&](const DimRange& x) { return x.lo == r.lo; })) v.push_back(r);
    }
  for (const auto& [dim, rs] : all)
    s += " " + dim + "=" + (dims.count(dim) ? std::to_string(dims.at(dim)) : "?") + " (" + describe(dim, rs) + ")";
  throw Error("no compiled bucket holds the bound dims:" + s + "; compile with a bucket that covers it");
}

BucketedRuntime::BucketedRuntime(BucketedPlans plans) : plans_(std::move(plans)) {
  rts_.resize(plans_.plans.size());
  seen_.resize(plans_.plans.size());
}

void BucketedRuntime::set_input(const std::string& name, Buffer data) {
  plans_.plans.at(0).compiled.plan.find_input(name);  // every plan has the graph's inputs
  inputs_[name] = {++version_, std::move(data)};
}

void BucketedRuntime::set_dim(const std::string& name, int64_t value) { dims_[name] = value; }

void BucketedRuntime::run() {
  DimMap dims = dims_;
  // Bare dims of input shapes bind from the buffers, as in the interpreter.
  const Graph& any = plans_.plans.at(0).compiled.plan;
  for (NodeId id : any.inputs()) {
    const Node& n = any.node(id);
    auto it = inputs_.find(n.name);
    if (it == inputs_.end()) continue;
    for (size_t d = 0; d < n.shape.size() && d < it->second.second.shape().size(); ++d)
      if (n.shape[d].kind() == ExprKind::Var && !dims.count(n.shape[d].name()))
        dims[n.shape[d].name()] = it->second.second.shape()[d];
  }
  size_t k = plans_.select(dims);
  if (!rts_[k]) rts_[k] = std::make_unique<Interpreter>(plans_.plans[k].compiled.plan);
  for (auto& [name, vb] : inputs_)
    if (seen_[k][name] != vb.first) {
      rts_[k]->set_input(name, vb.second);
      seen_[k][name] = vb.first;
    }
  for (auto& [d, v] : dims_) rts_[k]->set_dim(d, v);
  rts_[k]->run();
  last_ = k;
}

const Buffer& BucketedRuntime::output(const std::string& name) const {
  if (!rts_.at(last_)) throw Error("output '" + name + "' has not been computed yet: call run() first");
  return rts_[last_]->output(name);
}

}  // namespace luminal
