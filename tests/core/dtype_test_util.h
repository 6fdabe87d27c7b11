#pragma once
// Independent helpers for the dtype tests: float bits, and reference decoders / rounders that
// work in double arithmetic (ldexp, nearbyint) instead of bit tricks.
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace dtypetest {

inline uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// IEEE binary16 decoded by its definition.
inline double f16_value(uint16_t h) {
  int sign = (h & 0x8000) ? -1 : 1;
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// Round x to a binary format with `mant_bits` stored mantissa bits, minimum normal exponent
// `min_exp` and largest finite value `max_finite`; ties go to even (nearbyint in the default
// FE_TONEAREST mode). Signs and zeros are kept.
inline double round_ref(double x, int mant_bits, int min_exp, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int e = std::max(std::ilogb(x), min_exp);
  double ulp = std::ldexp(1.0, e - mant_bits);
  double r = std::nearbyint(x / ulp) * ulp;  // x / ulp is exact: a power-of-two scaling
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  if (r == 0) return std::copysign(0.0, x);
  return r;
}

inline double bf16_ref(float f) { return round_ref(f, 7, -126, std::ldexp(255.0, 120)); }  // max (2-2^-7)*2^127
inline double f16_ref(float f) { return round_ref(f, 10, -14, 65504.0); }

}  // namespace dtypetest
