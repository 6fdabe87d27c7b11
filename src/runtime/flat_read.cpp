#include "runtime/flat_read.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"

namespace luminal {

// Whether every element of a strided layout lies inside a buffer of `numel` elements.
static bool layout_in_bounds(const Reader::Strided& s, const std::vector<int64_t>& shape, size_t numel) {
  if (s.strides.size() != shape.size()) return false;
  int64_t lo = s.offset, hi = s.offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return true;  // reads nothing
    (s.strides[d] < 0 ? lo : hi) += (shape[d] - 1) * s.strides[d];
  }
  return lo >= 0 && hi < static_cast<int64_t>(numel);
}

bool strided_in_bounds(const Reader& r, const std::vector<int64_t>& shape) {
  return r.strided() && layout_in_bounds(*r.strided(), shape, r.buffer().numel());
}

bool flat_in_bounds(const Reader& r) {
  return r.flat() && layout_in_bounds(r.flat()->layout, r.flat()->shape, r.buffer().numel());
}

bool stacked_in_bounds(const Reader& r) {
  return r.stacked() && layout_in_bounds(r.stacked()->below.layout, r.stacked()->below.shape, r.buffer().numel());
}

// Reads `count` elements from buffer element `idx` on, `step` apart, as floats.
static void read_run(const Buffer& b, int64_t idx, int64_t step, int64_t count, float* dst) {
  const uint8_t* p = b.bytes();
  switch (b.dtype()) {
    case DType::F32: {
      const float* f = reinterpret_cast<const float*>(p) + idx;
      if (step == 1) std::copy(f, f + count, dst);
      else for (int64_t i = 0; i < count; ++i) dst[i] = f[i * step];
      return;
    }
    case DType::BF16: {  // a bf16 cache read through a view (its heads repeated per query group)
      const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + idx;
      for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(h[i * step]);
      return;
    }
    case DType::F16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + idx;
      for (int64_t i = 0; i < count; ++i) dst[i] = f16_to_f32(h[i * step]);
      return;
    }
    case DType::Bool:
      for (int64_t i = 0; i < count; ++i) dst[i] = p[idx + i * step] ? 1.0f : 0.0f;
      return;
    default:  // i32 stays nonzero as a float
      for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(b.get(static_cast<size_t>(idx + i * step)));
  }
}

void load_floats(const Reader& r, bool flat, int64_t z0, int64_t n, float* dst) {
  if (!flat) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(r(z0 + i));
    return;
  }
  const std::vector<int64_t>& shape = r.flat()->shape;
  const Reader::Strided& s = r.flat()->layout;
  const size_t rank = shape.size();
  if (rank == 0) return read_run(r.buffer(), s.offset, 0, n, dst);
  // Coordinates of z0; then runs along the last axis, carrying into the others.
  std::vector<int64_t> coord(rank);
  int64_t rem = z0, idx = s.offset;
  for (size_t d = rank; d-- > 0;) {
    coord[d] = rem % shape[d];
    rem /= shape[d];
    idx += coord[d] * s.strides[d];
  }
  const int64_t last = shape[rank - 1], step = s.strides[rank - 1];
  for (int64_t i = 0; i < n;) {
    int64_t run = std::min(n - i, last - coord[rank - 1]);
    read_run(r.buffer(), idx, step, run, dst + i);
    i += run;
    idx += run * step;
    coord[rank - 1] += run;
    for (size_t d = rank; d-- > 1 && coord[d] == shape[d];) {
      idx += s.strides[d - 1] - coord[d] * s.strides[d];
      coord[d] = 0;
      ++coord[d - 1];
    }
  }
}

// Rows along the last axis of a strided layout, row-major into `dst`: whole runs where the axis
// is contiguous. With a mask (lo, hi per dim), elements outside it are `pad` and never read.
static void copy_rows(const Reader::Flat& f, const std::vector<int64_t>* lo, const std::vector<int64_t>* hi, const uint8_t* src,
                      size_t es, const uint8_t* pad, uint8_t* dst) {
  const size_t rank = f.shape.size();
  int64_t count = 1;
  for (int64_t d : f.shape) count *= d;
  if (count <= 0) return;
  if (rank == 0) {
    std::memcpy(dst, src + static_cast<size_t>(f.layout.offset) * es, es);
    return;
  }
  const int64_t last = f.shape[rank - 1], step = f.layout.strides[rank - 1];
  const int64_t first_in = lo ? std::max<int64_t>(0, (*lo)[rank - 1]) : 0, end_in = hi ? std::min(last, (*hi)[rank - 1]) : last;
  std::vector<int64_t> coord(rank, 0);
  int64_t idx = f.layout.offset;  // buffer index of the row's first element
  for (int64_t z = 0; z < count; z += last) {
    bool row_in = first_in < end_in;
    for (size_t d = 0; lo && d + 1 < rank && row_in; ++d) row_in = coord[d] >= (*lo)[d] && coord[d] < (*hi)[d];
    const int64_t a = row_in ? first_in : last, b = row_in ? end_in : last;  // the row's elements inside the mask
    uint8_t* row = dst + static_cast<size_t>(z) * es;
    for (int64_t i = 0; i < a; ++i) std::memcpy(row + static_cast<size_t>(i) * es, pad, es);
    if (step == 1 && b > a) {
      std::memcpy(row + static_cast<size_t>(a) * es, src + static_cast<size_t>(idx + a) * es, static_cast<size_t>(b - a) * es);
    } else {
      for (int64_t i = a; i < b; ++i) std::memcpy(row + static_cast<size_t>(i) * es, src + static_cast<size_t>(idx + i * step) * es, es);
    }
    for (int64_t i = b; i < last; ++i) std::memcpy(row + static_cast<size_t>(i) * es, pad, es);
    for (size_t d = rank - 1; d-- > 0;) {  // the next row: carry through the outer axes
      idx += f.layout.strides[d];
      if (++coord[d] < f.shape[d]) break;
      idx -= coord[d] * f.layout.strides[d];
      coord[d] = 0;
    }
  }
}

void copy_flat(const Reader::Flat& f, const uint8_t* src, size_t es, uint8_t* dst) { copy_rows(f, nullptr, nullptr, src, es, nullptr, dst); }

Buffer copy_below_top(const Reader& r) {
  const Reader::Flat& below = r.stacked()->below;
  int64_t count = 1;
  for (int64_t d : below.shape) count *= d;
  Buffer c(r.dtype(), std::vector<int64_t>{count});
  copy_flat(below, r.buffer().bytes(), dtype_size(r.dtype()), c.bytes());
  return c;
}

void copy_masked(const Reader::Masked& m, const uint8_t* src, size_t es, const uint8_t* pad, uint8_t* dst) {
  copy_rows(m.layout, &m.lo, &m.hi, src, es, pad, dst);
}

}  // namespace luminal
