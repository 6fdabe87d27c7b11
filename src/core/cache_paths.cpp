#include "core/cache_paths.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

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

}  // namespace luminal
