#include "runtime/buffer.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace luminal {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape) : Buffer(dtype, std::move(shape), Storage()) {}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape, Storage&& storage) : Buffer(dtype, std::move(shape), std::move(storage), true) {}

Buffer Buffer::overwritten(DType dtype, std::vector<int64_t> shape, Storage&& storage) {
  return Buffer(dtype, std::move(shape), std::move(storage), false);
}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape, Storage&& storage, bool zero)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(std::move(storage)) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw Error("buffer: negative dimension in shape " + luminal::shape_string(shape_));
    numel_ *= static_cast<size_t>(d);
  }
  const size_t n = numel_ * dtype_size(dtype_);
  const bool fresh = bytes_.capacity() == 0;
  bytes_.resize(n);  // fresh storage comes from calloc, already zero
  if (!fresh && zero && n > 0) std::memset(bytes_.data(), 0, n);  // reused: zeroed, unless its writer fills it
}

Buffer Buffer::borrow(DType dtype, std::vector<int64_t> shape, const uint8_t* data, std::shared_ptr<const void> owner) {
  Buffer b(dtype, {});
  b.shape_ = std::move(shape);
  b.numel_ = 1;
  for (int64_t d : b.shape_) {
    if (d < 0) throw Error("buffer: negative dimension in shape " + luminal::shape_string(b.shape_));
    b.numel_ *= static_cast<size_t>(d);
  }
  b.bytes_.clear();
  b.bytes_.shrink_to_fit();
  b.borrowed_ = data;
  b.owner_ = std::move(owner);
  return b;
}

Buffer Buffer::borrow_writable(DType dtype, std::vector<int64_t> shape, uint8_t* data, std::shared_ptr<const void> owner) {
  Buffer b = borrow(dtype, std::move(shape), data, std::move(owner));
  b.writable_ = true;
  return b;
}

Buffer::Buffer(const Buffer& o) : dtype_(o.dtype_), shape_(o.shape_), numel_(o.numel_) {
  bytes_.assign(o.bytes(), o.bytes() + o.nbytes());
}

Buffer& Buffer::operator=(const Buffer& o) {
  if (this != &o) *this = Buffer(o);
  return *this;
}

uint8_t* Buffer::bytes() {
  if (writable_) return const_cast<uint8_t*>(borrowed_);
  LM_ASSERT(!borrowed_, "a borrowed (memory-mapped) buffer is read-only");
  return bytes_.data();
}

static void check_count(size_t have, const Buffer& b) {
  if (have != b.numel())
    throw Error("buffer: " + std::to_string(have) + " values given for shape " + b.shape_string() + " (" +
                std::to_string(b.numel()) + " elements)");
}

Buffer Buffer::f32(const std::vector<float>& values, std::vector<int64_t> shape) {
  Buffer b(DType::F32, std::move(shape));
  check_count(values.size(), b);
  std::memcpy(b.bytes(), values.data(), values.size() * 4);
  return b;
}

Buffer Buffer::i32(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  Buffer b(DType::I32, std::move(shape));
  check_count(values.size(), b);
  std::memcpy(b.bytes(), values.data(), values.size() * 4);
  return b;
}

Buffer Buffer::boolean(const std::vector<bool>& values, std::vector<int64_t> shape) {
  Buffer b(DType::Bool, std::move(shape));
  check_count(values.size(), b);
  for (size_t i = 0; i < values.size(); ++i) b.bytes_[i] = values[i] ? 1 : 0;
  return b;
}

double convert_value(double v, DType to) {
  switch (to) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return round_to(to, static_cast<float>(v));
    case DType::I32:
      if (std::isnan(v)) return 0;
      if (v >= 2147483647.0) return 2147483647.0;
      if (v <= -2147483648.0) return -2147483648.0;
      return std::trunc(v);
    case DType::Bool: return v != 0 ? 1 : 0;
  }
  return v;
}

double Buffer::get(size_t i) const {
  const uint8_t* p = bytes() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::F32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::F16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case DType::BF16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case DType::Bool: return *p ? 1 : 0;
  }
  return 0;
}

void Buffer::set(size_t i, double v) {
  uint8_t* p = bytes_.data() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::F32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::I32: { int32_t x = static_cast<int32_t>(convert_value(v, DType::I32)); std::memcpy(p, &x, 4); return; }
    case DType::F16: { uint16_t h = f32_to_f16(static_cast<float>(v)); std::memcpy(p, &h, 2); return; }
    case DType::BF16: { uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); return; }
    case DType::Bool: *p = v != 0 ? 1 : 0; return;
  }
}

Buffer Buffer::cast(DType to) const {
  if (to == dtype_) return *this;
  Buffer r(to, shape_);
  for (size_t i = 0; i < numel_; ++i) r.set(i, get(i));
  return r;
}

std::vector<float> Buffer::to_f32() const {
  if (dtype_ == DType::F32) {  // a copy: per-element dispatch cost 0.7 ms for a 128k-vocab row of logits
    std::vector<float> r(numel_);
    std::memcpy(r.data(), bytes(), numel_ * sizeof(float));
    return r;
  }
  std::vector<float> r(numel_);
  for (size_t i = 0; i < numel_; ++i) r[i] = static_cast<float>(get(i));
  return r;
}

std::vector<int32_t> Buffer::to_i32() const {
  std::vector<int32_t> r(numel_);
  for (size_t i = 0; i < numel_; ++i) r[i] = static_cast<int32_t>(convert_value(get(i), DType::I32));
  return r;
}

std::string Buffer::shape_string() const { return luminal::shape_string(shape_); }

}  // namespace luminal
