#pragma once
// Dynamic-dim buckets: ranges of a dim (e.g. tokens this step in 1, 2-64, 65-4096) that each
// get their own searched plan, and a runtime that dispatches on the bound value.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "runtime/interpreter.h"

namespace luminal {

struct DimRange {
  int64_t lo, hi;  // inclusive
};

// For each dim, its buckets (ranges must not overlap). Dims not listed are not bucketed.
using BucketSpec = std::map<std::string, std::vector<DimRange>>;

struct BucketPlan {
  std::map<std::string, DimRange> ranges;  // one range per bucketed dim
  CompileResult compiled;
};

struct BucketedPlans {
  std::vector<BucketPlan> plans;  // every combination of the dims' buckets
  // The plan whose ranges hold the bound dims; throws Error naming the dim and the buckets
  // when a value is in none of them.
  size_t select(const DimMap& dims) const;
};

// Compiles one plan per bucket combination, profiling each at a value inside its ranges (the
// bucket's upper end, capped at 4x its lower end, so a huge bucket is timed at a sane size).
BucketedPlans compile_buckets(const Graph& g, const BucketSpec& buckets, const CompileOptions& opts = {});

// Runs bucketed plans on the reference interpreter: inputs are kept once and handed to the
// selected plan's interpreter when they changed.
class BucketedRuntime {
 public:
  explicit BucketedRuntime(BucketedPlans plans);
  void set_input(const std::string& name, Buffer data);
  void set_dim(const std::string& name, int64_t value);
  void run();
  size_t last_plan() const { return last_; }
  const Buffer& output(const std::string& name) const;
  std::vector<float> output_f32(const std::string& name) const { return output(name).to_f32(); }

 private:
  BucketedPlans plans_;
  std::vector<std::unique_ptr<Interpreter>> rts_;
  std::vector<std::map<std::string, uint64_t>> seen_;  // per plan: input version it holds
  std::map<std::string, std::pair<uint64_t, Buffer>> inputs_;
  DimMap dims_;
  uint64_t version_ = 0;
  size_t last_ = 0;
};

}  // namespace luminal
