#pragma once
// The program of a fused elementwise kernel: primitive elementwise ops over the kernel's
// inputs, each result rounded to its dtype exactly as the unfused nodes would round it.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/dtype.h"
#include "graph/op.h"

namespace luminal {

struct FusedInstr {
  static constexpr int kConst = 255;
  int op = kConst;          // an OpKind (Exp2..LessThan, Cast) or kConst
  DType dtype = DType::F32; // result dtype
  DType in_dtype = DType::F32;  // dtype binary ops compute in (the left operand's)
  int a = -1, b = -1;       // operands: < n_inputs an input, else an earlier instruction
  float value = 0;          // kConst
};

struct FusedProgram {
  int n_inputs = 0;
  std::vector<FusedInstr> instrs;  // the last one is the result

  std::vector<int64_t> encode() const;
  static FusedProgram decode(const std::vector<int64_t>& code);  // throws Error if malformed
  // Decodes the program starting at `pos` and moves `pos` past it (programs can be chained:
  // a fused reduction stores its prologue and then, optionally, its epilogue).
  static FusedProgram decode(const std::vector<int64_t>& code, size_t& pos);
};

}  // namespace luminal
