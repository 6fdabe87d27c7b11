// Decode attention in one launch (see split_attention_once below).
#include <sstream>
#include <string>

#include "backends/cuda/cuda_attention_parts.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cpu/fused_codegen.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

namespace {

// `dst`[lm_u][lm_e] = element lm_p = lane * 4 + lm_e of key lm_key's row of a strided layer
// (`head` its head-dim stride), as a float: 0 past the slice or the head dim, the view's pad
// value where its mask hides the key. One 16-byte load where the layer is f32 with unit head
// stride and the row is aligned.
std::string row_loads(const std::string& dst, const std::string& ptr, DType t, const ViewLayer& l, size_t r, size_t key_dim,
                      size_t head_dim, int64_t len, const std::string& pad) {
  const bool vec = t == DType::F32 && l.strides[head_dim].is_const(1);
  std::ostringstream s;
  s << "    {\n      const bool lm_ok = lm_here && " << valid_cond(l, r, head_dim, "lm_key", key_dim) << ";\n"
    << "      const long long lm_rb = lm_ok ? " << base_index(l, r, "lm_key", key_dim, head_dim) << " : 0;\n";
  if (vec)
    s << "      if (lm_ok && lm_lane * 4 + 4 <= " << len << " && ((lm_rb + lm_lane * 4) & 3) == 0) {\n"
      << "        const float4 lm_x = *(const float4*)((const float*)" << ptr << " + lm_rb + lm_lane * 4);\n"
      << "        " << dst << "[lm_u][0] = lm_x.x; " << dst << "[lm_u][1] = lm_x.y; " << dst << "[lm_u][2] = lm_x.z; " << dst
      << "[lm_u][3] = lm_x.w;\n      } else\n";
  s << "      #pragma unroll\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const int lm_p = lm_lane * 4 + lm_e;\n"
    << "        " << dst << "[lm_u][lm_e] = !lm_here || lm_p >= " << len << " ? 0.0f : lm_ok ? (float)"
    << load(t, ptr + "[lm_rb + lm_p * " + c(l.strides[head_dim]) + "]") << " : (float)" << pad << ";\n      }\n    }\n";
  return s.str();
}

// The block's row group and slice of keys (lm_row0, lm_live, lm_k0, lm_k1, lm_bc, ...), from
// the query rows and keys of attention `n` with keys `k`: the one-launch kernel's and its
// prefetch's, which must take the same slice. Needs lm_R and lm_CH, and lm_shape_of.
std::string slice_coords(const Node& n, const ViewLayer& k, size_t r) {
  return "  const long long lm_seq = " + c(n.inputs[0].view.shape()[r - 2]) + ", lm_keys = " + c(k.shape[r - 1]) + ";\n" +
         split_block_coords(r);
}

}  // namespace

// LUMINAL_CUDA_ATTENTION_RELEASE=0: the slices counted as before session 36, a fence in every
// thread (last_block_count; on the H200, 0.5% of a Llama-3-8B decode step and of an MoE's).
static bool count_by_release() {
  static const bool release = env_switch_on("LUMINAL_CUDA_ATTENTION_RELEASE");
  return release;
}

// A block per (group of kAttentionRows query rows of a batch entry, slice of kAttentionChunk
// keys), as strided_attention's partial launch, and the same scratch of [max, sum, unnormalised
// row] per (row, slice); then the last block of a row group to finish (a counter per group,
// reset by that block) merges the group's slices into the output. So a decode step's attention
// is one launch, not two.
//
// Each warp takes four consecutive keys of the slice; each lane holds four consecutive head-dim
// elements of their rows and of the group's q rows, all loaded at the start in registers (no q
// staging, no barrier before the scores). The 16 partial sums of a lane (4 keys x 4 rows) are
// summed across the warp together, halving what each lane holds at each step: 16 shuffles where
// one tree per sum takes 80, and lanes 2i and 2i + 1 end with sum i. The merge gives each
// thread four columns of a row and a share of the slices, its loads all in flight together.
// On the H200 (ncu, Llama-3-8B shape, 544 keys) the two launches took 10.4 + 4.5 us.
std::optional<std::string> split_attention_once(const Node& n, const std::vector<DType>& dt, DType out_dtype, const AttentionFoldCode* fold) {
  static_assert(kAttentionRows == 4 && kAttentionChunk == 32 && kBlockThreads == 256, "the lane layout below assumes these");
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const Expr dk_e = n.inputs[0].view.shape()[r - 1], dv_e = v->shape[r - 1];
  if (!dk_e.is_const() || !dv_e.is_const()) return std::nullopt;
  const int64_t dk = dk_e.value(), dv = dv_e.value();
  // dv a multiple of 4: the merge reads the scratch's rows 16 bytes at a time.
  if (dk < 1 || dk > 128 || dv < 4 || dv > 128 || dv % 4 != 0) return std::nullopt;
  // Folded, the new keys' and values' rows are the update's, of dk values each.
  if (fold && (dv != dk || dt[1] != DType::F32 || dt[2] != DType::F32 || !q_row_index(n.inputs[0].view, dk))) return std::nullopt;
  const Expr rows = product_of(n.inputs[0].view.shape(), 0, r - 1);
  const DType t = dt[0];
  const std::string ninf = "__int_as_float((int)0xff800000u)";
  const std::string kpad = value_lit(n.inputs[1].view.pad_value(), dt[1]), vpad = value_lit(n.inputs[2].view.pad_value(), dt[2]);
  std::ostringstream s;
  s << "  constexpr int lm_R = 4, lm_CH = 32;\n"
    << "  __shared__ float lm_sc[lm_R][lm_CH];                 // scores, then probabilities\n"
    << "  __shared__ float lm_part[8][lm_R][" << dv << "];      // each warp's partial rows\n"
    << "  __shared__ float lm_stat[lm_R][2];\n"
    << "  __shared__ int lm_last;\n"
    << "  const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
    // Merges (m2, l2, o2) into (m, l, o): both rescaled to the larger max; an empty side (max
    // -inf) weighs 0.
    << "  auto lm_merge = [&](float& lm_m, float& lm_l, float4& lm_o, float lm_m2, float lm_l2, float4 lm_o2) {\n"
    << "    const float lm_mn = lm_fmax_nan(lm_m, lm_m2);\n"
    << "    const float lm_p = lm_m == " << ninf << " ? 0.0f : exp2f((lm_m + lm_mn * -1.0f) * lm_log2e);\n"
    << "    const float lm_q = lm_m2 == " << ninf << " ? 0.0f : exp2f((lm_m2 + lm_mn * -1.0f) * lm_log2e);\n"
    << "    lm_l = __fmaf_rn(lm_l2, lm_q, lm_l * lm_p);\n"
    << "    lm_o.x = __fmaf_rn(lm_o2.x, lm_q, lm_o.x * lm_p); lm_o.y = __fmaf_rn(lm_o2.y, lm_q, lm_o.y * lm_p);\n"
    << "    lm_o.z = __fmaf_rn(lm_o2.z, lm_q, lm_o.z * lm_p); lm_o.w = __fmaf_rn(lm_o2.w, lm_q, lm_o.w * lm_p);\n"
    << "    lm_m = lm_mn;\n  };\n"
    // The scratch: every (row, slice)'s unnormalised row, then every (row, slice)'s max and sum.
    << "  float* lm_scratch = (float*)lm_out1;\n"
    << "  unsigned* lm_counter = (unsigned*)lm_out2;\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5;\n"
    << slice_coords(n, *k, r)
    << "  float* lm_stats = lm_scratch + " << c(rows) << " * lm_splits * " << dv << ";\n"
    << "  const " << storage_type(dt[1]) << "* lm_K = (const " << storage_type(dt[1]) << "*)lm_in1;\n"
    << "  const " << storage_type(dt[2]) << "* lm_V = (const " << storage_type(dt[2]) << "*)lm_in2;\n"
    << mask_reader(n, dt[3], k->shape[r - 1])
    << (fold ? fold->loaders + "  const long long lm_S = " + c(fold->tokens) + ", lm_new0 = lm_keys - lm_S;\n" : std::string())
    // The warp's keys and values, then the group's q rows: every load in flight before the
    // first product.
    << (fold ? folded_loads(*fold, *q_row_index(n.inputs[0].view, dk), dk) : std::string())
    << "  float lm_kr[4][4], lm_vr[4][4], lm_qr[lm_R][4];\n"
    << "  #pragma unroll\n"
    << "  for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
    << "    const long long lm_key = lm_k0 + lm_warp * 4 + lm_u;\n"
    << "    const bool lm_here = lm_key < lm_k1;\n"
    << row_loads("lm_kr", "lm_K", dt[1], *k, r, r - 1, r - 2, dk, kpad)
    << row_loads("lm_vr", "lm_V", dt[2], *v, r, r - 2, r - 1, dv, vpad) << "  }\n";
  if (fold)
    s << folded_rows(*fold, *k, *v, r, dk);
  else if (std::optional<Expr> row = q_row_index(n.inputs[0].view, dk))
    s << "  #pragma unroll\n"
      << "  for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
      << "    const bool lm_in = lm_rr < lm_live;\n"
      << "    const long long lm_q = lm_row0 + lm_rr, lm_qb = lm_in ? " << c(*row) << " : 0;\n"
      << "    #pragma unroll\n"
      << "    for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
      << "      const int lm_p = lm_lane * 4 + lm_e;\n"
      << "      lm_qr[lm_rr][lm_e] = lm_in && lm_p < " << dk << " ? (float)"
      << load(t, "((const " + std::string(storage_type(t)) + "*)lm_in0)[lm_qb + lm_p]") << " : 0.0f;\n    }\n  }\n";
  else
    s << "  #pragma unroll\n"
      << "  for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr)\n"
      << "    #pragma unroll\n"
      << "    for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
      << "      const int lm_p = lm_lane * 4 + lm_e;\n"
      << "      lm_qr[lm_rr][lm_e] = lm_rr < lm_live && lm_p < " << dk << " ? (float)lm_ld0((lm_row0 + lm_rr) * " << dk
      << " + lm_p) : 0.0f;\n    }\n";
  // The mask for the score this lane writes (below), read with the rows.
  s << "  const int lm_si = (lm_lane >> 1) & 15, lm_su = lm_si >> 2, lm_srr = lm_si & 3;\n"
    << "  const long long lm_skey = lm_k0 + lm_warp * 4 + lm_su;\n"
    << "  const bool lm_use = (lm_lane & 1) == 0 && lm_srr < lm_live && lm_skey < lm_k1 && lm_mask_at(lm_mask_row(lm_row0 + lm_srr), lm_skey) != 0;\n"
    << "  float lm_a[16];  // (key u, row rr) at 4 * u + rr\n"
    << "  #pragma unroll\n"
    << "  for (int lm_u = 0; lm_u < 4; ++lm_u)\n"
    << "    #pragma unroll\n"
    << "    for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
    << "      float lm_x = 0.0f;\n"
    << "      #pragma unroll\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) lm_x = __fmaf_rn(" << convert("lm_qr[lm_rr][lm_e]", DType::F32, t)
    << ", lm_kr[lm_u][lm_e], lm_x);\n"
    << "      lm_a[4 * lm_u + lm_rr] = lm_x;\n    }\n"
    // Across the warp: at each step a lane keeps half its values (the upper half where its bit
    // `off` is set), adding its partner's copy of them, and hands over the other half.
    ;
  for (int h = 8, off = 16; h >= 1; h >>= 1, off >>= 1)  // constant indices: lm_a stays in registers
    s << "  {\n    const bool lm_up = (lm_lane & " << off << ") != 0;\n"
      << "    #pragma unroll\n"
      << "    for (int lm_i = 0; lm_i < " << h << "; ++lm_i) {\n"
      << "      const float lm_send = lm_up ? lm_a[lm_i] : lm_a[lm_i + " << h << "], lm_keep = lm_up ? lm_a[lm_i + " << h
      << "] : lm_a[lm_i];\n"
      << "      lm_a[lm_i] = lm_keep + __shfl_xor_sync(0xffffffffu, lm_send, " << off << ");\n    }\n  }\n";
  s << "  lm_a[0] += __shfl_xor_sync(0xffffffffu, lm_a[0], 1);\n"
    << "  if ((lm_lane & 1) == 0)\n"
    << "    lm_sc[lm_srr][lm_warp * 4 + lm_su] = lm_use ? " << convert("lm_a[0]", DType::F32, t) << " * " << float_lit(n.constant)
    << " : " << ninf << ";\n"
    << "  __syncthreads();\n"
    // Each row's slice statistics, a warp per row (a row whose keys here are all masked has
    // max -inf and contributes nothing).
    << "  if (lm_warp < lm_R) {\n"
    << "    const float lm_s = lm_sc[lm_warp][lm_lane];\n"
    << "    float lm_mx = lm_s;\n"
    << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_mx = lm_fmax_nan(lm_mx, __shfl_xor_sync(0xffffffffu, lm_mx, lm_o));\n"
    << "    const float lm_e = lm_mx == " << ninf << " ? 0.0f : exp2f((lm_s + lm_mx * -1.0f) * lm_log2e);\n"
    << "    lm_sc[lm_warp][lm_lane] = lm_e;\n"
    << "    float lm_sum = lm_e;\n"
    << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_sum += __shfl_xor_sync(0xffffffffu, lm_sum, lm_o);\n"
    << "    if (lm_lane == 0) { lm_stat[lm_warp][0] = lm_mx; lm_stat[lm_warp][1] = lm_sum; }\n  }\n"
    << "  __syncthreads();\n"
    // Values: the warp's four keys for every row (a key of probability 0 adds nothing, whatever
    // its values), then the warps' partial rows summed through shared memory.
    << "  {\n    float lm_o[lm_R][4];\n"
    << "    #pragma unroll\n"
    << "    for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
    << "      #pragma unroll\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) lm_o[lm_rr][lm_e] = 0.0f;\n"
    << "      #pragma unroll\n"
    << "      for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
    << "        const float lm_p = lm_sc[lm_rr][lm_warp * 4 + lm_u];\n"
    << "        #pragma unroll\n"
    << "        for (int lm_e = 0; lm_e < 4; ++lm_e) lm_o[lm_rr][lm_e] = lm_p != 0.0f ? __fmaf_rn(lm_p, lm_vr[lm_u][lm_e], lm_o[lm_rr][lm_e]) : lm_o[lm_rr][lm_e];\n"
    << "      }\n"
    << "      #pragma unroll\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e)\n"
    << "        if (lm_lane * 4 + lm_e < " << dv << ") lm_part[lm_warp][lm_rr][lm_lane * 4 + lm_e] = lm_o[lm_rr][lm_e];\n    }\n  }\n"
    << "  __syncthreads();\n"
    << "  for (int lm_x = threadIdx.x; lm_x < lm_R * " << dv << "; lm_x += blockDim.x) {\n"
    << "    const int lm_rr = lm_x / " << dv << ", lm_j = lm_x - lm_rr * " << dv << ";\n"
    << "    if (lm_rr >= lm_live) continue;\n"
    << "    float lm_acc = 0.0f;\n"
    << "    #pragma unroll\n"
    << "    for (int lm_w = 0; lm_w < 8; ++lm_w) lm_acc += lm_part[lm_w][lm_rr][lm_j];\n"
    << "    const long long lm_at = (lm_row0 + lm_rr) * lm_splits + lm_split;\n"
    << "    lm_scratch[lm_at * " << dv << " + lm_j] = lm_acc;\n"
    << "    if (lm_j == 0) { lm_stats[2 * lm_at] = lm_stat[lm_rr][0]; lm_stats[2 * lm_at + 1] = lm_stat[lm_rr][1]; }\n  }\n"
    // The last block of the group merges its slices: every block's writes are made visible
    // before it counts itself, and the merge reads them from L2.
    << last_block_count("lm_counter + lm_grp", "lm_splits - 1", count_by_release())
    // Thread t takes four columns (lm_c) of a row and every P-th slice from t / O4 on, merging
    // them online (all its loads independent, so they are in flight together); then the P
    // threads of each four columns merge their results through shared memory.
    << "  constexpr int lm_O4 = lm_R * " << dv / 4 << ", lm_P = 256 / lm_O4;\n"
    << "  __shared__ float lm_mm[lm_P][lm_O4], lm_ll[lm_P][lm_O4];\n"
    << "  __shared__ float4 lm_oo[lm_P][lm_O4];\n"
    << "  const int lm_x = threadIdx.x % lm_O4, lm_pt = threadIdx.x / lm_O4, lm_rr = lm_x / " << dv / 4 << ", lm_c = (lm_x - lm_rr * "
    << dv / 4 << ") * 4;\n"
    << "  if (lm_pt < lm_P) {\n"
    << "    float lm_m = " << ninf << ", lm_l = 0.0f;\n"
    << "    float4 lm_o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
    << "    if (lm_rr < lm_live) {\n"
    << "      const long long lm_at0 = (lm_row0 + lm_rr) * lm_splits;\n"
    << "      #pragma unroll 8\n"
    << "      for (int lm_t = lm_pt; lm_t < (int)lm_splits; lm_t += lm_P) {\n"
    << "        const float lm_mt = __ldcg(lm_stats + 2 * (lm_at0 + lm_t)), lm_lt = __ldcg(lm_stats + 2 * (lm_at0 + lm_t) + 1);\n"
    << "        const float4 lm_ot = __ldcg((const float4*)(lm_scratch + (lm_at0 + lm_t) * " << dv << " + lm_c));\n"
    << "        lm_merge(lm_m, lm_l, lm_o, lm_mt, lm_lt, lm_ot);\n      }\n    }\n"
    << "    lm_mm[lm_pt][lm_x] = lm_m; lm_ll[lm_pt][lm_x] = lm_l; lm_oo[lm_pt][lm_x] = lm_o;\n  }\n"
    << "  __syncthreads();\n"
    << "  if (lm_pt == 0 && lm_rr < lm_live) {\n"
    << "    float lm_m = lm_mm[0][lm_x], lm_l = lm_ll[0][lm_x];\n    float4 lm_o = lm_oo[0][lm_x];\n"
    << "    #pragma unroll\n"
    << "    for (int lm_q = 1; lm_q < lm_P; ++lm_q) lm_merge(lm_m, lm_l, lm_o, lm_mm[lm_q][lm_x], lm_ll[lm_q][lm_x], lm_oo[lm_q][lm_x]);\n"
    << "    " << storage_type(out_dtype) << "* lm_y = (" << storage_type(out_dtype) << "*)lm_out + (lm_row0 + lm_rr) * " << dv << " + lm_c;\n"
    << "    const float lm_rcp = 1.0f / lm_l;\n"
    << "    lm_y[0] = " << store(out_dtype, convert("lm_o.x * lm_rcp", DType::F32, out_dtype)) << ";\n"
    << "    lm_y[1] = " << store(out_dtype, convert("lm_o.y * lm_rcp", DType::F32, out_dtype)) << ";\n"
    << "    lm_y[2] = " << store(out_dtype, convert("lm_o.z * lm_rcp", DType::F32, out_dtype)) << ";\n"
    << "    lm_y[3] = " << store(out_dtype, convert("lm_o.w * lm_rcp", DType::F32, out_dtype)) << ";\n  }\n";
  return batch_shape_fn(*k, r) + s.str();
}

// Before the wait: each block asks L2 for its slice's key and value rows. They were written by
// earlier steps (all but the newest key, which the kernels before this one write now; a
// prefetch never returns data, so it cannot see a stale row), and reading them after the wait
// then costs an L2 hit where it cost a trip to memory: decode attention is a chain of latencies
// (rows, scores, the merge), its bytes are few. Rows whose head dim is not contiguous are left
// out. `blocks`: the launch's blocks (the body's own bound).
std::string split_attention_prefetch(const Node& n, const std::vector<DType>& dt, const Expr& blocks) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return "";
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const Expr dk_e = n.inputs[0].view.shape()[r - 1], dv_e = v->shape[r - 1];
  if (!dk_e.is_const() || !dv_e.is_const()) return "";
  std::ostringstream s;
  s << "  {\n" << batch_shape_fn(*k, r) << "  constexpr int lm_R = 4, lm_CH = 32;\n"
    << slice_coords(n, *k, r) << "  if (blockIdx.x < " << c(blocks) << ") {\n";
  // One operand's rows: key lm_k0 + lm_t / L of the slice, its line lm_t % L, L lines a row.
  auto rows = [&](const std::string& ptr, const ViewLayer& l, size_t key_dim, size_t head_dim, int64_t len, DType t) {
    if (!l.strides[head_dim].is_const(1)) return;
    const int64_t bytes = len * static_cast<int64_t>(dtype_size(t)), lines = (bytes + 127) / 128 + 1;
    s << "    for (int lm_t = threadIdx.x; lm_t < lm_CH * " << lines << "; lm_t += blockDim.x) {\n"
      << "      const long long lm_key = lm_k0 + lm_t / " << lines << ";\n"
      << "      if (lm_key >= lm_k1 || !(" << valid_cond(l, r, head_dim, "lm_key", key_dim) << ")) continue;\n"
      << "      const unsigned long long lm_p0 = (unsigned long long)(" << ptr << " + (" << base_index(l, r, "lm_key", key_dim, head_dim)
      << ") * " << dtype_size(t) << ");\n"
      << "      const unsigned long long lm_pa = (lm_p0 & ~127ull) + (unsigned long long)(lm_t % " << lines << ") * 128ull;\n"
      << "      if (lm_pa < lm_p0 + " << bytes << "ull) lm_prefetch_l2((const void*)lm_pa);\n"
      << "    }\n";
  };
  rows("lm_in1", *k, r - 1, r - 2, dk_e.value(), dt[1]);
  rows("lm_in2", *v, r - 2, r - 1, dv_e.value(), dt[2]);
  s << "  }\n  }\n";
  return s.str();
}

}  // namespace luminal::cuda::gen
