#pragma once
// The Matmul reference kernel's fast path: f32 operands read through plain strided views. It
// computes exactly what the generic path does (each product rounded to f32, summed in f32 in k
// order), only without evaluating an index program per element.
#include <cstdint>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/reader.h"

namespace luminal {

// False (and nothing written) unless A and the result are f32 and B is a float type.
bool strided_matmul_f32(const Reader& a, const Reader& b, const std::vector<std::vector<int64_t>>& shapes, Buffer& out);

}  // namespace luminal
