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

}  // namespace luminal
