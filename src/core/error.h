#pragma once
// One exception type for errors a user can cause, and an assert for internal invariants.
#include <stdexcept>
#include <string>

namespace luminal {

// Thrown for anything a caller can get wrong (bad shape, unknown input, unbound dim...).
// The message names the thing and, where possible, the fix.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown when an internal invariant breaks: a bug in luminal, not in the caller's input.
// It is an exception (not abort) so that a search can reject a failing candidate.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

[[noreturn]] void fail_internal(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace luminal

#define LM_ASSERT(cond, msg)                                                    \
  do {                                                                          \
    if (!(cond)) ::luminal::fail_internal(__FILE__, __LINE__, #cond, (msg));     \
  } while (0)
