// Prefill attention on the tensor cores: the tiled (flash-style) kernel of
// cuda_attention_codegen.cpp with its two products, scores = q·kᵀ and out = p·v, as mma.sync
// m16n8k16 on bf16 parts.
#include <algorithm>
#include <sstream>

#include "backends/cpu/fused_codegen.h"
#include "backends/cuda/cuda_attention_parts.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

namespace {

// Row strides in shared memory, in floats. q and k fragments are read as float2 at
// (row g, column 2·tq): a stride of 8 (mod 32) puts a half-warp's 16 reads in 32 different
// banks. v fragments are read one float at (key 2·tq, column g): a stride of 4 (mod 32) does.
int64_t qk_stride(int64_t dk) { return dk + 8; }
int64_t v_stride(int64_t dv) { return dv + 4; }

struct MmaDims {
  int64_t dk, dv;
};

std::optional<MmaDims> mma_dims(const Node& n, const StridedKv& kv) {
  const size_t r = kv.r;
  const std::optional<int64_t> dk = n.inputs[0].view.shape()[r - 1].as_const(), dv = kv.v->shape[r - 1].as_const();
  if (!dk || !dv || *dk % 16 != 0 || *dv % 8 != 0 || *dk > kTiledMaxHeadDim || *dv > kTiledMmaMaxValueDim) return std::nullopt;
  return MmaDims{*dk, *dv};
}

}  // namespace

// One block of 8 warps per (batch entry, tile of 64 query rows), walking the keys in tiles of
// 64, as the CUDA-core kernel does. Warp w owns rows 16·(w % 4) .. +16 and keys 32·(w / 4) .. +32
// of each tile: its scores are four m16n8 accumulator tiles, which are also, unchanged, the A
// operand of its share of p·v (FlashAttention-2's register reuse), so probabilities never go
// through shared memory. The two warps of a row group keep one running max (exchanged once per
// tile through shared memory) and their own partial sums and outputs, added at the end.
//
// f32 operands are split into bf16 hi + lo and multiplied three times (hi·hi + hi·lo + lo·hi),
// which keeps each product to about 2^-16 of its size; the CUDA-core kernel's products are
// exact. Masks, padding and the tile skipping follow the CUDA-core kernel.
std::optional<std::string> tiled_attention_mma(const Node& n, const std::vector<DType>& dt, DType out_dtype) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const std::optional<MmaDims> d = mma_dims(n, *kv);
  if (!d) return std::nullopt;
  static_assert(kBlockThreads == 256 && kTiledRows == 64 && kTiledKeys == 64, "the warp layout below assumes these");
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const DType t = dt[0];
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  std::ostringstream s;
  s << batch_shape_fn(*k, r) << mask_reader(n, dt[3], k->shape[r - 1])
    << "  extern __shared__ float lm_sh[];\n"
    << "  constexpr int lm_DK = " << d->dk << ", lm_DV = " << d->dv << ", lm_QW = " << qk_stride(d->dk) << ", lm_VW = " << v_stride(d->dv)
    << ", lm_KVW = " << std::max(qk_stride(d->dk), v_stride(d->dv)) << ";\n"
    << "  constexpr int lm_BM = 64, lm_BN = 64, lm_NT = lm_DV / 8;\n"
    << "  float* lm_qs = lm_sh;                    // [BM][QW]\n"
    << "  float* lm_kv = lm_qs + lm_BM * lm_QW;     // [BN][QW] keys, then [BN][VW] values; at the end [BM][VW] outputs\n"
    << "  float* lm_red = lm_kv + lm_BN * lm_KVW;   // [2][BM]: each key half's row maxima, at the end partial sums\n"
    << "  const long long lm_seq = " << c(n.inputs[0].view.shape()[r - 2]) << ", lm_keys = " << c(k->shape[r - 1]) << ";\n"
    << "  const long long lm_tiles = (lm_seq + lm_BM - 1) / lm_BM;\n"
    << "  const long long lm_b = blockIdx.x / lm_tiles, lm_r0 = (blockIdx.x - lm_b * lm_tiles) * lm_BM;\n"
    << batch_coords(r)
    << "  for (int lm_i = threadIdx.x; lm_i < lm_BM * lm_DK; lm_i += blockDim.x) {\n"
    << "    const int lm_row = lm_i / lm_DK, lm_p = lm_i - lm_row * lm_DK;\n"
    << "    lm_qs[lm_row * lm_QW + lm_p] = lm_r0 + lm_row < lm_seq ? (float)lm_ld0((lm_b * lm_seq + lm_r0 + lm_row) * lm_DK + lm_p) : 0.0f;\n  }\n"
    // Lane (g, tq) of warp (rg, kh) holds rows ra and ra + 8 of the tile, and in each of its
    // four score tiles j the keys 32·kh + 8·j + 2·tq and the one after.
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_g = lm_lane >> 2, lm_tq = lm_lane & 3;\n"
    << "  const int lm_rg = lm_warp & 3, lm_kh = lm_warp >> 2, lm_ra = 16 * lm_rg + lm_g;\n"
    << "  const " << ks << "* lm_K = (const " << ks << "*)lm_in1;\n  const " << vs << "* lm_V = (const " << vs << "*)lm_in2;\n"
    << "  const long long lm_ksp = " << c(k->strides[r - 2]) << ", lm_vsj = " << c(v->strides[r - 1]) << ";\n"
    << "  long long lm_mrow[2];\n  bool lm_live[2];\n"
    << "  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    const long long lm_row = lm_r0 + lm_ra + 8 * lm_a;\n"
    << "    lm_live[lm_a] = lm_row < lm_seq;\n    lm_mrow[lm_a] = lm_live[lm_a] ? lm_mask_row(lm_b * lm_seq + lm_row) : 0;\n  }\n"
    << "  const float lm_ninf = __int_as_float((int)0xff800000u), lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
    << "  float lm_m[2] = {lm_ninf, lm_ninf}, lm_l[2] = {0.0f, 0.0f}, lm_o[lm_NT][4];\n"
    << "  #pragma unroll\n  for (int lm_j = 0; lm_j < lm_NT; ++lm_j) lm_o[lm_j][0] = lm_o[lm_j][1] = lm_o[lm_j][2] = lm_o[lm_j][3] = 0.0f;\n"
    << "  for (long long lm_k0 = 0; lm_k0 < lm_keys; lm_k0 += lm_BN) {\n"
    // Accumulator element e of tile j: row ra + 8·(e / 2), key kb + 8·j + (e % 2).
    << "    const long long lm_kb = lm_k0 + 32 * lm_kh + 2 * lm_tq;\n"
    << "    bool lm_vis[4][4];\n    int lm_any = 0;\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const long long lm_key = lm_kb + 8 * lm_j + (lm_e & 1);\n"
    << "        lm_vis[lm_j][lm_e] = lm_live[lm_e >> 1] && lm_key < lm_keys && lm_mask_at(lm_mrow[lm_e >> 1], lm_key) != 0;\n"
    << "        lm_any |= lm_vis[lm_j][lm_e];\n      }\n"
    // Also the barrier that lets this tile overwrite the last one's shared memory.
    << "    if (!__syncthreads_or(lm_any)) continue;\n"
    << tile_rows_to_shared("lm_K", dt[1], *k, r, r - 1, r - 2, "lm_ksp", "lm_DK", value_lit(n.inputs[1].view.pad_value(), dt[1]), "lm_QW")
    << "    __syncthreads();\n"
    << "    float lm_s[4][4];\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j) lm_s[lm_j][0] = lm_s[lm_j][1] = lm_s[lm_j][2] = lm_s[lm_j][3] = 0.0f;\n"
    << "    {\n"
    << "      const float* lm_qa = lm_qs + lm_ra * lm_QW + 2 * lm_tq;\n"
    << "      const float* lm_kr = lm_kv + (32 * lm_kh + lm_g) * lm_QW + 2 * lm_tq;\n"
    << "      #pragma unroll 2\n"
    << "      for (int lm_p = 0; lm_p < lm_DK; lm_p += 16) {\n"
    << "        unsigned lm_ah[4], lm_al[4];\n"
    << "        #pragma unroll\n        for (int lm_x = 0; lm_x < 4; ++lm_x) {\n"
    << "          const float2 lm_q = *(const float2*)(lm_qa + (lm_x & 1) * 8 * lm_QW + lm_p + (lm_x >> 1) * 8);\n"
    << "          lm_split_bf16(lm_q.x, lm_q.y, lm_ah[lm_x], lm_al[lm_x]);\n        }\n"
    << "        #pragma unroll\n        for (int lm_j = 0; lm_j < 4; ++lm_j) {\n"
    << "          unsigned lm_bh[2], lm_bl[2];\n"
    << "          const float2 lm_k0v = *(const float2*)(lm_kr + 8 * lm_j * lm_QW + lm_p), lm_k1v = *(const float2*)(lm_kr + 8 * lm_j * lm_QW + lm_p + 8);\n"
    << "          lm_split_bf16(lm_k0v.x, lm_k0v.y, lm_bh[0], lm_bl[0]);\n"
    << "          lm_split_bf16(lm_k1v.x, lm_k1v.y, lm_bh[1], lm_bl[1]);\n"
    << "          lm_mma_bf16(lm_s[lm_j], lm_al, lm_bh);\n          lm_mma_bf16(lm_s[lm_j], lm_ah, lm_bl);\n          lm_mma_bf16(lm_s[lm_j], lm_ah, lm_bh);\n"
    << "        }\n      }\n    }\n"
    // Scale and mask; each row's max over this warp's keys (its quad of lanes), then over both
    // key halves through shared memory.
    << "    float lm_tmax[2] = {lm_ninf, lm_ninf};\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        lm_s[lm_j][lm_e] = lm_vis[lm_j][lm_e] ? " << convert("lm_s[lm_j][lm_e]", DType::F32, t) << " * " << float_lit(n.constant)
    << " : lm_ninf;\n"
    << "        lm_tmax[lm_e >> 1] = lm_fmax_nan(lm_tmax[lm_e >> 1], lm_s[lm_j][lm_e]);\n      }\n"
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "      lm_tmax[lm_a] = lm_fmax_nan(lm_tmax[lm_a], __shfl_xor_sync(0xffffffffu, lm_tmax[lm_a], 1));\n"
    << "      lm_tmax[lm_a] = lm_fmax_nan(lm_tmax[lm_a], __shfl_xor_sync(0xffffffffu, lm_tmax[lm_a], 2));\n"
    << "      if (lm_tq == 0) lm_red[lm_kh * lm_BM + lm_ra + 8 * lm_a] = lm_tmax[lm_a];\n    }\n"
    << "    __syncthreads();\n"
    << "    float lm_alpha[2], lm_mn[2];\n"
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "      lm_mn[lm_a] = lm_fmax_nan(lm_m[lm_a], lm_fmax_nan(lm_tmax[lm_a], lm_red[(lm_kh ^ 1) * lm_BM + lm_ra + 8 * lm_a]));\n"
    << "      lm_alpha[lm_a] = lm_m[lm_a] == lm_ninf ? 0.0f : exp2f((lm_m[lm_a] + lm_mn[lm_a] * -1.0f) * lm_log2e);\n"
    << "      lm_m[lm_a] = lm_mn[lm_a];\n      lm_l[lm_a] *= lm_alpha[lm_a];\n    }\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const float lm_x = lm_s[lm_j][lm_e];\n"
    << "        lm_s[lm_j][lm_e] = lm_x == lm_ninf ? 0.0f : exp2f((lm_x + lm_mn[lm_e >> 1] * -1.0f) * lm_log2e);\n"
    << "        lm_l[lm_e >> 1] += lm_s[lm_j][lm_e];\n      }\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j) {\n"
    << "      lm_o[lm_j][0] *= lm_alpha[0]; lm_o[lm_j][1] *= lm_alpha[0]; lm_o[lm_j][2] *= lm_alpha[1]; lm_o[lm_j][3] *= lm_alpha[1];\n    }\n"
    << "    __syncthreads();\n"
    << tile_rows_to_shared("lm_V", dt[2], *v, r, r - 2, r - 1, "lm_vsj", "lm_DV", value_lit(n.inputs[2].view.pad_value(), dt[2]), "lm_VW")
    << "    __syncthreads();\n"
    // out += p·v over this warp's 32 keys: two k16 steps, score tiles 2·ks and 2·ks + 1 as A.
    << "    #pragma unroll\n    for (int lm_ks = 0; lm_ks < 2; ++lm_ks) {\n"
    << "      unsigned lm_ph[4], lm_pl[4];\n"
    << "      lm_split_bf16(lm_s[2 * lm_ks][0], lm_s[2 * lm_ks][1], lm_ph[0], lm_pl[0]);\n"
    << "      lm_split_bf16(lm_s[2 * lm_ks][2], lm_s[2 * lm_ks][3], lm_ph[1], lm_pl[1]);\n"
    << "      lm_split_bf16(lm_s[2 * lm_ks + 1][0], lm_s[2 * lm_ks + 1][1], lm_ph[2], lm_pl[2]);\n"
    << "      lm_split_bf16(lm_s[2 * lm_ks + 1][2], lm_s[2 * lm_ks + 1][3], lm_ph[3], lm_pl[3]);\n"
    << "      const float* lm_vr = lm_kv + (32 * lm_kh + 16 * lm_ks + 2 * lm_tq) * lm_VW + lm_g;\n"
    << "      #pragma unroll\n      for (int lm_j = 0; lm_j < lm_NT; ++lm_j) {\n"
    << "        unsigned lm_bh[2], lm_bl[2];\n"
    << "        lm_split_bf16(lm_vr[8 * lm_j], lm_vr[lm_VW + 8 * lm_j], lm_bh[0], lm_bl[0]);\n"
    << "        lm_split_bf16(lm_vr[8 * lm_VW + 8 * lm_j], lm_vr[9 * lm_VW + 8 * lm_j], lm_bh[1], lm_bl[1]);\n"
    << "        lm_mma_bf16(lm_o[lm_j], lm_pl, lm_bh);\n        lm_mma_bf16(lm_o[lm_j], lm_ph, lm_bl);\n        lm_mma_bf16(lm_o[lm_j], lm_ph, lm_bh);\n"
    << "      }\n    }\n  }\n"
    // The key halves' partial sums and outputs: the second half's through shared memory.
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    lm_l[lm_a] += __shfl_xor_sync(0xffffffffu, lm_l[lm_a], 1);\n"
    << "    lm_l[lm_a] += __shfl_xor_sync(0xffffffffu, lm_l[lm_a], 2);\n  }\n"
    << "  __syncthreads();\n"
    << "  if (lm_kh == 1) {\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e)\n"
    << "        lm_kv[(lm_ra + 8 * (lm_e >> 1)) * lm_VW + 8 * lm_j + 2 * lm_tq + (lm_e & 1)] = lm_o[lm_j][lm_e];\n"
    << "    if (lm_tq == 0) { lm_red[lm_ra] = lm_l[0]; lm_red[lm_ra + 8] = lm_l[1]; }\n  }\n"
    << "  __syncthreads();\n"
    << "  if (lm_kh == 1) return;\n"
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    if (!lm_live[lm_a]) continue;\n"
    << "    const int lm_rt = lm_ra + 8 * lm_a;\n"
    << "    const long long lm_row = lm_b * lm_seq + lm_r0 + lm_rt;\n"
    << "    const float lm_inv = 1.0f / (lm_l[lm_a] + lm_red[lm_rt]);\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 2; ++lm_e) {\n"
    << "        const int lm_col = 8 * lm_j + 2 * lm_tq + lm_e;\n"
    << "        const float lm_x = (lm_o[lm_j][2 * lm_a + lm_e] + lm_kv[lm_rt * lm_VW + lm_col]) * lm_inv;\n"
    << "        ((" << storage_type(out_dtype) << "*)lm_out)[lm_row * lm_DV + lm_col] = " << store(out_dtype, convert("lm_x", DType::F32, out_dtype))
    << ";\n      }\n  }\n";
  return s.str();
}

Expr tiled_attention_mma_shared_bytes(const Node& n) {
  const size_t r = n.inputs[0].view.rank();
  const int64_t dk = *n.inputs[0].view.shape()[r - 1].as_const(), dv = *n.inputs[2].view.shape()[r - 1].as_const();
  return Expr((kTiledRows * qk_stride(dk) + kTiledKeys * std::max(qk_stride(dk), v_stride(dv)) + 2 * kTiledRows) * 4);
}

}  // namespace luminal::cuda::gen
