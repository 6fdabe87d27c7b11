// Profiling on the reference interpreter: real runs, so the search's machinery is exercised
// end to end on any machine; backends time candidates with their own kernels the same way.
#include "runtime/time_plan.h"
#include "search/search.h"

namespace luminal {

std::optional<double> profile_on_interpreter(const Graph& plan, const SearchOptions& opts) {
  return time_plan(plan, opts.profile_dims, opts.trials, opts.candidate_timeout_ms);
}

}  // namespace luminal
