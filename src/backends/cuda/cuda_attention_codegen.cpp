// Attention over a strided KV cache, split over slices of keys (see strided_attention below).
#include <sstream>

#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cpu/fused_codegen.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

namespace {

// Whether a layer reads its logical shape in row-major order with no offset or mask (a plain
// reshape of the layer below).
bool row_major(const ViewLayer& l) {
  if (!l.offset.is_const(0) || l.masked()) return false;
  Expr stride = 1;
  for (size_t d = l.shape.size(); d-- > 0;) {
    if (!l.shape[d].is_const(1) && !provably_equal(l.strides[d], stride)) return false;
    stride = stride * l.shape[d];
  }
  return true;
}

// The mask's stride along the keys when its element for (row, key) sits at
// index(row * keys) + key * stride: its bottom layer ends with the keys' dim, unmasked, and any
// layer above it is a plain reshape. Then the mask's index expression is evaluated once per
// row instead of once per key (a causal mask behind a broadcast over the heads has two layers,
// and its general expression divides by three dims).
std::optional<Expr> mask_key_stride(const View& mask, const Expr& keys) {
  const std::vector<ViewLayer>& layers = mask.layers();
  if (layers.empty() || layers.size() > 2 || !mask.flat_index().valid.is_const(1)) return std::nullopt;
  const ViewLayer& bottom = layers.front();
  if (bottom.shape.empty() || bottom.masked() || !provably_equal(bottom.shape.back(), keys)) return std::nullopt;
  if (layers.size() == 2 && !row_major(layers.back())) return std::nullopt;
  return bottom.strides.back();
}

}  // namespace

// Attention whose keys and values are one strided layer each (the KV cache sliced to the cached
// length; a mask may limit the key and batch dims, never the head dim). One block per query row
// and slice of keys (flash-decoding): q's row goes to shared memory once (through its loader:
// grouped-query views merge dims that one stride cannot express); each warp takes a key, its
// lanes over the head dim, reading the key's row in consecutive runs; the slice's softmax stays
// in shared memory; the warps then split the slice's keys for the values, four output columns
// per lane. Addresses come from the strides, computed once per key, not through the general
// index expressions. The combine launch merges the slices.
std::optional<AttentionKernels> strided_attention(const Node& n, const std::vector<DType>& dt, DType out_dtype) {
  const ViewLayer* k = plain_layer(n.inputs[1].view);
  const ViewLayer* v = plain_layer(n.inputs[2].view);
  const size_t r = n.inputs[0].view.rank();
  if (!k || !v || r < 2 || k->shape.size() != r || v->shape.size() != r) return std::nullopt;
  if (k->dim_masked(r - 2) || v->dim_masked(r - 1)) return std::nullopt;
  if (is_int(dt[0]) || is_int(dt[1]) || is_int(dt[2])) return std::nullopt;
  const DType t = dt[0];
  auto valid = [&](const ViewLayer& l, size_t skip, const std::string& key_coord, size_t key_dim) {
    std::string cond = "true";
    for (size_t d = 0; d < r; ++d) {
      if (d == skip || !l.dim_masked(d)) continue;
      std::string x = d == key_dim ? key_coord : "lm_bc[" + std::to_string(d) + "]";
      cond += " && " + x + " >= " + c(l.mask_lo[d]) + " && " + x + " < " + c(l.mask_hi[d]);
    }
    return cond;
  };
  auto base = [&](const ViewLayer& l, const std::string& key_coord, size_t key_dim, size_t skip) {
    std::string b = c(l.offset);
    for (size_t d = 0; d < r; ++d) {
      if (d == skip) continue;
      std::string x = d == key_dim ? key_coord : "lm_bc[" + std::to_string(d) + "]";
      b += " + " + x + " * " + c(l.strides[d]);
    }
    return b;
  };
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  // The mask at this row's key: through one index per row where its layout allows.
  std::string mask_fn;
  if (auto stride = mask_key_stride(n.inputs[3].view, k->shape[r - 1])) {
    const IndexExprs mix = n.inputs[3].view.flat_index();
    const std::string ms = storage_type(dt[3]);
    mask_fn = "  const long long lm_mb = [&](long long lm_q) -> long long { return " + c(mix.index) + "; }(lm_row * lm_keys);\n"
              "  const long long lm_ms = " + c(*stride) + ";\n"
              "  auto lm_mask = [&](long long lm_key) { return " + load(dt[3], "((const " + ms + "*)lm_in3)[lm_mb + lm_key * lm_ms]") + "; };\n";
  } else {
    mask_fn = "  auto lm_mask = [&](long long lm_key) { return lm_ld3(lm_row * lm_keys + lm_key); };\n";
  }
  std::ostringstream s;
  s << "  extern __shared__ float lm_sh[];\n"
    << "  const long long lm_seq = " << c(n.inputs[0].view.shape()[r - 2]) << ", lm_dk = " << c(n.inputs[0].view.shape()[r - 1])
    << ", lm_keys = " << c(k->shape[r - 1]) << ", lm_dv = " << c(v->shape[r - 1]) << ";\n"
    << "  float* lm_q = lm_sh;\n  float* lm_sc = lm_sh + lm_dk;\n"
    // This block's query row and its slice of the keys, [lm_k0, lm_k1).
    << "  const long long lm_splits = (lm_keys + " << kAttentionChunk << " - 1) / " << kAttentionChunk << ";\n"
    << "  const long long lm_row = blockIdx.x / lm_splits, lm_split = blockIdx.x - lm_row * lm_splits, lm_b = lm_row / lm_seq;\n"
    << "  const long long lm_k0 = lm_split * " << kAttentionChunk << ", lm_k1 = lm_k0 + " << kAttentionChunk
    << " < lm_keys ? lm_k0 + " << kAttentionChunk << " : lm_keys, lm_nk = lm_k1 - lm_k0;\n"
    << "  long long lm_bc[" << r << "] = {};\n"
    << "  { long long lm_rem = lm_b;\n"
    << "    for (int lm_d = " << static_cast<long>(r) - 3 << "; lm_d >= 0; --lm_d) { const long long lm_sz = lm_shape_of(lm_d); lm_bc[lm_d] = lm_rem % lm_sz; lm_rem /= lm_sz; } }\n"
    << "  for (long long lm_p = threadIdx.x; lm_p < lm_dk; lm_p += blockDim.x) lm_q[lm_p] = (float)lm_ld0(lm_row * lm_dk + lm_p);\n"
    << "  __syncthreads();\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_warps = blockDim.x >> 5;\n"
    << "  const " << ks << "* lm_K = (const " << ks << "*)lm_in1;\n  const " << vs << "* lm_V = (const " << vs << "*)lm_in2;\n"
    << "  const long long lm_ksp = " << c(k->strides[r - 2]) << ", lm_vsj = " << c(v->strides[r - 1]) << ";\n"
    << mask_fn
    // A masked key's score is -inf whatever its row holds: its row is not read (half the
    // keys of a causal prefill).
    << "  for (long long lm_key = lm_k0 + lm_warp; lm_key < lm_k1; lm_key += lm_warps) {\n"
    << "    if (lm_mask(lm_key) == 0) {\n"
    << "      if (lm_lane == 0) lm_sc[lm_key - lm_k0] = __int_as_float((int)0xff800000u);\n      continue;\n    }\n"
    << "    const bool lm_ok = " << valid(*k, r - 2, "lm_key", r - 1) << ";\n"
    << "    const long long lm_kb = " << base(*k, "lm_key", r - 1, r - 2) << ";\n"
    << "    float lm_acc = 0.0f;\n"
    << "    for (long long lm_p = lm_lane; lm_p < lm_dk; lm_p += 32) {\n"
    << "      const float lm_kv = lm_ok ? " << load(dt[1], "lm_K[lm_kb + lm_p * lm_ksp]") << " : " << value_lit(n.inputs[1].view.pad_value(), dt[1]) << ";\n"
    << "      lm_acc = __fmaf_rn(" << convert("lm_q[lm_p]", DType::F32, t) << ", lm_kv, lm_acc);\n    }\n"
    << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
    << "    if (lm_lane != 0) continue;\n"
    << "    const float lm_scaled = " << convert("lm_acc", DType::F32, t) << " * " << float_lit(n.constant) << ";\n"
    << "    lm_sc[lm_key - lm_k0] = lm_scaled;\n  }\n"
    << "  __syncthreads();\n"
    // The slice's own softmax statistics: its max, and exponentials relative to it (a slice
    // whose keys are all masked has max -inf and contributes nothing).
    << "  float lm_mx = __int_as_float((int)0xff800000u);\n"
    << "  for (long long lm_i = threadIdx.x; lm_i < lm_nk; lm_i += blockDim.x) lm_mx = lm_fmax_nan(lm_mx, lm_sc[lm_i]);\n"
    << "  lm_mx = lm_block_reduce(lm_mx, lm_fmax_nan);\n  const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
    << "  const bool lm_none = lm_mx == __int_as_float((int)0xff800000u);\n"
    << "  float lm_sum = 0.0f;\n"
    << "  for (long long lm_i = threadIdx.x; lm_i < lm_nk; lm_i += blockDim.x) {\n"
    << "    const float lm_e = lm_none ? 0.0f : exp2f((lm_sc[lm_i] + lm_mx * -1.0f) * lm_log2e);\n    lm_sc[lm_i] = lm_e;\n    lm_sum += lm_e;\n  }\n"
    << "  lm_sum = lm_block_reduce(lm_sum, [](float a, float b) { return a + b; });\n"
    << "  __syncthreads();\n"
    // Values: each warp takes every warps-th key and its lanes four consecutive output columns
    // each (a warp reads a value row's 128 columns in one run); masked keys (probability 0)
    // are skipped; the warps' partial rows meet in shared memory.
    << "  float* lm_part = lm_sc + " << kAttentionChunk << ";\n"
    << "  for (long long lm_j0 = 0; lm_j0 < lm_dv; lm_j0 += 128) {\n"
    << "    float lm_a[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
    << "    for (long long lm_key = lm_k0 + lm_warp; lm_key < lm_k1; lm_key += lm_warps) {\n"
    << "      const float lm_pr = lm_sc[lm_key - lm_k0];\n"
    << "      if (lm_pr == 0.0f) continue;\n"
    << "      const bool lm_ok = " << valid(*v, r - 1, "lm_key", r - 2) << ";\n"
    << "      const long long lm_vb = " << base(*v, "lm_key", r - 2, r - 1) << ";\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const long long lm_j = lm_j0 + lm_lane * 4 + lm_e;\n"
    << "        if (lm_j >= lm_dv) break;\n"
    << "        const float lm_vv = lm_ok ? " << load(dt[2], "lm_V[lm_vb + lm_j * lm_vsj]") << " : "
    << value_lit(n.inputs[2].view.pad_value(), dt[2]) << ";\n"
    << "        lm_a[lm_e] = __fmaf_rn(lm_pr, lm_vv, lm_a[lm_e]);\n      }\n    }\n"
    << "    for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "      const long long lm_j = lm_j0 + lm_lane * 4 + lm_e;\n"
    << "      if (lm_j < lm_dv) lm_part[lm_warp * lm_dv + lm_j] = lm_a[lm_e];\n    }\n  }\n"
    << "  __syncthreads();\n"
    // The slice's partial result for the combine step: [max, sum, unnormalised row].
    << "  float* lm_res = (float*)lm_out + blockIdx.x * (lm_dv + 2);\n"
    << "  if (threadIdx.x == 0) { lm_res[0] = lm_mx; lm_res[1] = lm_sum; }\n"
    << "  for (long long lm_j = threadIdx.x; lm_j < lm_dv; lm_j += blockDim.x) {\n"
    << "    float lm_acc = 0.0f;\n    for (int lm_w = 0; lm_w < lm_warps; ++lm_w) lm_acc += lm_part[lm_w * lm_dv + lm_j];\n"
    << "    lm_res[2 + lm_j] = lm_acc;\n  }\n";
  // Combine: each output element weighs the slices' partial rows by exp(slice max - max).
  std::ostringstream cb;
  cb << "  const long long lm_keys = " << c(k->shape[r - 1]) << ", lm_dv = " << c(v->shape[r - 1]) << ";\n"
     << "  const long long lm_splits = (lm_keys + " << kAttentionChunk << " - 1) / " << kAttentionChunk << ";\n"
     << "  const long long lm_count = " << c(product_of(n.inputs[0].view.shape(), 0, r - 1)) << " * lm_dv;\n"
     << "  const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
     << "  for (long long lm_z = blockIdx.x * (long long)blockDim.x + threadIdx.x; lm_z < lm_count;"
        " lm_z += (long long)gridDim.x * blockDim.x) {\n"
     << "    const long long lm_row = lm_z / lm_dv, lm_j = lm_z - lm_row * lm_dv;\n"
     << "    const float* lm_p = (const float*)lm_in0 + lm_row * lm_splits * (lm_dv + 2);\n"
     << "    float lm_m = __int_as_float((int)0xff800000u);\n"
     << "    for (long long lm_s = 0; lm_s < lm_splits; ++lm_s) lm_m = lm_fmax_nan(lm_m, lm_p[lm_s * (lm_dv + 2)]);\n"
     << "    float lm_l = 0.0f, lm_o = 0.0f;\n"
     << "    for (long long lm_s = 0; lm_s < lm_splits; ++lm_s) {\n"
     << "      const float* lm_q = lm_p + lm_s * (lm_dv + 2);\n"
     << "      const float lm_w = lm_q[0] == __int_as_float((int)0xff800000u) ? 0.0f : exp2f((lm_q[0] + lm_m * -1.0f) * lm_log2e);\n"
     << "      lm_l = __fmaf_rn(lm_q[1], lm_w, lm_l);\n      lm_o = __fmaf_rn(lm_q[2 + lm_j], lm_w, lm_o);\n    }\n"
     << "    ((" << storage_type(out_dtype) << "*)lm_out)[lm_z] = " << store(out_dtype, convert("lm_o * (1.0f / lm_l)", DType::F32, out_dtype)) << ";\n  }\n";
  // The batch dims' sizes, for splitting the batch index into coordinates.
  std::string shape_fn = "  auto lm_shape_of = [&](int lm_d) -> long long {\n    switch (lm_d) {\n";
  for (size_t d = 0; d + 2 < r; ++d) shape_fn += "      case " + std::to_string(d) + ": return " + c(k->shape[d]) + ";\n";
  shape_fn += "      default: return 1;\n    }\n  };\n";
  return AttentionKernels{shape_fn + s.str(), cb.str()};
}

}  // namespace luminal::cuda::gen
