#pragma once
// Eight-lane f32 helpers for the CPU row kernels, written with GCC vector extensions so one
// source compiles to AVX2 or to pairs of SSE ops. A kernel marked LM_SIMD_CLONES is compiled
// twice (AVX2 and baseline) and the machine picks one at load time; the helpers are always
// inlined into it, so they take on its instruction set. No FMA: products round as in the
// reference, so only a sum's order (8 lanes, then the tail) differs from it.
#include <cstdint>
#include <cstring>

#define LM_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#define LM_SIMD_INLINE inline __attribute__((always_inline))

// f8 values only pass between always-inlined helpers, never across a real call, so the ABI
// note GCC gives for 32-byte vectors in the baseline clones does not apply. Include this header
// only from kernel .cpp files: the note stays off for the rest of the file.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace luminal::cpu::simd8 {

typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef uint32_t u8 __attribute__((vector_size(32)));

LM_SIMD_INLINE f8 load(const float* p) {
  f8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
LM_SIMD_INLINE void store(float* p, f8 v) { std::memcpy(p, &v, sizeof v); }
LM_SIMD_INLINE f8 splat(float x) { return f8{x, x, x, x, x, x, x, x}; }
LM_SIMD_INLINE float hsum(f8 v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

LM_SIMD_INLINE float sum(const float* x, int64_t n) {
  f8 acc = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc += load(x + j);
  float s = hsum(acc);
  for (; j < n; ++j) s += x[j];
  return s;
}

LM_SIMD_INLINE float sum_squares(const float* x, int64_t n) {
  f8 acc = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    f8 v = load(x + j);
    acc += v * v;
  }
  float s = hsum(acc);
  for (; j < n; ++j) s += x[j] * x[j];
  return s;
}

// The largest element, NaN if any is NaN, -inf for an empty row (MaxReduce's semantics).
LM_SIMD_INLINE float max_or_nan(const float* x, int64_t n) {
  const float ninf = -__builtin_inff();
  f8 m = splat(ninf);
  i8 nan = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    f8 v = load(x + j);
    m = v > m ? v : m;
    nan |= v != v;
  }
  float r = ninf;
  bool any_nan = false;
  for (int k = 0; k < 8; ++k) {
    r = m[k] > r ? m[k] : r;
    any_nan |= nan[k] != 0;
  }
  for (; j < n; ++j) {
    r = x[j] > r ? x[j] : r;
    any_nan |= x[j] != x[j];
  }
  return any_nan ? __builtin_nanf("") : r;
}

// out[j] = x[j] * s (out may be x).
LM_SIMD_INLINE void scale(const float* x, float s, float* out, int64_t n) {
  f8 sv = splat(s);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) store(out + j, load(x + j) * sv);
  for (; j < n; ++j) out[j] = x[j] * s;
}

// out[j] = x[j] + c (out may be x).
LM_SIMD_INLINE void add_scalar(const float* x, float c, float* out, int64_t n) {
  f8 cv = splat(c);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) store(out + j, load(x + j) + cv);
  for (; j < n; ++j) out[j] = x[j] + c;
}

// 2^x within about 2 ulp of std::exp2 (which libm rounds correctly or nearly). x = n + f with
// n an integer and |f| <= 1/2; 2^f is its Taylor series to degree 7 (truncation error 5e-9);
// 2^n is applied as two powers of two, so results in the subnormal range round once.
// Inputs below -150 (whose 2^x rounds to 0: -inf, a softmax's masked scores) give 0 without
// being computed: through the scaling below they made subnormal intermediates, and each such
// lane cost a microcode assist (a causal softmax row ran 2.7x slower). Inputs above 129 are
// clamped to 129 (+inf gives inf); NaN stays NaN.
LM_SIMD_INLINE f8 exp2(f8 x) {
  const auto to_zero = x < splat(-150.0f);
  x = to_zero ? splat(0.0f) : x;
  x = x > splat(129.0f) ? splat(129.0f) : x;
  const f8 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds x to an integer
  f8 n = (x + magic) - magic, f = x - n;
  f8 p = splat(1.525273380405984e-05f);
  p = p * f + splat(1.5403530393381608e-04f);
  p = p * f + splat(1.3333558146428443e-03f);
  p = p * f + splat(9.618129107628477e-03f);
  p = p * f + splat(5.550410866482158e-02f);
  p = p * f + splat(2.402265069591007e-01f);
  p = p * f + splat(6.931471805599453e-01f);
  p = p * f + splat(1.0f);
  i8 ni = __builtin_convertvector(n, i8);  // garbage for NaN, but p is NaN then
  i8 n1 = ni >> 1, n2 = ni - n1;
  f8 s1 = (f8)((u8)(n1 + 127) << 23), s2 = (f8)((u8)(n2 + 127) << 23);
  const f8 r = p * s1 * s2;
  return to_zero ? splat(0.0f) : r;
}

}  // namespace luminal::cpu::simd8
