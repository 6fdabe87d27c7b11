#pragma once
// A fused program (graph/fused_program.h) run over blocks of floats: one pass per instruction
// over a block, with the reference's f32 semantics. The fallback for fused nodes without a
// generated kernel (fused_elementwise) and the prologue/epilogue of fused reductions.
#include <cstdint>
#include <vector>

#include "graph/fused_program.h"

namespace luminal::cpu {

constexpr int64_t kProgramBlock = 256;

// Whether the program is f32 arithmetic the block runner covers (Add, Mul, Exp2, Log2, Sin,
// Sqrt, Recip, constants).
bool block_program_supported(const FusedProgram& p);

// Registers of kProgramBlock floats: the program's inputs (filled by the caller), then one per
// instruction.
struct BlockRegs {
  const FusedProgram& p;
  std::vector<float> mem;
  explicit BlockRegs(const FusedProgram& prog)
      : p(prog), mem(static_cast<size_t>(p.n_inputs + p.instrs.size()) * kProgramBlock) {}
  float* operator[](int i) { return mem.data() + static_cast<size_t>(i) * kProgramBlock; }
  const float* result() { return (*this)[p.n_inputs + static_cast<int>(p.instrs.size()) - 1]; }
};

// Runs every instruction over the first n (<= kProgramBlock) elements of the registers.
void run_block_program(BlockRegs& regs, int64_t n);

}  // namespace luminal::cpu
