// The K-quant formats: 256-element super-blocks split into sub-blocks, each with its own scale
// (and for q2_K/q4_K/q5_K its own min), scaled again by the super-block's f16 d (and dmin).
// Every element is computed as (d * scale) * q [- dmin * min], in float32, in that order, so the
// results match ggml's reference dequantization bit for bit.
#include "loader/dequant_blocks.h"

// ggml's reference rounds d * q before adding m; a fused multiply-add would round once and can
// differ in the last bit, so contraction stays off here whatever -march allows.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace luminal::dequant {
namespace {

constexpr int QK = 256;

// q4_K/q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes: bytes 0-3 hold scales 0-3
// (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the same for mins; bytes 8-11 hold the
// low 4 bits of scales 4-7 (low nibble) and mins 4-7 (high nibble).
void unpack_scale_min_k4(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((s[j + 8] & 0x0F) | ((s[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
  }
}

}  // namespace

// block_q2_K (84 bytes): u8 scales[16] (low nibble scale, high nibble min, per 16 elements),
// u8 qs[64] (2-bit), f16 d, f16 dmin. Element 128h + 32s + l is bits 2s..2s+1 of qs[32h + l].
void q2_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 84, dst += QK) {
    const uint8_t* scales = src;
    const uint8_t* qs = src + 16;
    const float d = load_f16(src + 80);
    const float dmin = load_f16(src + 82);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        float* y = dst + 128 * h + 32 * s;
        for (int half = 0; half < 2; ++half) {  // two 16-element sub-blocks per 32 elements
          const uint8_t sc = scales[8 * h + 2 * s + half];
          const float dl = d * static_cast<float>(sc & 0x0F);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            y[l] = dl * static_cast<float>((qs[32 * h + l] >> (2 * s)) & 3) - ml;
        }
      }
    }
  }
}

// block_q3_K (110 bytes): u8 hmask[32] (bit k of hmask[l] = high bit of element 32k + l),
// u8 qs[64] (low 2 bits, laid out as q2_K), u8 scales[12] (sixteen 6-bit scales, offset by 32),
// f16 d. q = low2 - (high bit ? 0 : 4).
void q3_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 110, dst += QK) {
    const uint8_t* hmask = src;
    const uint8_t* qs = src + 32;
    const uint8_t* packed = src + 96;
    const float d = load_f16(src + 108);
    float dl[16];
    for (int s = 0; s < 16; ++s) {
      const int low = s < 8 ? (packed[s] & 0x0F) : (packed[s - 8] >> 4);
      const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
      dl[s] = d * static_cast<float>((low | (high << 4)) - 32);
    }
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        const int k = 4 * h + s;  // which bit of hmask, and which 32-element group
        float* y = dst + 32 * k;
        for (int l = 0; l < 32; ++l) {
          const int q = ((qs[32 * h + l] >> (2 * s)) & 3) - (((hmask[l] >> k) & 1) ? 0 : 4);
          y[l] = dl[2 * k + l / 16] * static_cast<float>(q);
        }
      }
    }
  }
}

// block_q4_K (144 bytes): f16 d, f16 dmin, u8 scales[12] (see unpack_scale_min_k4), u8 qs[128].
// Element 64c + l (l < 32) is the low nibble of qs[32c + l]; element 64c + 32 + l its high nibble.
void q4_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 144, dst += QK) {
    const float d = load_f16(src);
    const float dmin = load_f16(src + 2);
    uint8_t sc[8], mn[8];
    unpack_scale_min_k4(src + 4, sc, mn);
    const uint8_t* qs = src + 16;
    for (int c = 0; c < 4; ++c) {
      const float d1 = d * static_cast<float>(sc[2 * c]), m1 = dmin * static_cast<float>(mn[2 * c]);
      const float d2 = d * static_cast<float>(sc[2 * c + 1]), m2 = dmin * static_cast<float>(mn[2 * c + 1]);
      float* y = dst + 64 * c;
      for (int l = 0; l < 32; ++l) {
        y[l] = d1 * static_cast<float>(qs[32 * c + l] & 0x0F) - m1;
        y[l + 32] = d2 * static_cast<float>(qs[32 * c + l] >> 4) - m2;
      }
    }
  }
}

// block_q5_K (176 bytes): as q4_K plus u8 qh[32] before qs: bit j of qh[l] is the 5th bit of
// element 32j + l.
void q5_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 176, dst += QK) {
    const float d = load_f16(src);
    const float dmin = load_f16(src + 2);
    uint8_t sc[8], mn[8];
    unpack_scale_min_k4(src + 4, sc, mn);
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int c = 0; c < 4; ++c) {
      const float d1 = d * static_cast<float>(sc[2 * c]), m1 = dmin * static_cast<float>(mn[2 * c]);
      const float d2 = d * static_cast<float>(sc[2 * c + 1]), m2 = dmin * static_cast<float>(mn[2 * c + 1]);
      float* y = dst + 64 * c;
      for (int l = 0; l < 32; ++l) {
        const int lo = (qs[32 * c + l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4);
        const int hi = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        y[l] = d1 * static_cast<float>(lo) - m1;
        y[l + 32] = d2 * static_cast<float>(hi) - m2;
      }
    }
  }
}

// block_q6_K (210 bytes): u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), i8 scales[16] (per 16
// elements), f16 d. In each 128-element half h: element r takes nibble r/64 of ql[64h + r%64] and
// bits 2(r/32).. of qh[32h + r%32]; q = 6-bit value - 32.
void q6_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 210, dst += QK) {
    const uint8_t* ql_all = src;
    const uint8_t* qh_all = src + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(src + 192);
    const float d = load_f16(src + 208);
    float ds[16];
    for (int s = 0; s < 16; ++s) ds[s] = d * static_cast<float>(scales[s]);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = ql_all + 64 * h;
      const uint8_t* qh = qh_all + 32 * h;
      const float* dh = ds + 8 * h;
      float* y = dst + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int sub = l / 16;
        y[l] = dh[sub] * static_cast<float>(q1);
        y[l + 32] = dh[2 + sub] * static_cast<float>(q2);
        y[l + 64] = dh[4 + sub] * static_cast<float>(q3);
        y[l + 96] = dh[6 + sub] * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace luminal::dequant
