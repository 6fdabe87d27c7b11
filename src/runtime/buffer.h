#pragma once
// A host buffer: a dtype, a concrete shape and the bytes. Elements can be read and written as
// doubles, which hold every value of every supported dtype exactly.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace luminal {

class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, std::vector<int64_t> shape);  // zero-filled
  // The same, reusing `storage`'s memory (a freed buffer's bytes) when it is large enough.
  Buffer(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t>&& storage);
  std::vector<uint8_t> release() { return std::move(bytes_); }  // the storage, for reuse
  static Buffer f32(const std::vector<float>& values, std::vector<int64_t> shape);
  static Buffer i32(const std::vector<int32_t>& values, std::vector<int64_t> shape);
  static Buffer boolean(const std::vector<bool>& values, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t numel() const { return numel_; }
  size_t nbytes() const { return bytes_.size(); }
  uint8_t* bytes() { return bytes_.data(); }
  const uint8_t* bytes() const { return bytes_.data(); }

  double get(size_t i) const;
  void set(size_t i, double v);  // converts with cast semantics (see convert_value)

  Buffer cast(DType to) const;
  std::vector<float> to_f32() const;
  std::vector<int32_t> to_i32() const;
  std::string shape_string() const;

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  size_t numel_ = 0;
  std::vector<uint8_t> bytes_;
};

// The value `v` takes in dtype `to`: floats round to nearest even (through f32 for f16/bf16),
// i32 truncates toward zero and saturates (NaN -> 0), bool is v != 0 (NaN -> true).
double convert_value(double v, DType to);

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace luminal
