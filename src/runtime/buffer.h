#pragma once
// A host buffer: a dtype, a concrete shape and the bytes. Elements can be read and written as
// doubles, which hold every value of every supported dtype exactly.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace luminal {

// Bytes from calloc, with elements default-initialised: a fresh allocation is zero without a
// write, and a large one (the KV cache, 1 GB for a 4096-token context) gets its pages from the
// kernel only when they are first touched, so untouched positions cost no time and no memory.
template <class T>
struct ZeroedAllocator {
  using value_type = T;
  ZeroedAllocator() = default;
  template <class U>
  ZeroedAllocator(const ZeroedAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = std::calloc(n, sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  void construct(U* p) { ::new (static_cast<void*>(p)) U; }  // default-init: calloc's zeros stay untouched
  template <class U, class... A>
  void construct(U* p, A&&... a) { ::new (static_cast<void*>(p)) U(std::forward<A>(a)...); }
  template <class U>
  bool operator==(const ZeroedAllocator<U>&) const { return true; }
};
using Storage = std::vector<uint8_t, ZeroedAllocator<uint8_t>>;

class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, std::vector<int64_t> shape);  // zero-filled
  // The same, reusing `storage`'s memory (a freed buffer's bytes) when it is large enough.
  Buffer(DType dtype, std::vector<int64_t> shape, Storage&& storage);
  // Reusing `storage` without zeroing it: for an output its writer fills in full (every node's
  // kernel writes every element). Fresh storage is zero.
  static Buffer overwritten(DType dtype, std::vector<int64_t> shape, Storage&& storage);
  // Read-only memory owned elsewhere (a memory-mapped weight), used in place: `owner` keeps it
  // alive. Copies of a borrowed buffer own their bytes; writing to one is an error.
  static Buffer borrow(DType dtype, std::vector<int64_t> shape, const uint8_t* data, std::shared_ptr<const void> owner);
  // The same for memory the runtime may write: an input updated in place (a caller's KV cache).
  static Buffer borrow_writable(DType dtype, std::vector<int64_t> shape, uint8_t* data, std::shared_ptr<const void> owner);
  Buffer(const Buffer& o);
  Buffer& operator=(const Buffer& o);
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;
  bool borrowed() const { return borrowed_ != nullptr; }

  Storage release() {  // the storage, for reuse (nothing for a borrowed buffer)
    borrowed_ = nullptr;
    writable_ = false;
    owner_.reset();
    return std::move(bytes_);
  }
  static Buffer f32(const std::vector<float>& values, std::vector<int64_t> shape);
  static Buffer i32(const std::vector<int32_t>& values, std::vector<int64_t> shape);
  static Buffer boolean(const std::vector<bool>& values, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t numel() const { return numel_; }
  size_t nbytes() const { return numel_ * dtype_size(dtype_); }
  uint8_t* bytes();
  const uint8_t* bytes() const { return borrowed_ ? borrowed_ : bytes_.data(); }

  double get(size_t i) const;
  void set(size_t i, double v);  // converts with cast semantics (see convert_value)

  Buffer cast(DType to) const;
  std::vector<float> to_f32() const;
  std::vector<int32_t> to_i32() const;
  std::string shape_string() const;

 private:
  Buffer(DType dtype, std::vector<int64_t> shape, Storage&& storage, bool zero);
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  size_t numel_ = 0;
  Storage bytes_;
  const uint8_t* borrowed_ = nullptr;
  bool writable_ = false;  // a borrow_writable buffer
  std::shared_ptr<const void> owner_;
};

// The value `v` takes in dtype `to`: floats round to nearest even (through f32 for f16/bf16),
// i32 truncates toward zero and saturates (NaN -> 0), bool is v != 0 (NaN -> true).
double convert_value(double v, DType to);

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace luminal
