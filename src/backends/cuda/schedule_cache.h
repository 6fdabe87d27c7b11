#pragma once
// Schedule choices kept on disk between processes: which of a node's schedules each (function,
// work) runs on this device, named by the chosen schedule's own function and grid cap
// (CudaExecutor::schedule_name; so that a plan whose schedules were reordered or added to
// never reads another's index), and whether a recorded
// step refined it (CudaOptions::refine_in_step). One file per device: a cache copied to another
// GPU or driver is not read there. A file that cannot be read or parsed is ignored (the choices
// are timed again), never an error.
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace luminal::cuda {

class ScheduleCache {
 public:
  struct Entry {
    std::string variant;  // the chosen schedule's function
    bool refined = false;
  };
  ScheduleCache() = default;  // keeps nothing
  // The file for `device` (any text naming the GPU and driver) under `dir`, read if present.
  ScheduleCache(const std::string& dir, const std::string& device);
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const Entry* find(const std::string& function, int64_t work) const;
  void put(const std::string& function, int64_t work, const Entry& e);  // kept from the next save()
  // Writes the file again (through a temporary file and a rename, so a reader never sees half
  // of it); nothing without a folder.
  void save() const;
  size_t size() const { return entries_.size(); }

 private:
  std::string path_, device_;
  std::map<std::pair<std::string, int64_t>, Entry> entries_;
};

}  // namespace luminal::cuda
