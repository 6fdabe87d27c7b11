#pragma once
// lm_exp2f for generated kernels: bit for bit the exp2f the reference calls (glibc's), in a form
// the C compiler vectorises.
#include <string>

namespace luminal::cpu {

// C source defining `static inline float lm_exp2f(float)`. With FMA and AVX2 (where glibc's
// ifunc takes its FMA build of exp2f) it is that build's algorithm, operation for operation:
// x = k/32 + r in double, a 32-entry table for 2^(k/32), a cubic in r with the same three fused
// multiply-adds, then the same special cases for |x| >= 128 and NaN, as selects. Checked equal
// to exp2f on all 2^32 inputs, vectorised at -O3 -march=native (tests/cpu/fused_jit_test.cpp
// checks a stride through them). Elsewhere it calls exp2f.
std::string exp2_source();

}  // namespace luminal::cpu
