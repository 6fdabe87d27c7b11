#include "core/error.h"

namespace luminal {

void fail_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": internal error: " + cond +
                      " failed" + (msg.empty() ? "" : ": " + msg));
}

}  // namespace luminal
