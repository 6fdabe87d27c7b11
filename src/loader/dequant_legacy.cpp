// The 32-element block formats: q4_0, q4_1, q5_0, q5_1, q8_0. In every one, element j < 16 comes
// from the low nibble of qs[j] and element j + 16 from its high nibble (q8_0: one byte each).
#include "loader/dequant_blocks.h"

// ggml's reference rounds d * q before adding m; a fused multiply-add would round once and can
// differ in the last bit, so contraction stays off here whatever -march allows.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace luminal::dequant {

// block_q4_0 (18 bytes): f16 d, u8 qs[16]. x = d * (q - 8).
void q4_0(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 18, dst += 32) {
    const float d = load_f16(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
      dst[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

// block_q4_1 (20 bytes): f16 d, f16 m, u8 qs[16]. x = d * q + m.
void q4_1(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 20, dst += 32) {
    const float d = load_f16(src);
    const float m = load_f16(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
      dst[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }
}

// block_q5_0 (22 bytes): f16 d, u32 qh (bit j = 5th bit of element j), u8 qs[16]. x = d * (q - 16).
void q5_0(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 22, dst += 32) {
    const float d = load_f16(src);
    const uint32_t qh = load_u32(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

// block_q5_1 (24 bytes): f16 d, f16 m, u32 qh, u8 qs[16]. x = d * q + m.
void q5_1(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 24, dst += 32) {
    const float d = load_f16(src);
    const float m = load_f16(src + 2);
    const uint32_t qh = load_u32(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

// block_q8_0 (34 bytes): f16 d, i8 qs[32]. x = d * q.
void q8_0(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 34, dst += 32) {
    const float d = load_f16(src);
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) dst[j] = d * static_cast<float>(qs[j]);
  }
}

}  // namespace luminal::dequant
