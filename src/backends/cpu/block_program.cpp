#include "backends/cpu/block_program.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/simd8.h"

namespace luminal::cpu {

bool block_program_supported(const FusedProgram& p) {
  for (const FusedInstr& i : p.instrs) {
    if (i.dtype != DType::F32) return false;
    if (i.op == FusedInstr::kConst) continue;
    if (i.in_dtype != DType::F32) return false;
    switch (static_cast<OpKind>(i.op)) {
      case OpKind::Add: case OpKind::Mul: case OpKind::Exp2: case OpKind::Log2: case OpKind::Sin:
      case OpKind::Sqrt: case OpKind::Recip:
        break;
      default:
        return false;
    }
  }
  return true;
}

namespace {

LM_SIMD_CLONES void binary(bool add, const float* a, const float* b, float* r, int64_t n) {
  using namespace simd8;
  int64_t j = 0;
  if (add) {
    for (; j + 8 <= n; j += 8) store(r + j, load(a + j) + load(b + j));
    for (; j < n; ++j) r[j] = a[j] + b[j];
  } else {
    for (; j + 8 <= n; j += 8) store(r + j, load(a + j) * load(b + j));
    for (; j < n; ++j) r[j] = a[j] * b[j];
  }
}

}  // namespace

void run_block_program(BlockRegs& regs, int64_t n) {
  const FusedProgram& p = regs.p;
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const FusedInstr& ins = p.instrs[k];
    float* r = regs[p.n_inputs + static_cast<int>(k)];
    if (ins.op == FusedInstr::kConst) {
      std::fill(r, r + n, ins.value);
      continue;
    }
    const float* a = regs[ins.a];
    switch (static_cast<OpKind>(ins.op)) {
      case OpKind::Add: binary(true, a, regs[ins.b], r, n); break;
      case OpKind::Mul: binary(false, a, regs[ins.b], r, n); break;
      case OpKind::Exp2: for (int64_t i = 0; i < n; ++i) r[i] = std::exp2(a[i]); break;
      case OpKind::Log2: for (int64_t i = 0; i < n; ++i) r[i] = std::log2(a[i]); break;
      case OpKind::Sin: for (int64_t i = 0; i < n; ++i) r[i] = std::sin(a[i]); break;
      case OpKind::Sqrt: for (int64_t i = 0; i < n; ++i) r[i] = std::sqrt(a[i]); break;
      case OpKind::Recip: for (int64_t i = 0; i < n; ++i) r[i] = 1.0f / a[i]; break;
      default: break;
    }
  }
}

}  // namespace luminal::cpu
