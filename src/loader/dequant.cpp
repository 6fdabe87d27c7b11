#include "loader/dequant.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "loader/dequant_blocks.h"

namespace luminal {
namespace {

using BlockDecoder = void (*)(const uint8_t*, float*, int64_t);

// nullptr for the plain float types (handled inline) and for unsupported types.
BlockDecoder block_decoder(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return dequant::q4_0;
    case GgmlType::Q4_1: return dequant::q4_1;
    case GgmlType::Q5_0: return dequant::q5_0;
    case GgmlType::Q5_1: return dequant::q5_1;
    case GgmlType::Q8_0: return dequant::q8_0;
    case GgmlType::Q2_K: return dequant::q2_k;
    case GgmlType::Q3_K: return dequant::q3_k;
    case GgmlType::Q4_K: return dequant::q4_k;
    case GgmlType::Q5_K: return dequant::q5_k;
    case GgmlType::Q6_K: return dequant::q6_k;
    default: return nullptr;
  }
}

bool is_plain_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

}  // namespace

bool can_dequantize(GgmlType t) { return is_plain_float(t) || block_decoder(t) != nullptr; }

void dequantize_row(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  if (!can_dequantize(t))
    throw Error("cannot dequantize ggml type " + ggml_type_name(t) +
                ": luminal supports f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K "
                "and q6_K; re-quantize the model to one of these");
  ggml_row_bytes(t, n);  // throws if n is not a whole number of blocks
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = dequant::load_f16(src + 2 * i);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(dequant::load_u16(src + 2 * i));
      return;
    default:
      block_decoder(t)(src, dst, n / ggml_block_size(t));
  }
}

std::vector<float> dequantize(const GgufTensor& tensor) {
  const int64_t n = tensor.numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 0) return out;
  try {
    if (can_dequantize(tensor.type))
      LM_ASSERT(ggml_row_bytes(tensor.type, n) == tensor.nbytes,
                "GgufTensor '" + tensor.name + "': nbytes does not match its shape and type");
    dequantize_row(tensor.type, tensor.data, out.data(), n);
  } catch (const Error& e) {
    throw Error("tensor '" + tensor.name + "': " + e.what());
  }
  return out;
}

}  // namespace luminal
