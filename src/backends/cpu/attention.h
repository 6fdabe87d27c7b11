#pragma once
// The Attention kernel on the CPU: softmax(where(mask, scale * q @ kt, -inf)) @ v. Blocks of
// query rows of one head go through the GEMM kernels (scores by weight_gemm, the weighted sum of
// values by gemm_nn), one block per task: a block's scores stay within 1 MB (at least 16 rows),
// decode's few rows per head spread over the heads, and prefill's blocks over heads and rows.
// A decode with fewer heads than twice the threads, over 1024 keys or more, splits each head's
// keys into slices instead (at least 512 keys each) and merges them (flash-decoding).
// Keys or values without a unit inner stride fall back to one query row at a time.
#include <cstdint>
#include <vector>

#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;

// q [.., m, k], kt [.., k, n], v [.., n, d] in f32 (strided views read in place, other views
// copied), the mask read in the scores' flat order; false (nothing written) for anything else.
// bf16_activations (CpuKernelOptions): where AMX runs, blocks of 16 query rows or more take both
// products on the tiles, q, the keys, the probabilities and the values rounded to bf16.
bool attention(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
               ThreadPool& pool, bool bf16_activations = false);

}  // namespace luminal::cpu
