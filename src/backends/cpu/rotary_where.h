#pragma once
// The CPU backend's Rotary and Where kernels. Both compute every element exactly as the
// reference does (no sums involved), just vectorised and split over threads; and Rotary over a
// norm (RMSNormRotary), whose norm sums in 8 lanes like the other row kernels.
#include <cstdint>
#include <vector>

#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;

// x * cos + rotate_half(x) * sin on the last axis. False unless x, cos and sin are f32 read
// through in-bounds strided views with stride 1 on that axis.
bool rotary(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
            ThreadPool& pool);

// Rotary(RMSNormMul(x, w)) with the norm over the last axis, row by row: the normed row (as
// rms_norm_mul rounds it) stays in a scratch row. False where either kernel alone would be.
bool rms_norm_rotary(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                     ThreadPool& pool);

// cond != 0 ? a : b elementwise, into an f32 output from float a and b; cond of any dtype.
// Strided inputs are read by runs along their last axis; an input whose view is not one strided
// layer (a broadcast mask seen through a reshape) is read element by element through its reader.
bool where(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
           ThreadPool& pool);

}  // namespace luminal::cpu
