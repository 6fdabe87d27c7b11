#include "compiler/plan_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "graph/serialize.h"

namespace luminal {

std::string default_cache_dir() {
  if (const char* d = std::getenv("LUMINAL_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/luminal";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/luminal";
  return ".luminal-cache";
}

std::string hash_key(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string PlanCache::path(const std::string& key) const { return dir_ + "/" + key + ".plan"; }

std::optional<Graph> PlanCache::load(const std::string& key) const {
  std::ifstream in(path(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return deserialize(ss.str());
  } catch (const Error&) {
    return std::nullopt;
  }
}

void PlanCache::store(const std::string& key, const Graph& plan) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("plan cache: cannot create directory '" + dir_ + "': " + ec.message());
  std::string final_path = path(key);
  std::string tmp = final_path + ".tmp" + std::to_string(std::rand());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error("plan cache: cannot write '" + tmp + "'");
    out << serialize(plan);
  }
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) throw Error("plan cache: cannot move '" + tmp + "' to '" + final_path + "': " + ec.message());
}

}  // namespace luminal
