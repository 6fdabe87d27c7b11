#include "backends/cpu/cpu_kernels.h"

#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_gemm.h"
#include "runtime/reader.h"

namespace luminal::cpu {

namespace {

// Matmul [.., m, k] x [.., k, n] where B[.., p, j] = W[.., j*ldw + p]: C = A · Wᵀ per batch.
bool matmul(ThreadPool& pool, const Node& n, const std::vector<const Buffer*>& in, const DimMap& dims, Buffer& out) {
  if (out.dtype() != DType::F32 || in[0]->dtype() != DType::F32) return false;
  DType wt = in[1]->dtype();
  if (wt != DType::F32 && wt != DType::BF16) return false;
  Reader ra(*in[0], n.inputs[0].view, dims), rb(*in[1], n.inputs[1].view, dims);
  if (!ra.strided() || !rb.strided()) return false;
  const auto& sa = *ra.strided();
  const auto& sb = *rb.strided();
  size_t r = sa.strides.size();
  if (r < 2 || sb.strides.size() != r) return false;
  if (sa.strides[r - 1] != 1 || sb.strides[r - 2] != 1) return false;  // rows of A and of W contiguous
  std::vector<int64_t> as;
  for (const Expr& e : n.inputs[0].view.shape()) as.push_back(e.eval(dims));
  int64_t m = as[r - 2], k = as[r - 1], nn = n.inputs[1].view.shape()[r - 1].eval(dims);
  int64_t batch = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, m * nn);
  size_t es = wt == DType::BF16 ? 2 : 4;
  const float* A = reinterpret_cast<const float*>(in[0]->bytes());
  float* C = reinterpret_cast<float*>(out.bytes());
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t rem = bi, base_a = sa.offset, base_b = sb.offset;
    for (size_t d = r - 2; d-- > 0;) {
      int64_t c = rem % as[d];
      rem /= as[d];
      base_a += c * sa.strides[d];
      base_b += c * sb.strides[d];
    }
    WeightGemm g{A + base_a, sa.strides[r - 2], in[1]->bytes() + static_cast<size_t>(base_b) * es, sb.strides[r - 1], wt,
                 C + bi * m * nn, nn, m, nn, k};
    weight_gemm(g, &pool);
  }
  return true;
}

}  // namespace

Interpreter::KernelHook cpu_kernels(ThreadPool& pool) {
  return [&pool](const Node& n, const std::vector<const Buffer*>& in, const DimMap& dims, Buffer& out) {
    if (n.kernel == "Matmul") return matmul(pool, n, in, dims, out);
    return false;
  };
}

}  // namespace luminal::cpu
