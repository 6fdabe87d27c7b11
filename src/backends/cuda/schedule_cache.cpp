#include "backends/cuda/schedule_cache.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/cache_paths.h"

namespace luminal::cuda {

namespace {

constexpr const char* kHeader = "luminal schedule choices 1";

}  // namespace

ScheduleCache::ScheduleCache(const std::string& dir, const std::string& device) : device_(device) {
  if (dir.empty()) return;
  path_ = (std::filesystem::path(dir) / "cuda" / ("schedules-" + hash_key(device) + ".txt")).string();
  std::ifstream in(path_);
  std::string line;
  if (!in || !std::getline(in, line) || line != std::string(kHeader) + " " + device_) return;
  std::map<std::pair<std::string, int64_t>, Entry> read;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string function, variant, extra;
    int64_t work = 0;
    int refined = 0;
    if (!(s >> function >> work >> variant >> refined) || (s >> extra) || (refined != 0 && refined != 1)) return;  // not ours: ignored whole
    read[{function, work}] = Entry{variant, refined == 1};
  }
  entries_ = std::move(read);
}

const ScheduleCache::Entry* ScheduleCache::find(const std::string& function, int64_t work) const {
  auto it = entries_.find({function, work});
  return it == entries_.end() ? nullptr : &it->second;
}

void ScheduleCache::put(const std::string& function, int64_t work, const Entry& e) {
  if (!enabled()) return;
  entries_[{function, work}] = e;
}

void ScheduleCache::save() const {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  const std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;  // a cache that cannot be written only costs the next process its timing
    out << kHeader << " " << device_ << "\n";
    for (const auto& [key, e] : entries_) out << key.first << " " << key.second << " " << e.variant << " " << (e.refined ? 1 : 0) << "\n";
    if (!out) return;
  }
  std::filesystem::rename(tmp, path_, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace luminal::cuda
