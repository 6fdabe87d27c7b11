#pragma once
// Dequantization of ggml tensor storage to f32, bit-for-bit as ggml's reference (and the gguf
// Python package) computes it: each element is the same float32 expression, evaluated in the
// same order, with f16 scales widened exactly.
#include <cstdint>
#include <vector>

#include "loader/gguf.h"  // GgmlType, GgufTensor, ggml_row_bytes / ggml_block_size / ggml_type_size

namespace luminal {

// True for the types dequantize_row handles: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0,
// q2_K, q3_K, q4_K, q5_K, q6_K.
bool can_dequantize(GgmlType t);

// Decodes n consecutive elements stored at src (ggml_row_bytes(t, n) bytes; any alignment) into
// dst[0..n). Throws luminal::Error for an unsupported type or n not a multiple of the block size.
void dequantize_row(GgmlType t, const uint8_t* src, float* dst, int64_t n);

// The whole tensor as f32, in its storage order (row-major over GgufTensor::shape).
std::vector<float> dequantize(const GgufTensor& tensor);

}  // namespace luminal
