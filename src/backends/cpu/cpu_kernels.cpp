#include "backends/cpu/cpu_kernels.h"

#include <algorithm>
#include <optional>

#include "backends/cpu/attention.h"
#include "backends/cpu/fused_elementwise.h"
#include "backends/cpu/fused_jit.h"
#include "backends/cpu/fused_reduce.h"
#include "backends/cpu/gather.h"
#include "backends/cpu/rotary_where.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_gemm.h"
#include "backends/cpu/weight_panels.h"
#include "runtime/strided_operand.h"

namespace luminal::cpu {

namespace {

// Matmul [.., m, k] x [.., k, n] where B[.., p, j] = W[.., j*ldw + p]: C = A · Wᵀ per batch.
// With `scale` (ScaledMatmul: one value per row of A, read as A), row i of C is scale_i times
// row i of A · Wᵀ; a batch whose scales are all zero is zero without reading its W (an MoE
// expert no token chose), and only the rows with a nonzero scale are multiplied.
bool matmul(ThreadPool& pool, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
            const Reader* scale, const CpuKernelOptions& options) {
  const bool bf16_activations = options.bf16_activations;
  const Reader &ra = in[0], &rb = in[1];
  if (out.dtype() != DType::F32 || ra.dtype() != DType::F32) return false;
  const std::vector<int64_t>& as = shapes[0];
  const size_t r = as.size();
  if (r < 2 || shapes[1].size() != r) return false;
  DType wt = rb.dtype();
  if (wt != DType::F32 && wt != DType::BF16) return false;
  // B in place: one strided layer, transposed (a weight, the keys) or row-major f32 (the values).
  const uint8_t* bdata = rb.buffer().bytes();
  int64_t boff = 0;
  std::vector<int64_t> bstrides;
  if (rb.strided()) {
    boff = rb.strided()->offset;
    bstrides = rb.strided()->strides;
  }
  bool transposed = !bstrides.empty() && bstrides[r - 2] == 1;
  bool rows_of_b = !bstrides.empty() && bstrides[r - 1] == 1 && wt == DType::F32;
  // Otherwise (a reshape of a broadcast: grouped-query attention's repeated keys and values as
  // torch.compile traces them) a contiguous f32 copy of a small B, rather than the reference's
  // element-by-element loop; a large one (a weight) stays with the reference.
  std::optional<F32Operand> copied;
  if (!transposed && !rows_of_b) {
    int64_t numel = 1;
    for (int64_t d : shapes[1]) numel *= d;
    if (numel > (int64_t(1) << 22) || !std::equal(as.begin(), as.end() - 2, shapes[1].begin())) return false;
    copied.emplace(rb, shapes[1]);
    bdata = reinterpret_cast<const uint8_t*>(copied->data);
    boff = copied->offset;
    bstrides = copied->strides;
    wt = DType::F32;
    rows_of_b = true;
  }
  // A (activations, small) is copied to contiguous rows when its view is not already so.
  F32Operand sa(ra, as, /*unit_inner=*/true);
  const float* A = sa.data;
  int64_t m = as[r - 2], k = as[r - 1], nn = shapes[1][r - 1];
  int64_t batch = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, m * nn);
  size_t es = wt == DType::BF16 ? 2 : 4;
  float* C = reinterpret_cast<float*>(out.bytes());
  // A weight packed at load, read whole (its rows contiguous, from its first element): its panels.
  const WeightPanels* panels = options.packed_weights && transposed && wt == DType::BF16 ? options.packed_weights->find(bdata) : nullptr;
  if (panels && (panels->n() != nn || panels->k() != k || bstrides[r - 1] != k)) panels = nullptr;
  auto one = [&](int64_t bi, ThreadPool* p) {
    std::vector<float> row_scale;
    if (scale) {
      bool any = false;
      for (int64_t i = 0; i < m; ++i) {
        row_scale.push_back(static_cast<float>((*scale)((bi * m + i) * k)));
        any = any || row_scale.back() != 0.0f;
      }
      if (!any) {
        std::fill(C + bi * m * nn, C + (bi + 1) * m * nn, 0.0f);
        return;
      }
    }
    int64_t base_a = sa.offset, base_b = boff;
    add_batch_offsets(bi, as, sa.strides, bstrides, base_a, base_b);
    const void* w = bdata + static_cast<size_t>(base_b) * es;
    const int64_t ldw = transposed ? bstrides[r - 1] : bstrides[r - 2];
    // A prefill's expert: only the rows of the tokens that chose it, gathered, then put back.
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < static_cast<int64_t>(row_scale.size()); ++i)
      if (row_scale[i] != 0.0f) rows.push_back(i);
    if (transposed && !row_scale.empty() && rows.size() < static_cast<size_t>(m)) {
      const int64_t mr = static_cast<int64_t>(rows.size());
      std::vector<float> a(static_cast<size_t>(mr * k)), c(static_cast<size_t>(mr * nn));
      for (int64_t j = 0; j < mr; ++j) std::copy_n(A + base_a + rows[j] * sa.strides[r - 2], k, a.data() + j * k);
      weight_gemm(WeightGemm{a.data(), k, w, ldw, wt, c.data(), nn, mr, nn, k, bf16_activations}, p);
      std::fill(C + bi * m * nn, C + (bi + 1) * m * nn, 0.0f);
      for (int64_t j = 0; j < mr; ++j)
        for (int64_t q = 0; q < nn; ++q) C[(bi * m + rows[j]) * nn + q] = c[j * nn + q] * row_scale[rows[j]];
      return;
    }
    WeightGemm g{A + base_a, sa.strides[r - 2], w, ldw, wt, C + bi * m * nn, nn, m, nn, k, bf16_activations};
    if (panels && base_b == 0) g.panels = panels->words();
    if (transposed) weight_gemm(g, p);
    else gemm_nn(g, p);
    for (int64_t i = 0; i < static_cast<int64_t>(row_scale.size()); ++i)
      for (float* c = C + (bi * m + i) * nn, *end = c + nn; c < end; ++c) *c = row_scale[i] == 0.0f ? 0.0f : *c * row_scale[i];
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

Interpreter::KernelHook cpu_kernels(ThreadPool& pool, const FusedJit* jit, CpuKernelOptions options) {
  const bool bf16 = options.bf16_activations;
  return [&pool, jit, options, bf16](const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out) {
    if (n.op == OpKind::Gather) return gather(in, out, options.packed_weights);
    if (n.op != OpKind::Kernel) return jit && jit->run(n, in, shapes, out, pool);  // elementwise primitives
    if (n.kernel == "Matmul") return matmul(pool, in, shapes, out, nullptr, options);
    if (n.kernel == "ScaledMatmul") return matmul(pool, in, shapes, out, &in[2], options);
    if (n.kernel == "Fused") return (jit && jit->run(n, in, shapes, out, pool)) || fused_elementwise(n, in, shapes, out, pool);
    if (n.kernel == "RMSNorm") return rms_norm(n, in, shapes, out, pool);
    if (n.kernel == "RMSNormMul") return rms_norm_mul(n, in, shapes, out, pool);
    if (n.kernel == "LayerNorm") return layer_norm(n, in, shapes, out, pool);
    if (n.kernel == "Softmax") return softmax(n, in, shapes, out, pool);
    if (n.kernel == "Rotary") return rotary(n, in, shapes, out, pool);
    if (n.kernel == "RMSNormRotary") return rms_norm_rotary(n, in, shapes, out, pool);
    if (n.kernel == "Where") return where(n, in, shapes, out, pool);
    if (n.kernel == "Attention") return attention(n, in, shapes, out, pool, bf16);
    if (n.kernel == "FusedSum" || n.kernel == "FusedMax")
      return (jit && jit->run(n, in, shapes, out, pool)) || fused_reduce(n, in, shapes, out, pool, n.kernel == "FusedSum");
    return false;
  };
}

}  // namespace luminal::cpu
