// GgufFile's metadata getters: decode values lazily from the (already bounds-checked) mapping.
#include <cstring>
#include <limits>

#include "core/error.h"
#include "loader/gguf.h"
#include "loader/gguf_impl.h"

namespace luminal {
namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
    case GgufValueType::Bool:
      return true;
    default:
      return false;
  }
}

bool is_float(GgufValueType t) { return t == GgufValueType::F32 || t == GgufValueType::F64; }

std::string describe(const GgufKv& kv) {
  if (kv.type == GgufValueType::Array) return std::string("an array of ") + gguf_value_type_name(kv.elem_type);
  return std::string("a ") + gguf_value_type_name(kv.type);
}

const char* getter_for(const GgufKv& kv) {
  bool array = kv.type == GgufValueType::Array;
  GgufValueType t = array ? kv.elem_type : kv.type;
  if (t == GgufValueType::String) return array ? "get_string_array" : "get_string";
  if (is_float(t)) return array ? "get_float_array" : "get_float";
  return array ? "get_int_array" : "get_int";
}

[[noreturn]] void type_mismatch(const std::string& path, const GgufKv& kv, const char* wanted,
                                const char* getter) {
  throw Error("GGUF metadata key '" + kv.key + "' in '" + path + "' holds " + describe(kv) + ", not " +
              wanted + " as " + getter + " expects; read it with " + getter_for(kv));
}

int64_t decode_int(const GgufKv& kv, GgufValueType t, const uint8_t* p) {
  switch (t) {
    case GgufValueType::U8: return load<uint8_t>(p);
    case GgufValueType::I8: return load<int8_t>(p);
    case GgufValueType::U16: return load<uint16_t>(p);
    case GgufValueType::I16: return load<int16_t>(p);
    case GgufValueType::U32: return load<uint32_t>(p);
    case GgufValueType::I32: return load<int32_t>(p);
    case GgufValueType::I64: return load<int64_t>(p);
    case GgufValueType::Bool: return load<uint8_t>(p) != 0;
    case GgufValueType::U64: {
      uint64_t v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error("GGUF metadata key '" + kv.key + "' holds u64 value " + std::to_string(v) +
                    ", which does not fit in int64");
      return static_cast<int64_t>(v);
    }
    default: LM_ASSERT(false, "decode_int on a non-integer type");
  }
  return 0;
}

double decode_float(const GgufKv& kv, GgufValueType t, const uint8_t* p) {
  if (t == GgufValueType::F32) return load<float>(p);
  if (t == GgufValueType::F64) return load<double>(p);
  if (t == GgufValueType::U64) return static_cast<double>(load<uint64_t>(p));
  return static_cast<double>(decode_int(kv, t, p));
}

std::string_view decode_string(const uint8_t*& p) {
  uint64_t len = load<uint64_t>(p);
  std::string_view s(reinterpret_cast<const char*>(p + 8), len);
  p += 8 + len;
  return s;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
  }
  return "unknown";
}

size_t gguf_fixed_value_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::String: case GgufValueType::Array: return 0;
  }
  return 0;
}

const GgufKv* GgufFile::Impl::find_kv(std::string_view key) const {
  auto it = kv_index.find(key);
  return it == kv_index.end() ? nullptr : &kvs[it->second];
}

bool GgufFile::has(std::string_view key) const { return impl_->find_kv(key) != nullptr; }

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(impl_->kvs.size());
  for (const GgufKv& kv : impl_->kvs) out.push_back(kv.key);
  return out;
}

std::optional<std::string> GgufFile::type_name(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return std::nullopt;
  if (kv->type == GgufValueType::Array) return std::string("array[") + gguf_value_type_name(kv->elem_type) + "]";
  return std::string(gguf_value_type_name(kv->type));
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return std::nullopt;
  if (kv->type != GgufValueType::String) type_mismatch(impl_->path, *kv, "a string", "get_string");
  const uint8_t* p = kv->payload;
  return std::string(decode_string(p));
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return std::nullopt;
  if (!is_integer(kv->type)) type_mismatch(impl_->path, *kv, "an integer", "get_int");
  return decode_int(*kv, kv->type, kv->payload);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return std::nullopt;
  if (!is_float(kv->type) && !is_integer(kv->type)) type_mismatch(impl_->path, *kv, "a number", "get_float");
  return decode_float(*kv, kv->type, kv->payload);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return std::nullopt;
  if (!is_integer(kv->type)) type_mismatch(impl_->path, *kv, "a bool", "get_bool");
  if (kv->type == GgufValueType::U64) return load<uint64_t>(kv->payload) != 0;
  return decode_int(*kv, kv->type, kv->payload) != 0;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return {};
  if (kv->type != GgufValueType::Array || kv->elem_type != GgufValueType::String)
    type_mismatch(impl_->path, *kv, "an array of string", "get_string_array");
  std::vector<std::string> out;
  out.reserve(kv->count);
  const uint8_t* p = kv->payload;
  for (uint64_t i = 0; i < kv->count; ++i) out.emplace_back(decode_string(p));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return {};
  if (kv->type != GgufValueType::Array || !is_integer(kv->elem_type))
    type_mismatch(impl_->path, *kv, "an array of integers", "get_int_array");
  size_t size = gguf_fixed_value_size(kv->elem_type);
  std::vector<int64_t> out(kv->count);
  for (uint64_t i = 0; i < kv->count; ++i) out[i] = decode_int(*kv, kv->elem_type, kv->payload + i * size);
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufKv* kv = impl_->find_kv(key);
  if (!kv) return {};
  if (kv->type != GgufValueType::Array || (!is_float(kv->elem_type) && !is_integer(kv->elem_type)))
    type_mismatch(impl_->path, *kv, "an array of numbers", "get_float_array");
  size_t size = gguf_fixed_value_size(kv->elem_type);
  std::vector<double> out(kv->count);
  for (uint64_t i = 0; i < kv->count; ++i) out[i] = decode_float(*kv, kv->elem_type, kv->payload + i * size);
  return out;
}

}  // namespace luminal
