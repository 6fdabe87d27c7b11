#include "core/dtype.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace luminal {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::Bool: return "bool";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool})
    if (name == dtype_name(t)) return t;
  throw Error("unknown dtype '" + name + "': expected one of f32, f16, bf16, i32, bool");
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::Bool: return 1;
  }
  return 0;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_storage_only(DType) { return false; }

static uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even; carries into the exponent (and to Inf) correctly
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_f32(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

uint16_t f32_to_f16(float f) {
  uint32_t u = bits_of(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return sign | 0x7e00u;            // NaN
  if (absu >= 0x477ff000u) return sign | 0x7c00u;           // >= 65520 rounds to Inf (or is Inf)
  if (absu < 0x38800000u) {                                 // below 2^-14: subnormal or zero
    // value * 2^24 is the subnormal's integer mantissa; the float add rounds it to nearest even.
    float scaled = float_of(absu) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t mant_lsb = (absu >> 13) & 1u;
  absu += 0xfffu + mant_lsb;                                // round to nearest even at bit 13
  return sign | static_cast<uint16_t>((absu - 0x38000000u) >> 13);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
  return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

int32_t f32_to_i32(float f) {
  if (std::isnan(f)) return 0;
  if (f >= 2147483648.0f) return INT32_MAX;
  if (f <= -2147483648.0f) return INT32_MIN;
  return static_cast<int32_t>(f);
}

float round_to(DType t, float f) {
  switch (t) {
    case DType::F16: return f16_to_f32(f32_to_f16(f));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(f));
    default: return f;
  }
}

}  // namespace luminal
