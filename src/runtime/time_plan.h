#pragma once
// Times a plan for the search: runs it with every input filled with ones (never zeros, which
// hide NaNs behind 0*x) and returns the median of `trials` runs in ms, or nullopt to reject it
// (NaN/Inf in a float output, an error while running, a first run over the timeout). Never
// throws. `setup` installs a backend's kernels on the runner before the runs.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "runtime/interpreter.h"

namespace luminal {

// Inputs of ones kept across candidates: a search times many plans over the same inputs, and
// filling a model layer's weights costs more than running it once.
class ProfileInputs {
 public:
  // Ones of this shape: lent from the pool, or a private copy when the plan writes the input
  // in place (a KV cache).
  Buffer get(const std::string& name, DType t, const std::vector<int64_t>& shape, bool written);

 private:
  std::map<std::string, std::shared_ptr<Buffer>> pool_;  // by name, dtype and shape
};

// `inputs`: a pool to take the inputs from (nullptr: fresh ones for this plan).
std::optional<double> time_plan(const Graph& plan, const DimMap& dims, int trials, double timeout_ms,
                                const std::function<void(Interpreter&)>& setup = nullptr,
                                ProfileInputs* inputs = nullptr);

// What time_runs needs of a runtime that holds `plan` (the interpreter, the CUDA executor).
struct PlanRunner {
  std::function<void(const std::string&, int64_t)> set_dim;
  std::function<void(const std::string&, const Buffer&)> set_input;
  std::function<void()> run;  // returns once the results are there
  std::function<Buffer(const std::string&)> output;
};
// time_plan's measurement on any runtime, for `plan` with its dead nodes removed: dims and
// inputs of ones set, `warmups` untimed runs (work a runtime does once: a recorded CUDA graph),
// then `trials` timed runs; the first timed run rejects the plan when over the timeout or when a
// float output holds NaN/Inf. Throws what the runtime throws.
std::optional<double> time_runs(const Graph& plan, const DimMap& dims, int trials, double timeout_ms, int warmups,
                                const PlanRunner& runner, ProfileInputs* inputs);

}  // namespace luminal
