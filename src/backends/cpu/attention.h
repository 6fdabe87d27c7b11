#pragma once
// The Attention kernel on the CPU: softmax(where(mask, scale * q @ kt, -inf)) @ v, one query
// row at a time per thread (flash-style: no score matrix beyond one row of keys, so a head's
// keys and values stay in cache while its rows go by). Works for prefill and decode alike;
// decode's few rows (group × heads) still spread over the threads.
#include <vector>

#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;

// q [.., m, k], kt [.., k, n], v [.., n, d] in f32 through strided views, the mask read in the
// scores' flat order; false (nothing written) for anything else.
bool attention(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
               ThreadPool& pool);

}  // namespace luminal::cpu
