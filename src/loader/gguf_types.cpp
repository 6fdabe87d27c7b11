#include "loader/gguf_types.h"

#include "core/error.h"

namespace luminal {
namespace {

struct TypeTraits {
  const char* name;  // nullptr: not a ggml type
  int64_t block_size;
  size_t type_size;
};

// Sizes as ggml defines them (QK_K = 256 elements per K-quant super-block).
TypeTraits traits_of(uint32_t raw) {
  switch (static_cast<GgmlType>(raw)) {
    case GgmlType::F32: return {"f32", 1, 4};
    case GgmlType::F16: return {"f16", 1, 2};
    case GgmlType::Q4_0: return {"q4_0", 32, 2 + 16};
    case GgmlType::Q4_1: return {"q4_1", 32, 2 + 2 + 16};
    case GgmlType::Q5_0: return {"q5_0", 32, 2 + 4 + 16};
    case GgmlType::Q5_1: return {"q5_1", 32, 2 + 2 + 4 + 16};
    case GgmlType::Q8_0: return {"q8_0", 32, 2 + 32};
    case GgmlType::Q8_1: return {"q8_1", 32, 4 + 4 + 32};
    case GgmlType::Q2_K: return {"q2_K", 256, 2 + 2 + 256 / 16 + 256 / 4};
    case GgmlType::Q3_K: return {"q3_K", 256, 2 + 256 / 4 + 256 / 8 + 12};
    case GgmlType::Q4_K: return {"q4_K", 256, 2 + 2 + 12 + 256 / 2};
    case GgmlType::Q5_K: return {"q5_K", 256, 2 + 2 + 12 + 256 / 8 + 256 / 2};
    case GgmlType::Q6_K: return {"q6_K", 256, 2 + 256 / 2 + 256 / 4 + 256 / 16};
    case GgmlType::Q8_K: return {"q8_K", 256, 4 + 256 + 2 * 256 / 16};
    case GgmlType::IQ2_XXS: return {"iq2_xxs", 256, 2 + 256 / 4};
    case GgmlType::IQ2_XS: return {"iq2_xs", 256, 2 + 256 / 4 + 256 / 32};
    case GgmlType::IQ3_XXS: return {"iq3_xxs", 256, 2 + 256 / 4 + 256 / 8};
    case GgmlType::IQ1_S: return {"iq1_s", 256, 2 + 256 / 8 + 256 / 16};
    case GgmlType::IQ4_NL: return {"iq4_nl", 32, 2 + 16};
    case GgmlType::IQ3_S: return {"iq3_s", 256, 2 + 256 / 4 + 256 / 8 + 256 / 32 + 4};
    case GgmlType::IQ2_S: return {"iq2_s", 256, 2 + 256 / 4 + 256 / 16};
    case GgmlType::IQ4_XS: return {"iq4_xs", 256, 2 + 2 + 256 / 2 + 256 / 64};
    case GgmlType::I8: return {"i8", 1, 1};
    case GgmlType::I16: return {"i16", 1, 2};
    case GgmlType::I32: return {"i32", 1, 4};
    case GgmlType::I64: return {"i64", 1, 8};
    case GgmlType::F64: return {"f64", 1, 8};
    case GgmlType::IQ1_M: return {"iq1_m", 256, 256 / 8 + 256 / 16 + 256 / 32};
    case GgmlType::BF16: return {"bf16", 1, 2};
    case GgmlType::TQ1_0: return {"tq1_0", 256, 2 + 4 * 13};
    case GgmlType::TQ2_0: return {"tq2_0", 256, 2 + 64};
    case GgmlType::MXFP4: return {"mxfp4", 32, 1 + 16};
  }
  return {nullptr, 0, 0};
}

TypeTraits known_traits(GgmlType t) {
  TypeTraits tr = traits_of(static_cast<uint32_t>(t));
  if (!tr.name)
    throw Error("unknown ggml tensor type " + ggml_type_name(t) +
                " (not one of the types ggml defines): the file is corrupt or newer than this reader");
  return tr;
}

}  // namespace

bool is_known_ggml_type(uint32_t raw) { return traits_of(raw).name != nullptr; }

std::string ggml_type_name(GgmlType t) {
  TypeTraits tr = traits_of(static_cast<uint32_t>(t));
  return tr.name ? tr.name : "type" + std::to_string(static_cast<uint32_t>(t));
}

int64_t ggml_block_size(GgmlType t) { return known_traits(t).block_size; }

size_t ggml_type_size(GgmlType t) { return known_traits(t).type_size; }

size_t ggml_row_bytes(GgmlType t, int64_t n) {
  TypeTraits tr = known_traits(t);
  if (n < 0 || n % tr.block_size != 0)
    throw Error("ggml type " + std::string(tr.name) + " stores elements in blocks of " +
                std::to_string(tr.block_size) + ", so a row of " + std::to_string(n) +
                " elements cannot be stored; the innermost dimension must be a multiple of " +
                std::to_string(tr.block_size));
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace luminal
