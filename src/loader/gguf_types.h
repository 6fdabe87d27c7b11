#pragma once
// ggml's tensor element types and their storage sizes (shared by the GGUF reader and dequant).
#include <cstddef>
#include <cstdint>
#include <string>

namespace luminal {

// ggml's numbering, which is what GGUF stores on disk. Gaps (4, 5, 31-33) are retired types.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// False for numbers ggml does not define (a corrupt file, or a type newer than this reader).
bool is_known_ggml_type(uint32_t raw);

// "q4_K", "bf16", ... (ggml's spelling); "type<N>" for numbers ggml does not define.
std::string ggml_type_name(GgmlType t);

// Elements per block (1 for plain types, 32 for Q4_0..Q8_1, 256 for K-quants) and bytes per
// block. Both throw luminal::Error for an unknown type.
int64_t ggml_block_size(GgmlType t);
size_t ggml_type_size(GgmlType t);

// Bytes that n consecutive elements occupy; throws luminal::Error (naming the type and block size)
// when n is negative or not a multiple of the block size.
size_t ggml_row_bytes(GgmlType t, int64_t n);

}  // namespace luminal
