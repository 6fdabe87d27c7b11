#include "backends/cpu/fused_reduce.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "backends/cpu/row_kernels.h"
#include "backends/cpu/simd8.h"
#include "backends/cpu/thread_pool.h"
#include "graph/fused_program.h"

namespace luminal::cpu {

namespace {

constexpr int64_t kBlock = 256;

bool supported(const FusedProgram& p) {
  for (const FusedInstr& i : p.instrs) {
    if (i.dtype != DType::F32) return false;
    if (i.op == FusedInstr::kConst) continue;
    if (i.in_dtype != DType::F32) return false;
    switch (static_cast<OpKind>(i.op)) {
      case OpKind::Add: case OpKind::Mul: case OpKind::Exp2: case OpKind::Log2: case OpKind::Sin:
      case OpKind::Sqrt: case OpKind::Recip:
        break;
      default:
        return false;
    }
  }
  return true;
}

// Registers of kBlock floats: the program's inputs (filled by the caller), then one per
// instruction. Each op is one pass over the block, with the reference's f32 semantics.
struct Regs {
  const FusedProgram& p;
  std::vector<float> mem;
  explicit Regs(const FusedProgram& prog) : p(prog), mem(static_cast<size_t>(p.n_inputs + p.instrs.size()) * kBlock) {}
  float* operator[](int i) { return mem.data() + static_cast<size_t>(i) * kBlock; }
  const float* result() { return (*this)[p.n_inputs + static_cast<int>(p.instrs.size()) - 1]; }
};

LM_SIMD_CLONES void binary(bool add, const float* a, const float* b, float* r, int64_t n) {
  using namespace simd8;
  int64_t j = 0;
  if (add) {
    for (; j + 8 <= n; j += 8) store(r + j, load(a + j) + load(b + j));
    for (; j < n; ++j) r[j] = a[j] + b[j];
  } else {
    for (; j + 8 <= n; j += 8) store(r + j, load(a + j) * load(b + j));
    for (; j < n; ++j) r[j] = a[j] * b[j];
  }
}

void run(Regs& regs, int64_t n) {
  const FusedProgram& p = regs.p;
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const FusedInstr& ins = p.instrs[k];
    float* r = regs[p.n_inputs + static_cast<int>(k)];
    if (ins.op == FusedInstr::kConst) {
      std::fill(r, r + n, ins.value);
      continue;
    }
    const float* a = regs[ins.a];
    switch (static_cast<OpKind>(ins.op)) {
      case OpKind::Add: binary(true, a, regs[ins.b], r, n); break;
      case OpKind::Mul: binary(false, a, regs[ins.b], r, n); break;
      case OpKind::Exp2: for (int64_t i = 0; i < n; ++i) r[i] = std::exp2(a[i]); break;
      case OpKind::Log2: for (int64_t i = 0; i < n; ++i) r[i] = std::log2(a[i]); break;
      case OpKind::Sin: for (int64_t i = 0; i < n; ++i) r[i] = std::sin(a[i]); break;
      case OpKind::Sqrt: for (int64_t i = 0; i < n; ++i) r[i] = std::sqrt(a[i]); break;
      case OpKind::Recip: for (int64_t i = 0; i < n; ++i) r[i] = 1.0f / a[i]; break;
      default: break;
    }
  }
}

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
  if (out.dtype() != DType::F32 || !supported(p) || (epi && (!supported(*epi) || epi->n_inputs < 1))) return false;
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
    Regs pro(p);
    std::optional<Regs> ep;
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
          run(pro, m);
          accumulate(acc, pro.result(), m);
        }
        reduced[r - r0] = acc.result();
      }
      if (!ep) continue;
      for (size_t i = 0; i < n_epi; ++i)
        load_floats(in[n_pro + i], true, r0, r1 - r0, (*ep)[static_cast<int>(i) + 1]);
      run(*ep, r1 - r0);
      std::copy(ep->result(), ep->result() + (r1 - r0), o + r0);
    }
  });
  return true;
}

}  // namespace luminal::cpu
