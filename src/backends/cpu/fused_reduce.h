#pragma once
// The CPU backend's fused reductions (FusedSum, FusedMax): the prologue program runs over a
// block of a row at a time, is summed in 8 f32 lanes (sum) or maxed (max, NaN propagating),
// then the optional epilogue runs over a block of outputs. Rows are split over threads.
#include <cstdint>
#include <vector>

#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;

// False (nothing written) unless: the reduction axis is the input's last, the programs are f32
// arithmetic (Add, Mul, Exp2, Log2, Sin, Sqrt, Recip, constants), every input is f32 and read
// through an in-bounds strided view, and the output is f32.
bool fused_reduce(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                  ThreadPool& pool, bool is_sum);

}  // namespace luminal::cpu
