#pragma once
// Where luminal keeps what it caches on disk (compiled plans, compiled kernels), and the hash
// that names cache entries.
#include <string>

namespace luminal {

// $LUMINAL_CACHE_DIR, else $XDG_CACHE_HOME/luminal, else ~/.cache/luminal.
std::string default_cache_dir();

// 16 hex digits of a 64-bit FNV-1a hash of the text.
std::string hash_key(const std::string& text);

}  // namespace luminal
