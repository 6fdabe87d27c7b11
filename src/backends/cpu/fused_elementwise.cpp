#include "backends/cpu/fused_elementwise.h"

#include <algorithm>

#include "backends/cpu/block_program.h"
#include "backends/cpu/thread_pool.h"
#include "runtime/flat_read.h"

namespace luminal::cpu {

namespace {

void run_block(const FusedProgram& p, const std::vector<Reader>& in, const std::vector<char>& flat, int64_t z0, int64_t n,
               float* out) {
  BlockRegs regs(p);
  for (int i = 0; i < p.n_inputs; ++i) load_floats(in[static_cast<size_t>(i)], flat[static_cast<size_t>(i)], z0, n, regs[i]);
  run_block_program(regs, n);
  std::copy(regs.result(), regs.result() + n, out);
}

}  // namespace

bool fused_elementwise(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes,
                       Buffer& out, ThreadPool& pool) {
  if (out.dtype() != DType::F32) return false;
  FusedProgram p = FusedProgram::decode(n.code);
  if (!block_program_supported(p) || static_cast<size_t>(p.n_inputs) != in.size()) return false;
  std::vector<char> flat;  // inputs read by runs of their strided layout
  for (const Reader& r : in) {
    if (!is_float(r.dtype())) return false;
    flat.push_back(flat_in_bounds(r));
  }
  int64_t total = static_cast<int64_t>(out.numel());
  float* o = reinterpret_cast<float*>(out.bytes());
  const int64_t kBlock = kProgramBlock;
  int64_t blocks = (total + kBlock - 1) / kBlock;
  pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t z0 = b * kBlock;
      run_block(p, in, flat, z0, std::min(kBlock, total - z0), o + z0);
    }
  }, 16);
  return true;
}

}  // namespace luminal::cpu
