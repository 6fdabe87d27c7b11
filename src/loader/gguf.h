#pragma once
// Reader for GGUF checkpoints (format versions 2 and 3, little-endian, as llama.cpp writes them).
// The file is memory-mapped read-only; tensor data pointers point into the mapping and stay valid
// for as long as the GgufFile (or whatever it was moved into) lives.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/gguf_types.h"

namespace luminal {

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // outermost first (torch order): GGUF's ne[] reversed
  GgmlType type;
  const uint8_t* data;  // into the file mapping; aligned to general.alignment (mapping is page-aligned)
  size_t nbytes;
  int64_t numel() const;
};

// Metadata getters: absent key -> std::nullopt (scalars) or an empty vector (arrays); a key that
// holds a value of an incompatible type -> luminal::Error naming the key and both types.
class GgufFile {
 public:
  // Throws luminal::Error for a missing/unreadable file, a non-GGUF file, an unsupported version,
  // a corrupt or truncated header, an unknown tensor type, or tensor data past the end of file.
  static GgufFile open(const std::string& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  uint32_t version() const;
  const std::string& path() const;
  size_t alignment() const;  // general.alignment, 32 by default

  bool has(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;   // any integer type (and bool)
  std::optional<double> get_float(std::string_view key) const;  // f32/f64 (and integers)
  std::optional<bool> get_bool(std::string_view key) const;     // bool (and integers: != 0)
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;  // integer (and bool) elements
  std::vector<double> get_float_array(std::string_view key) const; // float (and integer) elements
  std::vector<std::string> keys() const;  // in file order

  // The stored type of a key, for dumps: "u32", "string", "array[string]", ...; nullopt if absent.
  std::optional<std::string> type_name(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const;  // in file order
  const GgufTensor* find_tensor(std::string_view name) const;  // nullptr if absent

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminal
