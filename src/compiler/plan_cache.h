#pragma once
// Compiled plans on disk, keyed by everything that decides them (graph, rules, options,
// backend and device), so compiling the same model twice skips saturation and search.
#include <optional>
#include <string>

#include "core/cache_paths.h"
#include "graph/graph.h"

namespace luminal {

class PlanCache {
 public:
  explicit PlanCache(std::string dir) : dir_(std::move(dir)) {}
  // A cached plan, or nullopt on a miss. A corrupt entry counts as a miss (and is replaced on
  // the next store), never as an error.
  std::optional<Graph> load(const std::string& key) const;
  void store(const std::string& key, const Graph& plan) const;  // atomic (write, then rename)
  std::string path(const std::string& key) const;

 private:
  std::string dir_;
};

}  // namespace luminal
