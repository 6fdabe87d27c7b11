#include "runtime/strided_matmul.h"

#include "runtime/strided_operand.h"

#include <cstring>

namespace luminal {

namespace {

// acc[j] = sum over p of a[p*sa] * b[p*sbk + j*sbn], for 4 columns at once: four independent
// f32 chains, each in k order, so the result is bitwise the generic kernel's.
inline void dot4(const float* a, int64_t sa, const float* b, int64_t sbk, int64_t sbn, int64_t k, float* acc) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const float *b0 = b, *b1 = b + sbn, *b2 = b + 2 * sbn, *b3 = b + 3 * sbn;
  for (int64_t p = 0; p < k; ++p) {
    float x = a[p * sa];
    int64_t o = p * sbk;
    s0 += x * b0[o];
    s1 += x * b1[o];
    s2 += x * b2[o];
    s3 += x * b3[o];
  }
  acc[0] = s0, acc[1] = s1, acc[2] = s2, acc[3] = s3;
}

inline float dot1(const float* a, int64_t sa, const float* b, int64_t sbk, int64_t k) {
  float s = 0;
  for (int64_t p = 0; p < k; ++p) s += a[p * sa] * b[p * sbk];
  return s;
}

}  // namespace

bool strided_matmul_f32(const Reader& a, const Reader& b, const std::vector<std::vector<int64_t>>& shapes, Buffer& out) {
  // B may be a bf16/f16 weight: its elements widen to f32 exactly (as the Mul would convert them).
  if (a.dtype() != DType::F32 || out.dtype() != DType::F32 || !is_float(b.dtype())) return false;
  F32Operand sa(a, shapes[0]), sb(b, shapes[1]);
  const std::vector<int64_t>& as = shapes[0];
  size_t r = as.size();
  int64_t m = as[r - 2], k = as[r - 1], n = shapes[1][r - 1];
  const float* A = sa.data;
  const float* B = sb.data;
  float* C = reinterpret_cast<float*>(out.bytes());
  int64_t batch = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, m * n);
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t base_a = sa.offset, base_b = sb.offset;
    add_batch_offsets(bi, as, sa.strides, sb.strides, base_a, base_b);
    // Four columns of B at a time against every row of A: the columns stay in cache while the
    // (smaller) rows of A stream past them.
    const int64_t sak = sa.strides[r - 1], sbk = sb.strides[r - 2], sbn = sb.strides[r - 1];
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int64_t i = 0; i < m; ++i)
        dot4(A + base_a + i * sa.strides[r - 2], sak, B + base_b + j * sbn, sbk, sbn, k, C + (bi * m + i) * n + j);
    for (; j < n; ++j)
      for (int64_t i = 0; i < m; ++i)
        C[(bi * m + i) * n + j] = dot1(A + base_a + i * sa.strides[r - 2], sak, B + base_b + j * sbn, sbk, k);
  }
  return true;
}

}  // namespace luminal
