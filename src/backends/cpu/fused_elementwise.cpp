#include "backends/cpu/fused_elementwise.h"

#include <cmath>
#include <cstring>

#include "backends/cpu/thread_pool.h"
#include "graph/fused_program.h"

namespace luminal::cpu {

namespace {

constexpr int64_t kBlock = 256;

bool supported(const FusedProgram& p) {
  for (const FusedInstr& in : p.instrs) {
    if (in.dtype != DType::F32) return false;
    if (in.op == FusedInstr::kConst) continue;
    if (in.in_dtype != DType::F32) return false;
    switch (static_cast<OpKind>(in.op)) {
      case OpKind::Add: case OpKind::Mul: case OpKind::Exp2: case OpKind::Log2: case OpKind::Sin:
      case OpKind::Sqrt: case OpKind::Recip:
        break;
      default:
        return false;
    }
  }
  return true;
}

// Loads elements [z0, z0+n) of one input as floats.
void load(const Reader& r, const std::vector<int64_t>& shape, int64_t z0, int64_t n, float* dst) {
  const Buffer& b = r.buffer();
  if (!r.strided()) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(r(z0 + i));
    return;
  }
  const auto& s = *r.strided();
  size_t rank = shape.size();
  // Coordinates of z0, then an odometer.
  int64_t coord[16];
  if (rank > 16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(r(z0 + i));
    return;
  }
  int64_t rem = z0, idx = s.offset;
  for (size_t d = rank; d-- > 0;) {
    coord[d] = shape[d] ? rem % shape[d] : 0;
    rem = shape[d] ? rem / shape[d] : 0;
    idx += coord[d] * s.strides[d];
  }
  const bool f32 = b.dtype() == DType::F32;
  const float* fp = reinterpret_cast<const float*>(b.bytes());
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = f32 ? fp[idx] : static_cast<float>(b.get(static_cast<size_t>(idx)));
    for (size_t d = rank; d-- > 0;) {  // advance
      idx += s.strides[d];
      if (++coord[d] < shape[d]) break;
      idx -= coord[d] * s.strides[d];
      coord[d] = 0;
    }
  }
}

void run_block(const FusedProgram& p, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes,
               int64_t z0, int64_t n, float* out) {
  std::vector<float> regs(static_cast<size_t>((p.n_inputs + p.instrs.size()) * kBlock));
  auto reg = [&](int i) { return regs.data() + static_cast<size_t>(i) * kBlock; };
  for (int i = 0; i < p.n_inputs; ++i) load(in[static_cast<size_t>(i)], shapes[static_cast<size_t>(i)], z0, n, reg(i));
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const FusedInstr& ins = p.instrs[k];
    float* r = reg(p.n_inputs + static_cast<int>(k));
    if (ins.op == FusedInstr::kConst) {
      for (int64_t i = 0; i < n; ++i) r[i] = ins.value;
      continue;
    }
    const float* a = reg(ins.a);
    const float* b = ins.b >= 0 ? reg(ins.b) : nullptr;
    switch (static_cast<OpKind>(ins.op)) {
      case OpKind::Add: for (int64_t i = 0; i < n; ++i) r[i] = a[i] + b[i]; break;
      case OpKind::Mul: for (int64_t i = 0; i < n; ++i) r[i] = a[i] * b[i]; break;
      case OpKind::Exp2: for (int64_t i = 0; i < n; ++i) r[i] = std::exp2(a[i]); break;
      case OpKind::Log2: for (int64_t i = 0; i < n; ++i) r[i] = std::log2(a[i]); break;
      case OpKind::Sin: for (int64_t i = 0; i < n; ++i) r[i] = std::sin(a[i]); break;
      case OpKind::Sqrt: for (int64_t i = 0; i < n; ++i) r[i] = std::sqrt(a[i]); break;
      case OpKind::Recip: for (int64_t i = 0; i < n; ++i) r[i] = 1.0f / a[i]; break;
      default: break;
    }
  }
  std::memcpy(out, reg(p.n_inputs + static_cast<int>(p.instrs.size()) - 1), static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

bool fused_elementwise(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes,
                       Buffer& out, ThreadPool& pool) {
  if (out.dtype() != DType::F32) return false;
  FusedProgram p = FusedProgram::decode(n.code);
  if (!supported(p) || static_cast<size_t>(p.n_inputs) != in.size()) return false;
  for (const Reader& r : in)
    if (!is_float(r.dtype())) return false;
  int64_t total = static_cast<int64_t>(out.numel());
  float* o = reinterpret_cast<float*>(out.bytes());
  int64_t blocks = (total + kBlock - 1) / kBlock;
  pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t z0 = b * kBlock;
      run_block(p, in, shapes, z0, std::min(kBlock, total - z0), o + z0);
    }
  }, 16);
  return true;
}

}  // namespace luminal::cpu
