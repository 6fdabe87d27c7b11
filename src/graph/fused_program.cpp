#include "graph/fused_program.h"

#include <cstring>

#include "core/error.h"

namespace luminal {

std::vector<int64_t> FusedProgram::encode() const {
  std::vector<int64_t> c{n_inputs, static_cast<int64_t>(instrs.size())};
  for (const FusedInstr& i : instrs) {
    uint32_t bits;
    std::memcpy(&bits, &i.value, 4);
    c.insert(c.end(), {i.op, static_cast<int64_t>(i.dtype), static_cast<int64_t>(i.in_dtype), i.a, i.b, bits});
  }
  return c;
}

FusedProgram FusedProgram::decode(const std::vector<int64_t>& c) {
  size_t pos = 0;
  FusedProgram p = decode(c, pos);
  if (pos != c.size()) throw Error("fused kernel: " + std::to_string(c.size() - pos) + " words after the program");
  return p;
}

FusedProgram FusedProgram::decode(const std::vector<int64_t>& c, size_t& pos) {
  if (c.size() < pos + 2 || c[pos + 1] < 0 || c.size() < pos + 2 + 6 * static_cast<size_t>(c[pos + 1]))
    throw Error("fused kernel: malformed program of " + std::to_string(c.size() - pos) + " words");
  FusedProgram p;
  p.n_inputs = static_cast<int>(c[pos]);
  int64_t count = c[pos + 1];
  const int64_t* base = &c[pos + 2];
  pos += 2 + 6 * static_cast<size_t>(count);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t* w = base + 6 * k;
    FusedInstr i;
    i.op = static_cast<int>(w[0]);
    i.dtype = static_cast<DType>(w[1]);
    i.in_dtype = static_cast<DType>(w[2]);
    i.a = static_cast<int>(w[3]);
    i.b = static_cast<int>(w[4]);
    uint32_t bits = static_cast<uint32_t>(w[5]);
    std::memcpy(&i.value, &bits, 4);
    int limit = p.n_inputs + static_cast<int>(k);
    if (i.op != FusedInstr::kConst && (i.a < 0 || i.a >= limit || i.b >= limit))
      throw Error("fused kernel: instruction " + std::to_string(k) + " reads an operand defined later");
    p.instrs.push_back(i);
  }
  if (p.instrs.empty()) throw Error("fused kernel: empty program");
  return p;
}

}  // namespace luminal
