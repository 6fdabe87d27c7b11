#include "backends/cpu/cpu_kernels.h"

#include "backends/cpu/attention.h"
#include "backends/cpu/fused_elementwise.h"
#include "backends/cpu/fused_jit.h"
#include "backends/cpu/fused_reduce.h"
#include "backends/cpu/rotary_where.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_gemm.h"
#include "runtime/strided_operand.h"

namespace luminal::cpu {

namespace {

// Matmul [.., m, k] x [.., k, n] where B[.., p, j] = W[.., j*ldw + p]: C = A · Wᵀ per batch.
bool matmul(ThreadPool& pool, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out) {
  const Reader &ra = in[0], &rb = in[1];
  if (out.dtype() != DType::F32 || ra.dtype() != DType::F32) return false;
  DType wt = rb.dtype();
  if (wt != DType::F32 && wt != DType::BF16) return false;
  if (!rb.strided()) return false;
  const auto& sb = *rb.strided();
  const std::vector<int64_t>& as = shapes[0];
  size_t r = as.size();
  if (r < 2 || sb.strides.size() != r) return false;
  // A (activations, small) is copied to contiguous rows when its view is not already so.
  F32Operand sa(ra, as, /*unit_inner=*/true);
  const float* A = sa.data;
  bool transposed = sb.strides[r - 2] == 1;  // B[p, j] = W[j, p]: a weight or the keys
  bool rows_of_b = sb.strides[r - 1] == 1 && wt == DType::F32;  // B[p, j] row-major: the values
  if (!transposed && !rows_of_b) return false;
  int64_t m = as[r - 2], k = as[r - 1], nn = shapes[1][r - 1];
  int64_t batch = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, m * nn);
  size_t es = wt == DType::BF16 ? 2 : 4;
  float* C = reinterpret_cast<float*>(out.bytes());
  auto one = [&](int64_t bi, ThreadPool* p) {
    int64_t base_a = sa.offset, base_b = sb.offset;
    add_batch_offsets(bi, as, sa.strides, sb.strides, base_a, base_b);
    WeightGemm g{A + base_a, sa.strides[r - 2], rb.buffer().bytes() + static_cast<size_t>(base_b) * es,
                 transposed ? sb.strides[r - 1] : sb.strides[r - 2], wt, C + bi * m * nn, nn, m, nn, k};
    if (transposed) weight_gemm(g, p);
    else gemm_nn(g, p);
  };
  // Many small products (attention's heads in decode): one thread per batch of heads, not
  // every thread on every head, which would synchronise the pool once per head.
  if (batch >= pool.size() && m * nn * k < (int64_t(1) << 20)) {
    pool.parallel_for(batch, [&](int64_t b0, int64_t b1) {
      for (int64_t bi = b0; bi < b1; ++bi) one(bi, nullptr);
    });
  } else {
    for (int64_t bi = 0; bi < batch; ++bi) one(bi, &pool);
  }
  return true;
}

}  // namespace

Interpreter::KernelHook cpu_kernels(ThreadPool& pool, const FusedJit* jit) {
  return [&pool, jit](const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out) {
    if (n.op != OpKind::Kernel) return jit && jit->run(n, in, shapes, out, pool);  // elementwise primitives
    if (n.kernel == "Matmul") return matmul(pool, in, shapes, out);
    if (n.kernel == "Fused") return (jit && jit->run(n, in, shapes, out, pool)) || fused_elementwise(n, in, shapes, out, pool);
    if (n.kernel == "RMSNorm") return rms_norm(n, in, shapes, out, pool);
    if (n.kernel == "LayerNorm") return layer_norm(n, in, shapes, out, pool);
    if (n.kernel == "Softmax") return softmax(n, in, shapes, out, pool);
    if (n.kernel == "Rotary") return rotary(n, in, shapes, out, pool);
    if (n.kernel == "Where") return where(n, in, shapes, out, pool);
    if (n.kernel == "Attention") return attention(n, in, shapes, out, pool);
    if (n.kernel == "FusedSum" || n.kernel == "FusedMax")
      return (jit && jit->run(n, in, shapes, out, pool)) || fused_reduce(n, in, shapes, out, pool, n.kernel == "FusedSum");
    return false;
  };
}

}  // namespace luminal::cpu
