#pragma once
// Reference implementations of the LLIR kernels the compiler recognises. Each computes what
// the HLIR pattern it replaced computes, in the same order of operations, so plans with and
// without the kernel agree to rounding (usually bit for bit).
#include <cstdint>
#include <string>
#include <vector>

#include <functional>

#include "graph/fused_program.h"
#include "graph/graph.h"
#include "runtime/reader.h"

namespace luminal {

// Evaluates a fused program for one element; load(i) reads input i.
double eval_fused(const FusedProgram& p, const std::function<double(int)>& load);

// Fills `out` (already shaped) for kernel node `n` reading `in`; `in_shapes` are the concrete
// shapes of the input views. Throws Error for an unknown kernel name.
void run_reference_kernel(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& in_shapes,
                          Buffer& out);

}  // namespace luminal
