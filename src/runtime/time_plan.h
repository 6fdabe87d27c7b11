#pragma once
// Times a plan for the search: runs it with every input filled with ones (never zeros, which
// hide NaNs behind 0*x) and returns the median of `trials` runs in ms, or nullopt to reject it
// (NaN/Inf in a float output, an error while running, a first run over the timeout). Never
// throws. `setup` installs a backend's kernels on the runner before the runs.
#include <functional>
#include <optional>

#include "runtime/interpreter.h"

namespace luminal {

std::optional<double> time_plan(const Graph& plan, const DimMap& dims, int trials, double timeout_ms,
                                const std::function<void(Interpreter&)>& setup = nullptr);

}  // namespace luminal
