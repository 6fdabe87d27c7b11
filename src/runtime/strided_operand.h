#pragma once
// What the matmul kernels (the reference kernel's fast path and the CPU backend's) share: an f32
// operand as pointer, offset and strides, and the batch offsets of two operands.
#include <cstdint>
#include <vector>

#include "runtime/reader.h"

namespace luminal {

// The reader's own buffer when it is f32 read through one strided layer (with stride 1 on the
// last dim when `unit_inner`), else a contiguous f32 copy of the view: O(size), against the
// product's O(m*n*k). Not movable: `data` may point into `copy`.
struct F32Operand {
  const float* data = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  std::vector<float> copy;

  F32Operand(const Reader& r, const std::vector<int64_t>& shape, bool unit_inner = false);
  F32Operand(const F32Operand&) = delete;
  F32Operand& operator=(const F32Operand&) = delete;
};

// Adds to base_a and base_b the offsets of batch `bi`, counted row-major over every dim of
// `shape` but the last two.
void add_batch_offsets(int64_t bi, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides_a,
                       const std::vector<int64_t>& strides_b, int64_t& base_a, int64_t& base_b);

}  // namespace luminal
