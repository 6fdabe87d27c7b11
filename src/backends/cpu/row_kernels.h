#pragma once
// The CPU backend's per-row kernels: RMSNorm, LayerNorm and Softmax over the last axis, rows
// split over threads, each row summed in 8 f32 lanes (AVX2 when the machine has it; simd8.h). Each
// returns false (nothing written) for what it does not cover: non-f32 tensors, a reduction
// axis that is not the last one or not contiguous, a view that is not one strided layer.
//
// Also the row access the other CPU kernels share (rotary_where.cpp, fused_reduce.cpp).
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/flat_read.h"
#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;

bool rms_norm(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
              ThreadPool& pool);
bool rms_norm_mul(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                  ThreadPool& pool);  // RMSNorm(x) * w, w a row broadcast over x's rows
bool layer_norm(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                ThreadPool& pool);
bool softmax(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
             ThreadPool& pool);

// An f32 reader seen as rows along its last axis: row r (row-major over the other axes) starts
// at data + row_offset(r) and element j of it is at + j * step.
struct F32Rows {
  const float* data = nullptr;
  int64_t offset = 0, step = 1, len = 0, rows = 0;
  std::vector<int64_t> outer_shape, outer_strides;
  int64_t row_offset(int64_t r) const {
    int64_t idx = offset;
    for (size_t d = outer_shape.size(); d-- > 0;) {
      idx += (r % outer_shape[d]) * outer_strides[d];
      r /= outer_shape[d];
    }
    return idx;
  }
  const float* row(int64_t r) const { return data + row_offset(r); }
};


// nullopt unless the reader is f32, of rank >= 1 and strided_in_bounds.
std::optional<F32Rows> f32_rows(const Reader& r, const std::vector<int64_t>& shape);

// One softmax row, exp2((x - max) * log2e) / sum, as the reference rounds it except for the
// sum's order (8 lanes); out may be x. NaN rows (a NaN, or only -inf) come out NaN.
void softmax_row(const float* x, float* out, int64_t n);

// Rows per parallel_for chunk so that one chunk is worth waking a thread for.
int64_t row_grain(int64_t len);

// RMSNorm(x) * w for one row of n: (x * scale) rounded to f32, then * w, as the reference's two
// ops round (the sum's order aside).
void rms_mul_row(const float* x, const float* w, float* out, int64_t n, float eps);

// A norm's weight as one f32 row of len (w broadcast over every other axis); false if w is not
// such a row.
bool norm_weight_row(const Reader& w, int64_t len, std::vector<float>& row);

}  // namespace luminal::cpu
