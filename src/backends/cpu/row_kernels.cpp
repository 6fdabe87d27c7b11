#include "backends/cpu/row_kernels.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/simd8.h"
#include "backends/cpu/thread_pool.h"

namespace luminal::cpu {

std::optional<F32Rows> f32_rows(const Reader& r, const std::vector<int64_t>& shape) {
  if (r.dtype() != DType::F32 || shape.empty() || !strided_in_bounds(r, shape)) return std::nullopt;
  const Reader::Strided& s = *r.strided();
  size_t rank = shape.size();
  F32Rows v;
  v.data = reinterpret_cast<const float*>(r.buffer().bytes());
  v.offset = s.offset;
  v.step = s.strides[rank - 1];
  v.len = shape[rank - 1];
  v.outer_shape.assign(shape.begin(), shape.end() - 1);
  v.outer_strides.assign(s.strides.begin(), s.strides.end() - 1);
  v.rows = v.len == 0 ? 0 : 1;
  for (int64_t d : v.outer_shape) v.rows *= d;
  return v;
}

int64_t row_grain(int64_t len) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len)); }

// rms_row's value times the weight row w: (x * scale) rounded to f32, then * w, as the
// reference's two ops round, in one pass (the weight loop alone was scalar at -O2: 3.5% of a
// Qwen3-0.6B-shaped prefill's samples).
LM_SIMD_CLONES void rms_mul_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  using namespace simd8;
  const float inv_n = 1.0f / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(sum_squares(x, n) * inv_n + eps);
  const f8 s = splat(scale);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) store(out + k, (load(x + k) * s) * load(w + k));
  for (; k < n; ++k) out[k] = (x[k] * scale) * w[k];
}

bool norm_weight_row(const Reader& w, int64_t len, std::vector<float>& row) {
  if (!w.strided()) return false;
  const Reader::Strided& layout = *w.strided();
  for (size_t d = 0; d + 1 < layout.strides.size(); ++d)
    if (layout.strides[d] != 0) return false;
  row.resize(static_cast<size_t>(len));
  // Read straight from the buffer for bf16 and f32 (element by element through the reader it
  // took 14 us of a 1024-wide decode norm); other dtypes by the reader.
  const int64_t step = layout.strides.back();
  const DType t = w.dtype();
  const bool in_bounds = layout.offset >= 0 && step >= 0 && static_cast<size_t>(layout.offset + (len - 1) * step) < w.buffer().numel();
  if (t == DType::BF16 && in_bounds) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(w.buffer().bytes()) + layout.offset;
    for (int64_t k = 0; k < len; ++k) row[static_cast<size_t>(k)] = bf16_to_f32(p[k * step]);
  } else if (t == DType::F32 && in_bounds) {
    const float* p = reinterpret_cast<const float*>(w.buffer().bytes()) + layout.offset;
    for (int64_t k = 0; k < len; ++k) row[static_cast<size_t>(k)] = p[k * step];
  } else {
    for (int64_t k = 0; k < len; ++k) row[static_cast<size_t>(k)] = static_cast<float>(w(k));
  }
  return true;
}

namespace {

// The input as contiguous f32 rows along `axis` (the last), with an f32 output of its shape.
std::optional<F32Rows> last_axis_rows(const Node& n, const std::vector<Reader>& in,
                                      const std::vector<std::vector<int64_t>>& shapes, const Buffer& out) {
  if (in.size() != 1 || out.dtype() != DType::F32 || n.axis + 1 != shapes[0].size()) return std::nullopt;
  std::optional<F32Rows> x = f32_rows(in[0], shapes[0]);
  if (!x || (x->step != 1 && x->len > 1) || static_cast<int64_t>(out.numel()) != x->rows * x->len) return std::nullopt;
  return x;
}

// Runs body(src_row, dst_row) for every row, rows split over the pool.
template <class Body>
void for_rows(ThreadPool& pool, const F32Rows& x, Buffer& out, Body body) {
  float* o = reinterpret_cast<float*>(out.bytes());
  pool.parallel_for(x.rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) body(x.row(r), o + r * x.len);
  }, row_grain(x.len));
}

// out = x * 1/sqrt(sum(x*x) * (1/n) + eps), as the reference rounds it except for the sum's order.
LM_SIMD_CLONES void rms_row(const float* x, float* out, int64_t n, float eps) {
  float inv_n = 1.0f / static_cast<float>(n);
  float scale = 1.0f / std::sqrt(simd8::sum_squares(x, n) * inv_n + eps);
  simd8::scale(x, scale, out, n);
}

LM_SIMD_CLONES void layer_norm_row(const float* x, float* out, int64_t n, float eps) {
  float inv_n = 1.0f / static_cast<float>(n);
  float neg_mean = (simd8::sum(x, n) * inv_n) * -1.0f;
  simd8::add_scalar(x, neg_mean, out, n);  // the centred row, then rms_norm of it in place
  float scale = 1.0f / std::sqrt(simd8::sum_squares(out, n) * inv_n + eps);
  simd8::scale(out, scale, out, n);
}

}  // namespace

// exp2((x - max) * log2e) / sum: the max propagates NaN, so a row with a NaN, or of only -inf
// (where x - max is -inf + inf), comes out NaN, as in the reference. exp2 is simd8's (within
// 1 ulp of the reference's std::exp2; tested to 2) except on the tail.
LM_SIMD_CLONES void softmax_row(const float* x, float* out, int64_t n) {
  using namespace simd8;
  const float log2e = static_cast<float>(1.4426950408889634);
  const float neg_max = max_or_nan(x, n) * -1.0f;
  const f8 nm = splat(neg_max), l2e = splat(log2e);
  f8 acc = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    f8 e = exp2((load(x + j) + nm) * l2e);
    store(out + j, e);
    acc += e;
  }
  float sum = hsum(acc);
  for (; j < n; ++j) sum += out[j] = std::exp2((x[j] + neg_max) * log2e);
  scale(out, 1.0f / sum, out, n);
}


bool rms_norm(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
              ThreadPool& pool) {
  std::optional<F32Rows> x = last_axis_rows(n, in, shapes, out);
  if (!x) return false;
  for_rows(pool, *x, out, [&](const float* s, float* d) { rms_row(s, d, x->len, n.constant); });
  return true;
}

// RMSNorm(x) * w with w one row broadcast over x's rows (a norm's weight, any dtype): the norm
// rounded to f32, then the product, as the reference. Other weights stay with the reference.
bool rms_norm_mul(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                  ThreadPool& pool) {
  if (in.size() != 2) return false;
  std::optional<F32Rows> x = last_axis_rows(n, {in[0]}, {shapes[0]}, out);
  if (!x) return false;
  static thread_local std::vector<float> w;
  if (!norm_weight_row(in[1], x->len, w)) return false;
  const float* wp = w.data();
  for_rows(pool, *x, out, [&](const float* s, float* d) { rms_mul_row(s, wp, d, x->len, n.constant); });
  return true;
}

bool layer_norm(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                ThreadPool& pool) {
  std::optional<F32Rows> x = last_axis_rows(n, in, shapes, out);
  if (!x) return false;
  for_rows(pool, *x, out, [&](const float* s, float* d) { layer_norm_row(s, d, x->len, n.constant); });
  return true;
}

bool softmax(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
             ThreadPool& pool) {
  std::optional<F32Rows> x = last_axis_rows(n, in, shapes, out);
  if (!x) return false;
  for_rows(pool, *x, out, [&](const float* s, float* d) { softmax_row(s, d, x->len); });
  return true;
}

}  // namespace luminal::cpu
