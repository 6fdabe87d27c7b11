#pragma once
// Per-format block decoders behind dequantize_row. Each decodes `nblocks` consecutive blocks
// from src into dst (block_size floats per block). Internal to the loader.
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace luminal::dequant {

// Unaligned little-endian loads: GGUF blocks are byte-packed (e.g. 18-byte q4_0 blocks).
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

void q4_0(const uint8_t* src, float* dst, int64_t nblocks);
void q4_1(const uint8_t* src, float* dst, int64_t nblocks);
void q5_0(const uint8_t* src, float* dst, int64_t nblocks);
void q5_1(const uint8_t* src, float* dst, int64_t nblocks);
void q8_0(const uint8_t* src, float* dst, int64_t nblocks);
void q2_k(const uint8_t* src, float* dst, int64_t nblocks);
void q3_k(const uint8_t* src, float* dst, int64_t nblocks);
void q4_k(const uint8_t* src, float* dst, int64_t nblocks);
void q5_k(const uint8_t* src, float* dst, int64_t nblocks);
void q6_k(const uint8_t* src, float* dst, int64_t nblocks);

}  // namespace luminal::dequant
