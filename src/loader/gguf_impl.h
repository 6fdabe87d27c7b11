#pragma once
// GgufFile's internals, shared by the parser (gguf.cpp) and the metadata getters
// (gguf_metadata.cpp). Not part of the public API.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/mapped_file.h"

namespace luminal {

// GGUF metadata value types, with the numbering the format stores.
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

const char* gguf_value_type_name(GgufValueType t);  // "u32", "string", ...

// Bytes one value of a fixed-size type takes; 0 for string/array (variable size).
size_t gguf_fixed_value_size(GgufValueType t);

// One metadata entry. Values are not decoded at open (token lists can be large); the payload
// points into the mapping and was fully bounds-checked by the parser.
struct GgufKv {
  std::string key;
  GgufValueType type;
  GgufValueType elem_type;  // arrays only
  uint64_t count;           // arrays only: number of elements
  const uint8_t* payload;   // scalar value, or the first array element (after type and count)
  size_t payload_size;
};

struct GgufFile::Impl {
  std::string path;
  MappedFile file;
  uint32_t version = 0;
  size_t alignment = 32;
  std::vector<GgufKv> kvs;
  std::map<std::string, size_t, std::less<>> kv_index;  // std::less<> allows string_view lookup
  std::vector<GgufTensor> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;

  Impl(std::string p, MappedFile f) : path(std::move(p)), file(std::move(f)) {}
  const GgufKv* find_kv(std::string_view key) const;
};

}  // namespace luminal
