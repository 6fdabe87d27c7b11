#pragma once
// Bounds-checked little-endian reads over a byte range of a GGUF file. Every read that would pass
// the end throws luminal::Error instead of touching memory outside the range.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace luminal {

static_assert(std::endian::native == std::endian::little,
              "GGUF is read by reinterpreting little-endian bytes; big-endian hosts are unsupported");

class GgufCursor {
 public:
  // `file_begin` is the start of the file, so error messages can give absolute byte offsets.
  GgufCursor(const uint8_t* file_begin, const uint8_t* begin, const uint8_t* end, const std::string& path)
      : file_begin_(file_begin), pos_(begin), end_(end), path_(&path) {}

  // What is being read now (e.g. "metadata key #3 'general.name'"), for error messages.
  void set_context(std::string context) { context_ = std::move(context); }

  size_t offset() const { return static_cast<size_t>(pos_ - file_begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }

  // Returns a pointer to the next n bytes and moves past them.
  const uint8_t* take(size_t n, const char* what) {
    if (n > remaining()) fail_truncated(what, n);
    const uint8_t* p = pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  // GGUF string: u64 byte length, then the bytes (UTF-8, not NUL-terminated).
  std::string_view read_string(const char* what) {
    static_assert(sizeof(size_t) == sizeof(uint64_t));
    uint64_t len = read<uint64_t>(what);
    return {reinterpret_cast<const char*>(take(len, what)), len};
  }

  // `needed` bytes of `what` do not fit in what is left of the file.
  [[noreturn]] void fail_truncated(const char* what, uint64_t needed) const {
    throw Error("GGUF file '" + *path_ + "' is truncated or corrupt: " + what +
                (context_.empty() ? "" : " of " + context_) + " at byte " + std::to_string(offset()) +
                " needs " + std::to_string(needed) + " bytes but only " + std::to_string(remaining()) +
                " remain; re-download or re-convert the file");
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error("GGUF file '" + *path_ + "' is corrupt: " + problem +
                (context_.empty() ? "" : " (in " + context_ + ")") + " at byte " + std::to_string(offset()));
  }

 private:
  const uint8_t* file_begin_;
  const uint8_t* pos_;
  const uint8_t* end_;
  const std::string* path_;
  std::string context_;
};

}  // namespace luminal
