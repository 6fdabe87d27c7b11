#include "backends/cpu/fused_reduce.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "backends/cpu/block_program.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/simd8.h"
#include "backends/cpu/thread_pool.h"
#include "graph/fused_program.h"

namespace luminal::cpu {

namespace {

constexpr int64_t kBlock = kProgramBlock;

// A running sum (8 lanes and a scalar tail) or max (NaN once any value is NaN).
struct Acc {
  bool is_sum;
  simd8::f8 lanes = {};
  float tail = 0, max = -__builtin_inff();
  LM_SIMD_INLINE void add(const float* v, int64_t n) {
    if (!is_sum) {
      float m = simd8::max_or_nan(v, n);
      if (std::isnan(m) || m > max) max = std::isnan(max) ? max : m;
      return;
    }
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) lanes += simd8::load(v + j);
    for (; j < n; ++j) tail += v[j];
  }
  float result() const { return is_sum ? simd8::hsum(lanes) + tail : max; }
};

LM_SIMD_CLONES void accumulate(Acc& acc, const float* v, int64_t n) { acc.add(v, n); }

}  // namespace

bool fused_reduce(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                  ThreadPool& pool, bool is_sum) {
  size_t pos = 0;
  FusedProgram p = FusedProgram::decode(n.code, pos);
  std::optional<FusedProgram> epi;
  if (pos < n.code.size()) epi = FusedProgram::decode(n.code, pos);
  if (out.dtype() != DType::F32 || !block_program_supported(p) || (epi && (!block_program_supported(*epi) || epi->n_inputs < 1))) return false;
  const size_t n_pro = static_cast<size_t>(p.n_inputs), n_epi = epi ? static_cast<size_t>(epi->n_inputs - 1) : 0;
  if (in.size() != n_pro + n_epi || n_pro == 0 || n.axis + 1 != shapes[0].size()) return false;
  // Prologue inputs as rows along the reduced (last) axis, any stride on it.
  std::vector<F32Rows> rows;
  for (size_t i = 0; i < n_pro; ++i) {
    std::optional<F32Rows> r = f32_rows(in[i], shapes[i]);
    if (!r || shapes[i] != shapes[0]) return false;
    rows.push_back(*r);
  }
  // Epilogue inputs, read by output index.
  const int64_t n_out = rows[0].rows, len = rows[0].len;
  if (static_cast<int64_t>(out.numel()) != n_out) return false;
  for (size_t i = n_pro; i < in.size(); ++i) {
    int64_t count = 1;
    for (int64_t d : shapes[i]) count *= d;
    if (in[i].dtype() != DType::F32 || count != n_out || !flat_in_bounds(in[i])) return false;
  }
  float* o = reinterpret_cast<float*>(out.bytes());
  pool.parallel_for((n_out + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1) {
    BlockRegs pro(p);
    std::optional<BlockRegs> ep;
    if (epi) ep.emplace(*epi);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kBlock, r1 = std::min(n_out, r0 + kBlock);
      float* reduced = ep ? (*ep)[0] : o + r0;
      for (int64_t r = r0; r < r1; ++r) {
        Acc acc{is_sum};
        for (int64_t k0 = 0; k0 < len; k0 += kBlock) {
          const int64_t m = std::min(kBlock, len - k0);
          for (size_t i = 0; i < n_pro; ++i) {
            const float* src = rows[i].row(r) + k0 * rows[i].step;
            float* dst = pro[static_cast<int>(i)];
            for (int64_t j = 0; j < m; ++j) dst[j] = src[j * rows[i].step];
          }
          run_block_program(pro, m);
          accumulate(acc, pro.result(), m);
        }
        reduced[r - r0] = acc.result();
      }
      if (!ep) continue;
      for (size_t i = 0; i < n_epi; ++i)
        load_floats(in[n_pro + i], true, r0, r1 - r0, (*ep)[static_cast<int>(i) + 1]);
      run_block_program(*ep, r1 - r0);
      std::copy(ep->result(), ep->result() + (r1 - r0), o + r0);
    }
  });
  return true;
}

}  // namespace luminal::cpu
