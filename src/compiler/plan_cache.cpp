#include "compiler/plan_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "graph/serialize.h"

namespace luminal {

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
