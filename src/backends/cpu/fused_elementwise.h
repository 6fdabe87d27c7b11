#pragma once
// The CPU backend's fused elementwise kernel for nodes without a generated one: the plan's
// FusedProgram evaluated a block of elements at a time (block_program.h) instead of one element
// at a time through every instruction. Inputs are read by runs of their strided layouts.
#include <cstdint>
#include <vector>

#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;

// False (nothing written) for programs it does not cover: anything but f32 arithmetic
// (Add, Mul, Exp2, Log2, Sin, Sqrt, Recip, constants) into an f32 output.
bool fused_elementwise(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes,
                       Buffer& out, ThreadPool& pool);

}  // namespace luminal::cpu
