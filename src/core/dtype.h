#pragma once
// Element types and their exact conversions.
#include <cstddef>
#include <cstdint>
#include <string>

namespace luminal {

// Compute dtypes. Storage-only quantized types (int8 blocks, fp8, int4) will be added after
// Bool with is_storage_only() true: they can be held and cast from, never computed on.
enum class DType : uint8_t { F32, F16, BF16, I32, Bool };

const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // "f32", "bf16", ...; throws Error otherwise
size_t dtype_size(DType t);
bool is_float(DType t);
bool is_storage_only(DType t);

// IEEE half and bfloat16 <-> float. Narrowing rounds to nearest even; NaN stays NaN (quiet),
// +-Inf stay Inf, overflow goes to Inf, f16 subnormals are exact.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t b);

// Float -> i32 conversion used by Cast: truncates toward zero, saturates at the i32 range,
// NaN becomes 0 (a defined answer every backend can reproduce, unlike C++'s UB).
int32_t f32_to_i32(float f);

// Round a float to the precision of `t` (identity for F32); the value stays a float.
float round_to(DType t, float f);

}  // namespace luminal
