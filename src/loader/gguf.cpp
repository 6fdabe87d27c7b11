#include "loader/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.h"
#include "loader/gguf_cursor.h"
#include "loader/gguf_impl.h"

namespace luminal {
namespace {

constexpr size_t kDefaultAlignment = 32;  // GGUF's default when general.alignment is absent
constexpr uint32_t kMaxDims = 4;          // GGML_MAX_DIMS: llama.cpp rejects more

std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

void check_header(const MappedFile& file, const std::string& path) {
  const uint8_t* d = file.data();
  if (file.size() == 0) throw Error("'" + path + "' is not a GGUF file: it is empty");
  if (file.size() < 4 || d[0] != 'G' || d[1] != 'G' || d[2] != 'U' || d[3] != 'F')
    throw Error("'" + path + "' is not a GGUF file: it starts with bytes [" +
                hex_bytes(d, std::min<size_t>(4, file.size())) +
                "], not the magic 'GGUF' (47 47 55 46); pass a .gguf checkpoint");
}

uint32_t check_version(uint32_t version, const std::string& path) {
  if (version == 2 || version == 3) return version;
  // GGUF v3 allows big-endian files; their version field reads byte-swapped on a little-endian host.
  if (version == 0x02000000u || version == 0x03000000u)
    throw Error("GGUF file '" + path +
                "' is big-endian; luminal reads only little-endian GGUF (re-convert without --bigendian)");
  if (version == 1)
    throw Error("GGUF file '" + path +
                "' uses format version 1 (pre-release GGUF); luminal reads versions 2 and 3: "
                "re-convert it with a current llama.cpp");
  throw Error("GGUF file '" + path + "' has format version " + std::to_string(version) +
              "; luminal reads versions 2 and 3");
}

GgufValueType read_value_type(GgufCursor& cur, const char* what) {
  uint32_t raw = cur.read<uint32_t>(what);
  if (raw > static_cast<uint32_t>(GgufValueType::F64))
    cur.fail("unknown metadata value type " + std::to_string(raw) +
             " (the file is corrupt or newer than this reader)");
  return static_cast<GgufValueType>(raw);
}

[[noreturn]] void fail_array_too_long(const GgufCursor& cur, uint64_t count) {
  cur.fail("array of " + std::to_string(count) + " elements does not fit in the remaining " +
           std::to_string(cur.remaining()) + " bytes (truncated or corrupt file)");
}

GgufKv read_kv(GgufCursor& cur, uint64_t index) {
  cur.set_context("metadata entry #" + std::to_string(index));
  GgufKv kv;
  kv.key = std::string(cur.read_string("key"));
  cur.set_context("metadata key '" + kv.key + "'");
  kv.type = read_value_type(cur, "value type");
  kv.elem_type = kv.type;
  kv.count = 1;
  if (kv.type == GgufValueType::Array) {
    kv.elem_type = read_value_type(cur, "array element type");
    if (kv.elem_type == GgufValueType::Array) cur.fail("nested arrays are not supported (nor written by llama.cpp)");
    kv.count = cur.read<uint64_t>("array length");
  }
  kv.payload = cur.take(0, "value");
  size_t start = cur.offset();
  size_t elem_size = gguf_fixed_value_size(kv.elem_type);
  if (elem_size != 0) {
    // Fixed-size elements: one bounds check for the whole array, overflow-safe.
    if (kv.count > cur.remaining() / elem_size) fail_array_too_long(cur, kv.count);
    cur.take(kv.count * elem_size, "value");
  } else {
    // Strings: each needs at least its 8-byte length, so a huge count fails fast here.
    if (kv.count > cur.remaining() / 8) fail_array_too_long(cur, kv.count);
    for (uint64_t i = 0; i < kv.count; ++i) cur.read_string("string");
  }
  kv.payload_size = cur.offset() - start;
  return kv;
}

size_t read_alignment(const GgufKv* kv, GgufCursor& cur) {
  if (!kv) return kDefaultAlignment;
  if (kv->type != GgufValueType::U32)
    cur.fail(std::string("general.alignment must be a u32, not ") + gguf_value_type_name(kv->type));
  uint32_t a;
  std::memcpy(&a, kv->payload, 4);
  if (a == 0 || (a & (a - 1)) != 0) cur.fail("general.alignment " + std::to_string(a) + " is not a power of two");
  return a;
}

// Multiplies non-negative sizes, failing on int64 overflow (a corrupt shape must not wrap).
int64_t checked_mul(int64_t a, int64_t b, GgufCursor& cur) {
  if (b != 0 && a > std::numeric_limits<int64_t>::max() / b) cur.fail("tensor size overflows 64 bits");
  return a * b;
}

struct TensorInfo {
  GgufTensor tensor;
  uint64_t offset;  // relative to the start of the data section
};

TensorInfo read_tensor_info(GgufCursor& cur, uint64_t index) {
  cur.set_context("tensor info #" + std::to_string(index));
  TensorInfo info;
  GgufTensor& t = info.tensor;
  t.name = std::string(cur.read_string("tensor name"));
  cur.set_context("tensor '" + t.name + "'");
  uint32_t n_dims = cur.read<uint32_t>("dimension count");
  if (n_dims > kMaxDims) cur.fail(std::to_string(n_dims) + " dimensions (ggml allows at most 4)");
  t.shape.resize(n_dims);
  for (uint32_t i = 0; i < n_dims; ++i) {
    uint64_t ne = cur.read<uint64_t>("dimension");
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) cur.fail("dimension out of range");
    t.shape[n_dims - 1 - i] = static_cast<int64_t>(ne);  // ne[0] is innermost; shape is outermost-first
  }
  uint32_t raw_type = cur.read<uint32_t>("tensor type");
  if (!is_known_ggml_type(raw_type))
    throw Error("tensor '" + t.name + "' has unknown ggml type " + std::to_string(raw_type) +
                "; the file is corrupt or uses a type newer than luminal's GGUF reader");
  t.type = static_cast<GgmlType>(raw_type);
  info.offset = cur.read<uint64_t>("data offset");

  int64_t inner = n_dims ? t.shape.back() : 1;
  if (inner % ggml_block_size(t.type) != 0)
    cur.fail("innermost dimension " + std::to_string(inner) + " is not a multiple of the " +
             ggml_type_name(t.type) + " block size " + std::to_string(ggml_block_size(t.type)));
  int64_t outer = 1;
  for (uint32_t i = 0; i + 1 < n_dims; ++i) outer = checked_mul(outer, t.shape[i], cur);
  int64_t row = static_cast<int64_t>(ggml_row_bytes(t.type, inner));
  t.nbytes = static_cast<size_t>(checked_mul(outer, row, cur));
  checked_mul(outer, inner, cur);  // numel() must fit too
  return info;
}

}  // namespace

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::string& path) {
  MappedFile file;
  try {
    file = MappedFile::open(path);
  } catch (const Error& e) {
    throw Error(std::string("cannot read GGUF file: ") + e.what() + "; check the path");
  }
  check_header(file, path);
  auto impl = std::make_unique<Impl>(path, std::move(file));
  const uint8_t* begin = impl->file.data();
  const uint8_t* end = begin + impl->file.size();
  GgufCursor cur(begin, begin + 4, end, impl->path);

  cur.set_context("header");
  impl->version = check_version(cur.read<uint32_t>("version"), path);
  uint64_t tensor_count = cur.read<uint64_t>("tensor count");
  uint64_t kv_count = cur.read<uint64_t>("metadata count");
  // Each entry takes at least a 8-byte length + 4 bytes more, so absurd counts fail before we loop.
  if (kv_count > cur.remaining() / 12 || tensor_count > cur.remaining() / 12)
    cur.fail("header claims " + std::to_string(tensor_count) + " tensors and " + std::to_string(kv_count) +
             " metadata entries, more than the file can hold");

  impl->kvs.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    GgufKv kv = read_kv(cur, i);
    if (!impl->kv_index.emplace(kv.key, impl->kvs.size()).second)
      cur.fail("metadata key '" + kv.key + "' appears twice");
    impl->kvs.push_back(std::move(kv));
  }
  impl->alignment = read_alignment(impl->find_kv("general.alignment"), cur);

  std::vector<TensorInfo> infos;
  infos.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    infos.push_back(read_tensor_info(cur, i));
    if (!impl->tensor_index.emplace(infos.back().tensor.name, i).second)
      cur.fail("tensor name '" + infos.back().tensor.name + "' appears twice");
  }

  // Tensor data starts at the first multiple of the alignment after the tensor infos.
  size_t a = impl->alignment;
  size_t data_start = (cur.offset() + a - 1) / a * a;
  size_t file_size = impl->file.size();
  impl->tensors.reserve(infos.size());
  for (TensorInfo& info : infos) {
    GgufTensor& t = info.tensor;
    if (info.offset % a != 0)
      throw Error("GGUF file '" + path + "' is corrupt: tensor '" + t.name + "' data offset " +
                  std::to_string(info.offset) + " is not a multiple of the alignment " + std::to_string(a));
    bool fits = data_start <= file_size && info.offset <= file_size - data_start &&
                t.nbytes <= file_size - data_start - info.offset;
    if (!fits)
      throw Error("GGUF file '" + path + "' is truncated: tensor '" + t.name + "' (" + ggml_type_name(t.type) +
                  ", " + std::to_string(t.nbytes) + " bytes at data offset " + std::to_string(info.offset) +
                  ") extends past the end of the file (" + std::to_string(file_size) +
                  " bytes); re-download or re-convert the file");
    t.data = begin + data_start + info.offset;
    impl->tensors.push_back(std::move(t));
  }
  return GgufFile(std::move(impl));
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

uint32_t GgufFile::version() const { return impl_->version; }
const std::string& GgufFile::path() const { return impl_->path; }
size_t GgufFile::alignment() const { return impl_->alignment; }

const std::vector<GgufTensor>& GgufFile::tensors() const { return impl_->tensors; }

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

}  // namespace luminal
