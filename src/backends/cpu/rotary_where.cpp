#include "backends/cpu/rotary_where.h"

#include <algorithm>

#include "backends/cpu/row_kernels.h"
#include "backends/cpu/scratch.h"
#include "backends/cpu/simd8.h"
#include "backends/cpu/thread_pool.h"

namespace luminal::cpu {

namespace {

using simd8::f8;
using simd8::load;
using simd8::store;

// One row of d: out = x*c + rot*s with rot[j] = -x[j + h] for j < d - h, else x[j - (d - h)]
// (h = d / 2). Each product and the sum round to f32, as in the reference.
LM_SIMD_CLONES void rotary_row(const float* x, const float* c, const float* s, float* out, int64_t d) {
  const int64_t h = d / 2, lo = d - h;
  int64_t j = 0;
  for (; j + 8 <= lo; j += 8) store(out + j, load(x + j) * load(c + j) + (-load(x + j + h)) * load(s + j));
  for (; j < lo; ++j) out[j] = x[j] * c[j] + (-x[j + h]) * s[j];
  for (; j + 8 <= d; j += 8) store(out + j, load(x + j) * load(c + j) + load(x + j - lo) * load(s + j));
  for (; j < d; ++j) out[j] = x[j] * c[j] + x[j - lo] * s[j];
}

constexpr int64_t kBlock = 1024;

LM_SIMD_CLONES void select(const float* c, const float* a, const float* b, float* out, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    f8 cv = load(c + j);
    store(out + j, cv != f8{} ? load(a + j) : load(b + j));
  }
  for (; j < n; ++j) out[j] = c[j] != 0.0f ? a[j] : b[j];
}

}  // namespace

bool rotary(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
            ThreadPool& pool) {
  if (in.size() != 3 || out.dtype() != DType::F32 || shapes[1] != shapes[0] || shapes[2] != shapes[0]) return false;
  std::optional<F32Rows> x = f32_rows(in[0], shapes[0]), c = f32_rows(in[1], shapes[1]), s = f32_rows(in[2], shapes[2]);
  if (!x || !c || !s || static_cast<int64_t>(out.numel()) != x->rows * x->len) return false;
  if (x->len > 1 && (x->step != 1 || c->step != 1 || s->step != 1)) return false;
  float* o = reinterpret_cast<float*>(out.bytes());
  const int64_t d = x->len;
  pool.parallel_for(x->rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) rotary_row(x->row(r), c->row(r), s->row(r), o + r * d, d);
  }, row_grain(d));
  return true;
}

bool rms_norm_rotary(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                     ThreadPool& pool) {
  if (in.size() != 4 || out.dtype() != DType::F32 || n.axis + 1 != shapes[0].size() || shapes[2] != shapes[0] || shapes[3] != shapes[0])
    return false;
  std::optional<F32Rows> x = f32_rows(in[0], shapes[0]), c = f32_rows(in[2], shapes[2]), s = f32_rows(in[3], shapes[3]);
  if (!x || !c || !s || static_cast<int64_t>(out.numel()) != x->rows * x->len) return false;
  if (x->len > 1 && (x->step != 1 || c->step != 1 || s->step != 1)) return false;
  static thread_local std::vector<float> w;
  if (!norm_weight_row(in[1], x->len, w)) return false;
  const float* wp = w.data();
  float* o = reinterpret_cast<float*>(out.bytes());
  const int64_t d = x->len;
  // Each row normed into a scratch row (RMSNormMul's f32 values), then rotated into the output.
  pool.parallel_for(x->rows, [&](int64_t r0, int64_t r1) {
    static thread_local std::vector<float> row;  // per thread, reused across calls
    float* normed = scratch(row, static_cast<size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      rms_mul_row(x->row(r), wp, normed, d, n.constant);
      rotary_row(normed, c->row(r), s->row(r), o + r * d, d);
    }
  }, row_grain(d));
  return true;
}

bool where(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
           ThreadPool& pool) {
  if (in.size() != 3 || out.dtype() != DType::F32 || !is_float(in[1].dtype()) || !is_float(in[2].dtype())) return false;
  const int64_t total = static_cast<int64_t>(out.numel());
  bool strided[3];
  for (size_t k = 0; k < 3; ++k) {
    int64_t count = 1;
    for (int64_t d : shapes[k]) count *= d;
    if (count != total) return false;
    strided[k] = flat_in_bounds(in[k]);
  }
  float* o = reinterpret_cast<float*>(out.bytes());
  pool.parallel_for((total + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1) {
    std::vector<float> buf(3 * kBlock);
    float* v[3] = {buf.data(), buf.data() + kBlock, buf.data() + 2 * kBlock};
    for (int64_t b = b0; b < b1; ++b) {
      int64_t z0 = b * kBlock, len = std::min(kBlock, total - z0);
      for (size_t k = 0; k < 3; ++k) load_floats(in[k], strided[k], z0, len, v[k]);
      select(v[0], v[1], v[2], o + z0, len);
    }
  }, 16);
  return true;
}

}  // namespace luminal::cpu
