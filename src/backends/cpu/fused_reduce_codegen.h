#pragma once
// Source (C, also valid C++) for a fused reduction (FusedSum, FusedMax): for each output, the prologue program
// runs along the reduced axis in registers and is summed (eight f32 partial sums, so the loop
// vectorises) or maxed (NaN sticks, as in the reference), then the optional epilogue runs on
// the result. Values round to their dtypes as the reference rounds them; only the order of a
// float sum differs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/fused_codegen.h"

namespace luminal::cpu {

struct FusedReduceSignature {
  bool is_sum = true;
  FusedProgram prologue;
  std::optional<FusedProgram> epilogue;  // its input 0 is the reduced value
  std::vector<DType> input_dtypes;       // prologue inputs, then the epilogue's other inputs
  std::vector<InnerStride> along;        // per prologue input: its stride along the reduced axis
  DType out_dtype = DType::F32;
};

// The kernel's C ABI. Every input has `rank` strides over the reduction's domain `shape`
// (epilogue inputs: stride 0 on the reduced axis); outputs are numbered row-major over the
// domain without `axis`. Computes outputs [o0, o1).
using FusedReduceFn = void (*)(const void* const* in, const int64_t* off, const int64_t* st, void* out,
                               const int64_t* shape, int64_t rank, int64_t axis, int64_t o0, int64_t o1);

// The function's source, defining `extern "C"` function `name`; nullopt if a program uses an
// op/dtype combination the generator does not cover.
std::optional<std::string> fused_reduce_source(const FusedReduceSignature& sig, const std::string& name);

}  // namespace luminal::cpu
