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

// Shared memory holds q, one key tile and one value tile as bf16 hi and lo parts, split once
// when they arrive (not by every warp that reads them), as 32-bit words of two bf16 values:
// the mma operands' registers. Row strides in words: q and k rows are read at word
// (row g, tq), values transposed ([column][key]) at (column g, tq); a stride of 4 (mod 32)
// words puts a warp's 32 reads in 32 banks.
int64_t qk_words(int64_t dk) { return dk / 2 + 4; }
constexpr int64_t kVtWords = kTiledKeys / 2 + 4;

struct MmaDims {
  int64_t dk, dv;
};

std::optional<MmaDims> mma_dims(const Node& n, const StridedKv& kv) {
  const size_t r = kv.r;
  const std::optional<int64_t> dk = n.inputs[0].view.shape()[r - 1].as_const(), dv = kv.v->shape[r - 1].as_const();
  if (!dk || !dv || *dk % 16 != 0 || *dv % 8 != 0 || *dk > kTiledMaxHeadDim || *dv > kTiledMmaMaxValueDim) return std::nullopt;
  return MmaDims{*dk, *dv};
}

// The statement that stores f32 values x0, x1 as the bf16 word(s) `hi` (and `lo`, unless
// hi_only) of the shared layout.
std::string to_words(bool hi_only, const std::string& x0, const std::string& x1, const std::string& hi, const std::string& lo) {
  if (hi_only) return hi + " = lm_pack_bf16(" + x0 + ", " + x1 + ");";
  return "lm_split_bf16(" + x0 + ", " + x1 + ", " + hi + ", " + lo + ");";
}

// The pre-pass's scratch (32-bit words, each two bf16 values), keys padded to whole tiles with
// zeros: K hi [B][kpad][dk/2], K lo alike (not with hi_only), then V hi [B][dv][kpad/2] (values
// transposed: a column's key pairs in a row), V lo alike. lm_kw and lm_vw are the words of one
// K part and one V part. Needs lm_keys, lm_DK and lm_DV.
std::string prep_sizes(const Node& n, size_t r) {
  const std::string batches = c(product_of(n.inputs[0].view.shape(), 0, r - 2)), tile = std::to_string(kTiledKeys);
  return "  const long long lm_kpad = (lm_keys + " + tile + " - 1) / " + tile + " * " + tile + ";\n" +
         "  const long long lm_kw = " + batches + " * lm_kpad * (lm_DK / 2), lm_vw = " + batches + " * lm_DV * (lm_kpad / 2);\n";
}

// Words of the shared layout: q hi and lo, k hi and lo (at the end the second key half's
// outputs, [BM][DV + 4] floats), vᵀ hi and lo, then [2][BM] floats of row statistics.
int64_t k_area_words(const MmaDims& d) { return std::max(2 * kTiledKeys * qk_words(d.dk), kTiledRows * (d.dv + 4)); }

// q's tile as bf16 hi and lo words: through q_row_index where it applies (four threads a row),
// else through q's loader, element by element.
std::string q_tile(const Node& n, DType t, int64_t dk, bool hi_only) {
  std::ostringstream s;
  if (std::optional<Expr> row = q_row_index(n.inputs[0].view, dk)) {
    s << "  {\n    const int lm_row = threadIdx.x >> 2, lm_p0 = threadIdx.x & 3;\n"
      << "    const bool lm_in = lm_r0 + lm_row < lm_seq;\n"
      << "    const long long lm_q = lm_b * lm_seq + lm_r0 + lm_row, lm_qb = lm_in ? " << c(*row) << " : 0;\n"
      << "    const " << storage_type(t) << "* lm_Q = (const " << storage_type(t) << "*)lm_in0 + lm_qb;\n"
      << "    #pragma unroll 4\n    for (int lm_j = 0; lm_j < lm_DK / 8; ++lm_j) {\n"
      << "      const int lm_pp = lm_p0 + 4 * lm_j;\n"
      << "      " << to_words(hi_only, "lm_in ? (float)" + load(t, "lm_Q[2 * lm_pp]") + " : 0.0f", "lm_in ? (float)" + load(t, "lm_Q[2 * lm_pp + 1]") + " : 0.0f",
                             "lm_qhi[lm_row * lm_QPW + lm_pp]", "lm_qlo[lm_row * lm_QPW + lm_pp]")
      << "\n    }\n  }\n";
    return s.str();
  }
  s << "  for (int lm_i = threadIdx.x; lm_i < lm_BM * lm_DK / 2; lm_i += blockDim.x) {\n"
    << "    const int lm_row = lm_i / (lm_DK / 2), lm_pp = lm_i - lm_row * (lm_DK / 2);\n"
    << "    const long long lm_at = (lm_b * lm_seq + lm_r0 + lm_row) * lm_DK + 2 * lm_pp;\n"
    << "    const bool lm_in = lm_r0 + lm_row < lm_seq;\n"
    << "    " << to_words(hi_only, "lm_in ? (float)lm_ld0(lm_at) : 0.0f", "lm_in ? (float)lm_ld0(lm_at + 1) : 0.0f", "lm_qhi[lm_row * lm_QPW + lm_pp]",
                       "lm_qlo[lm_row * lm_QPW + lm_pp]")
    << "\n  }\n";
  return s.str();
}

}  // namespace

// The index of q's element (row lm_q, 0), where element (row, p < dk) is that plus p: every layer
// has dk as its last dim, with stride 1 and no mask, and every layer above the bottom one (which
// addresses memory) has its offset and other strides multiples of dk. Then a thread finds a row
// once, not once per element through q's loader (its 64-bit divisions took longer than the
// tiles of a short causal row did).
std::optional<Expr> q_row_index(const View& v, int64_t dk) {
  const IndexExprs ix = v.flat_index();
  if (!ix.valid.is_const(1)) return std::nullopt;
  const std::vector<ViewLayer>& layers = v.layers();
  const Expr w(dk);
  auto multiple = [&](const Expr& e) { return provably_equal((e / w) * w, e); };
  for (size_t i = 0; i < layers.size(); ++i) {
    const ViewLayer& l = layers[i];
    if (l.shape.empty()) return std::nullopt;
    const size_t last = l.shape.size() - 1;
    if (!l.shape[last].is_const(dk) || !l.strides[last].is_const(1) || l.dim_masked(last)) return std::nullopt;
    if (i == 0) continue;
    if (!multiple(l.offset)) return std::nullopt;
    for (size_t d = 0; d < last; ++d)
      if (!multiple(l.strides[d])) return std::nullopt;
  }
  return ix.index.substitute_index(Expr::index() * w).simplify();
}

// One block of 8 warps per (batch entry, tile of 64 query rows), walking the keys in tiles of
// 64, as the CUDA-core kernel does. Warp w owns rows 16·(w % 4) .. +16 and keys 32·(w / 4) .. +32
// of each tile: its scores are four m16n8 accumulator tiles, which are also, unchanged, the A
// operand of its share of p·v (FlashAttention-2's register reuse), so probabilities never go
// through shared memory. The two warps of a row group keep one running max (exchanged once per
// tile through shared memory) and their own partial sums and outputs, added at the end.
//
// f32 operands are split into bf16 hi + lo and multiplied three times (hi·hi + hi·lo + lo·hi),
// which keeps each product to about 2^-16 of its size; the CUDA-core kernel's products are
// exact. With `hi_only` (bf16 activations) each operand is rounded to bf16 and multiplied once.
// Masks, padding and the tile skipping follow the CUDA-core kernel. A tile's keys and values come
// as the pre-pass's words through cp.async; with hi_only the lo areas hold the next tile, copied
// while this one is multiplied. Two blocks share an SM, so one computes while the other waits.
std::optional<std::string> tiled_attention_mma(const Node& n, const std::vector<DType>& dt, DType out_dtype, bool hi_only) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const std::optional<MmaDims> d = mma_dims(n, *kv);
  if (!d) return std::nullopt;
  static_assert(kBlockThreads == 256 && kTiledRows == 64 && kTiledKeys == 64, "the warp layout below assumes these");
  const ViewLayer* k = kv->k;
  const size_t r = kv->r;
  const DType t = dt[0];
  std::ostringstream s;
  s << batch_shape_fn(*k, r) << mask_reader(n, dt[3], k->shape[r - 1])
    << "  extern __shared__ float lm_sh[];\n"
    << "  constexpr int lm_DK = " << d->dk << ", lm_DV = " << d->dv << ", lm_QPW = " << qk_words(d->dk) << ", lm_VPW = " << kVtWords << ";\n"
    << "  constexpr int lm_BM = 64, lm_BN = 64, lm_NT = lm_DV / 8, lm_OW = lm_DV + 4;\n"
    << "  unsigned* lm_qhi = (unsigned*)lm_sh;            // [BM][QPW]\n"
    << "  unsigned* lm_qlo = lm_qhi + lm_BM * lm_QPW;\n"
    << "  unsigned* lm_khi = lm_qlo + lm_BM * lm_QPW;      // [BN][QPW]; at the end [BM][OW] floats\n"
    << "  unsigned* lm_klo = lm_khi + lm_BN * lm_QPW;\n"
    << "  unsigned* lm_vhi = lm_khi + " << k_area_words(*d) << ";  // [DV][VPW]: values transposed\n"
    << "  unsigned* lm_vlo = lm_vhi + lm_DV * lm_VPW;\n"
    << "  float* lm_red = (float*)(lm_vlo + lm_DV * lm_VPW);  // [2][BM]: each key half's row maxima, at the end partial sums\n"
    << "  const long long lm_seq = " << c(n.inputs[0].view.shape()[r - 2]) << ", lm_keys = " << c(k->shape[r - 1]) << ";\n"
    << "  const long long lm_tiles = (lm_seq + lm_BM - 1) / lm_BM;\n"
    << prep_sizes(n, r)
    << "  const unsigned* lm_prep = (const unsigned*)lm_out1;  // the pre-pass's words\n"
    // Blocks go out longest first (the scheduler starts them in index order): all batch entries'
    // last row tiles, which see the most keys under a causal mask, then the tiles before.
    << "  const long long lm_nb = " << c(product_of(n.inputs[0].view.shape(), 0, r - 2)) << ";\n"
    << "  const long long lm_b = blockIdx.x % lm_nb, lm_r0 = (lm_tiles - 1 - blockIdx.x / lm_nb) * lm_BM;\n"
    << batch_coords(r)
    << q_tile(n, t, d->dk, hi_only)
    // Lane (g, tq) of warp (rg, kh) holds rows ra and ra + 8 of the tile, and in each of its
    // four score tiles j the keys 32·kh + 8·j + 2·tq and the one after.
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_g = lm_lane >> 2, lm_tq = lm_lane & 3;\n"
    << "  const int lm_rg = lm_warp & 3, lm_kh = lm_warp >> 2, lm_ra = 16 * lm_rg + lm_g;\n"
    << tiled_rows_setup(dt, *kv, "2", "lm_ra + 8 * lm_a")
    << "  float lm_m[2] = {lm_ninf, lm_ninf}, lm_l[2] = {0.0f, 0.0f}, lm_o[lm_NT][4];\n"
    << "  #pragma unroll\n  for (int lm_j = 0; lm_j < lm_NT; ++lm_j) lm_o[lm_j][0] = lm_o[lm_j][1] = lm_o[lm_j][2] = lm_o[lm_j][3] = 0.0f;\n"
    // lm_visible(k0): this thread's visible scores of the tile at k0, bit 4·j + e for accumulator
    // element e of score tile j (row ra + 8·(e / 2), key kb + 8·j + (e % 2)).
    << "  auto lm_visible = [&](long long lm_k0) -> unsigned {\n"
    << "    const long long lm_kb = lm_k0 + 32 * lm_kh + 2 * lm_tq;\n"
    << "    unsigned lm_bits = 0;\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const long long lm_key = lm_kb + 8 * lm_j + (lm_e & 1);\n"
    << "        if (lm_live[lm_e >> 1] && lm_key < lm_keys && lm_mask_at(lm_mrow[lm_e >> 1], lm_key) != 0) lm_bits |= 1u << (4 * lm_j + lm_e);\n"
    << "      }\n    return lm_bits;\n  };\n"
    // The first tile from k0 on with a visible score anywhere in the block (lm_keys if none).
    << "  auto lm_next = [&](long long lm_k0, unsigned& lm_bits) -> long long {\n"
    << "    for (; lm_k0 < lm_keys; lm_k0 += lm_BN) {\n"
    << "      lm_bits = lm_visible(lm_k0);\n"
    << "      if (__syncthreads_or(lm_bits != 0)) break;\n    }\n"
    << "    return lm_k0;\n  };\n"
    // The tile's keys and values, split once for every block by the pre-pass: 16-byte copies
    // into the shared layout (rows of lm_QPW words; values transposed, rows of lm_VPW words),
    // through cp.async, one commit group. With hi_only the lo areas are a second buffer.
    << "  auto lm_fetch = [&](long long lm_k0, int lm_to) {\n"
    << "    const unsigned* lm_pk = lm_prep + (lm_b * lm_kpad + lm_k0) * (lm_DK / 2);\n"
    << "    unsigned* lm_kd = lm_to ? lm_klo : lm_khi;\n    unsigned* lm_vd = lm_to ? lm_vlo : lm_vhi;\n"
    << "    for (int lm_i = threadIdx.x; lm_i < lm_BN * (lm_DK / 8); lm_i += blockDim.x) {\n"
    << "      const int lm_kk = lm_i / (lm_DK / 8), lm_c4 = 4 * (lm_i - lm_kk * (lm_DK / 8));\n"
    << "      lm_cp_async16(lm_kd + lm_kk * lm_QPW + lm_c4, lm_pk + lm_kk * (lm_DK / 2) + lm_c4, true);\n"
    << (hi_only ? "" : "      lm_cp_async16(lm_klo + lm_kk * lm_QPW + lm_c4, lm_pk + lm_kw + lm_kk * (lm_DK / 2) + lm_c4, true);\n")
    << "    }\n"
    << "    const unsigned* lm_pv = lm_prep + " << (hi_only ? 1 : 2) << " * lm_kw + lm_b * lm_DV * (lm_kpad / 2) + lm_k0 / 2;\n"
    << "    for (int lm_i = threadIdx.x; lm_i < lm_DV * (lm_BN / 8); lm_i += blockDim.x) {\n"
    << "      const int lm_cc = lm_i / (lm_BN / 8), lm_c4 = 4 * (lm_i - lm_cc * (lm_BN / 8));\n"
    << "      lm_cp_async16(lm_vd + lm_cc * lm_VPW + lm_c4, lm_pv + lm_cc * (lm_kpad / 2) + lm_c4, true);\n"
    << (hi_only ? "" : "      lm_cp_async16(lm_vlo + lm_cc * lm_VPW + lm_c4, lm_pv + lm_vw + lm_cc * (lm_kpad / 2) + lm_c4, true);\n")
    << "    }\n    lm_cp_async_commit();\n  };\n"
    // Each tile's copies are in flight while the tile before is multiplied (hi_only: two
    // buffers). The tile after is guessed to be the next one (true of every causal row up to
    // its diagonal) and its mask read before the products; a guess without a visible score
    // costs a copy. (Its visibility bits are made at once, so the warps wait on those reads:
    // docs/lessons.md, "Double-buffered tiles that changed nothing".)
    << "  unsigned lm_vis = 0, lm_nvis = 0;\n"
    << "  long long lm_k0 = lm_next(0, lm_vis);\n"
    << "  int lm_buf = 0;\n"
    << (hi_only ? "  if (lm_k0 < lm_keys) lm_fetch(lm_k0, 0);\n" : "")
    << "  while (lm_k0 < lm_keys) {\n"
    << "    long long lm_k1 = lm_k0 + lm_BN;\n"
    << (hi_only ? "    if (lm_k1 < lm_keys) lm_fetch(lm_k1, lm_buf ^ 1);\n" : "    lm_fetch(lm_k0, 0);\n")
    << "    lm_nvis = lm_k1 < lm_keys ? lm_visible(lm_k1) : 0u;\n"
    << (hi_only ? "    if (lm_k1 < lm_keys) lm_cp_async_wait<1>(); else lm_cp_async_wait<0>();\n" : "    lm_cp_async_wait<0>();\n")
    << "    __syncthreads();\n"
    << "    const unsigned* lm_kt = lm_buf ? lm_klo : lm_khi;\n    const unsigned* lm_vt = lm_buf ? lm_vlo : lm_vhi;\n"
    << "    float lm_s[4][4];\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j) lm_s[lm_j][0] = lm_s[lm_j][1] = lm_s[lm_j][2] = lm_s[lm_j][3] = 0.0f;\n"
    << "    #pragma unroll 2\n"
    << "    for (int lm_pw = 0; lm_pw < lm_DK / 2; lm_pw += 8) {\n"
    << "      unsigned lm_ah[4]" << (hi_only ? "" : ", lm_al[4]") << ";\n"
    << "      #pragma unroll\n      for (int lm_x = 0; lm_x < 4; ++lm_x) {\n"
    << "        const int lm_w = (lm_ra + 8 * (lm_x & 1)) * lm_QPW + lm_pw + lm_tq + 4 * (lm_x >> 1);\n"
    << "        lm_ah[lm_x] = lm_qhi[lm_w];\n" << (hi_only ? "" : "        lm_al[lm_x] = lm_qlo[lm_w];\n") << "      }\n"
    << "      #pragma unroll\n      for (int lm_j = 0; lm_j < 4; ++lm_j) {\n"
    << "        const int lm_w = (32 * lm_kh + 8 * lm_j + lm_g) * lm_QPW + lm_pw + lm_tq;\n"
    << (hi_only ? "        const unsigned lm_bh[2] = {lm_kt[lm_w], lm_kt[lm_w + 4]};\n"
                : "        const unsigned lm_bh[2] = {lm_kt[lm_w], lm_kt[lm_w + 4]}, lm_bl[2] = {lm_klo[lm_w], lm_klo[lm_w + 4]};\n"
                  "        lm_mma_bf16(lm_s[lm_j], lm_al, lm_bh);\n        lm_mma_bf16(lm_s[lm_j], lm_ah, lm_bl);\n")
    << "        lm_mma_bf16(lm_s[lm_j], lm_ah, lm_bh);\n"
    << "      }\n    }\n"
    // Scale and mask; each row's max over this warp's keys (its quad of lanes), then over both
    // key halves through shared memory.
    << "    float lm_tmax[2] = {lm_ninf, lm_ninf};\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        lm_s[lm_j][lm_e] = (lm_vis >> (4 * lm_j + lm_e)) & 1u ? " << convert("lm_s[lm_j][lm_e]", DType::F32, t) << " * " << float_lit(n.constant)
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
    // out += p·v over this warp's 32 keys: two k16 steps, score tiles 2·ks and 2·ks + 1 as A.
    << "    #pragma unroll\n    for (int lm_ks = 0; lm_ks < 2; ++lm_ks) {\n"
    << "      unsigned lm_ph[4]" << (hi_only ? "" : ", lm_pl[4]") << ";\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks][0]", "lm_s[2 * lm_ks][1]", "lm_ph[0]", "lm_pl[0]") << "\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks][2]", "lm_s[2 * lm_ks][3]", "lm_ph[1]", "lm_pl[1]") << "\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks + 1][0]", "lm_s[2 * lm_ks + 1][1]", "lm_ph[2]", "lm_pl[2]") << "\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks + 1][2]", "lm_s[2 * lm_ks + 1][3]", "lm_ph[3]", "lm_pl[3]") << "\n"
    << "      #pragma unroll\n      for (int lm_j = 0; lm_j < lm_NT; ++lm_j) {\n"
    << "        const int lm_w = (8 * lm_j + lm_g) * lm_VPW + 16 * lm_kh + 8 * lm_ks + lm_tq;\n"
    << (hi_only ? "        const unsigned lm_bh[2] = {lm_vt[lm_w], lm_vt[lm_w + 4]};\n"
                : "        const unsigned lm_bh[2] = {lm_vt[lm_w], lm_vt[lm_w + 4]}, lm_bl[2] = {lm_vlo[lm_w], lm_vlo[lm_w + 4]};\n"
                  "        lm_mma_bf16(lm_o[lm_j], lm_pl, lm_bh);\n        lm_mma_bf16(lm_o[lm_j], lm_ph, lm_bl);\n")
    << "        lm_mma_bf16(lm_o[lm_j], lm_ph, lm_bh);\n"
    << "      }\n    }\n"
    // The guess had no visible score: the next tile with one (the barrier also ends this
    // tile's reads of the buffer that tile then fills).
    << "    if (lm_k1 < lm_keys && !__syncthreads_or(lm_nvis != 0)) {\n"
    << (hi_only ? "      lm_cp_async_wait<0>();  // the guess's copies land before its buffer takes another tile\n" : "")
    << "      lm_k1 = lm_next(lm_k1 + lm_BN, lm_nvis);\n"
    << (hi_only ? "      if (lm_k1 < lm_keys) lm_fetch(lm_k1, lm_buf ^ 1);\n" : "")
    << "    }\n"
    << "    lm_k0 = lm_k1;\n    lm_vis = lm_nvis;\n"
    << (hi_only ? "    lm_buf ^= 1;\n" : "")
    << "  }\n"
    // The key halves' partial sums and outputs: the second half's through shared memory.
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    lm_l[lm_a] += __shfl_xor_sync(0xffffffffu, lm_l[lm_a], 1);\n"
    << "    lm_l[lm_a] += __shfl_xor_sync(0xffffffffu, lm_l[lm_a], 2);\n  }\n"
    << "  float* lm_ox = (float*)lm_khi;\n"
    << "  __syncthreads();\n"
    << "  if (lm_kh == 1) {\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e)\n"
    << "        lm_ox[(lm_ra + 8 * (lm_e >> 1)) * lm_OW + 8 * lm_j + 2 * lm_tq + (lm_e & 1)] = lm_o[lm_j][lm_e];\n"
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
    << "        const float lm_x = (lm_o[lm_j][2 * lm_a + lm_e] + lm_ox[lm_rt * lm_OW + lm_col]) * lm_inv;\n"
    << "        ((" << storage_type(out_dtype) << "*)lm_out)[lm_row * lm_DV + lm_col] = " << store(out_dtype, convert("lm_x", DType::F32, out_dtype))
    << ";\n      }\n  }\n";
  return s.str();
}

// Two blocks per (batch entry, tile of kTiledKeys keys), the keys' and the values' (a prefill
// has few KV heads: one block for both left most SMs idle): their bf16 words (see
// prep_sizes), through the same strided reads the kernel did itself before: four lanes per
// key, each every fourth pair of head-dim elements; eight lanes per pair of keys (values), each
// every eighth column. Keys past the cached length are zeros, keys the view masks its pad value.
std::optional<std::string> tiled_attention_mma_prep(const Node& n, const std::vector<DType>& dt, bool hi_only) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const std::optional<MmaDims> d = mma_dims(n, *kv);
  if (!d) return std::nullopt;
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const std::string kpad = value_lit(n.inputs[1].view.pad_value(), dt[1]), vpad = value_lit(n.inputs[2].view.pad_value(), dt[2]);
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  std::ostringstream s;
  s << batch_shape_fn(*k, r)
    << "  constexpr int lm_DK = " << d->dk << ", lm_DV = " << d->dv << ";\n"
    << "  constexpr int lm_KI = lm_DK / 8, lm_VI = lm_DV / 8;  // pairs a thread converts\n"
    << "  const long long lm_keys = " << c(k->shape[r - 1]) << ";\n"
    << prep_sizes(n, r)
    << "  const long long lm_kt = lm_kpad / " << kTiledKeys << ", lm_blk = blockIdx.x >> 1;\n"
    << "  const long long lm_b = lm_blk / lm_kt, lm_k0 = (lm_blk - lm_b * lm_kt) * " << kTiledKeys << ";\n"
    << batch_coords(r)
    << "  const " << ks << "* lm_K = (const " << ks << "*)lm_in1;\n  const " << vs << "* lm_V = (const " << vs << "*)lm_in2;\n"
    << "  const long long lm_ksp = " << c(k->strides[r - 2]) << ", lm_vsj = " << c(v->strides[r - 1]) << ";\n"
    << "  unsigned* lm_khi = (unsigned*)lm_out + (lm_b * lm_kpad + lm_k0) * (lm_DK / 2);\n"
    << "  unsigned* lm_klo = lm_khi + lm_kw;\n"
    << "  unsigned* lm_vhi = (unsigned*)lm_out + " << (hi_only ? 1 : 2) << " * lm_kw + lm_b * lm_DV * (lm_kpad / 2) + lm_k0 / 2;\n"
    << "  unsigned* lm_vlo = lm_vhi + lm_vw;\n"
    << "  if ((blockIdx.x & 1) == 0) {\n    float lm_x[lm_KI][2];\n    const int lm_kk = threadIdx.x >> 2, lm_p0 = threadIdx.x & 3;\n"
    << tile_key(*k, r, r - 1, r - 2, "lm_kk", "    ")
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_KI; ++lm_j) {\n"
    << "      lm_x[lm_j][0] = " << tile_element("lm_K", dt[1], "2 * (lm_p0 + 4 * lm_j)", "lm_ksp", kpad) << ";\n"
    << "      lm_x[lm_j][1] = " << tile_element("lm_K", dt[1], "2 * (lm_p0 + 4 * lm_j) + 1", "lm_ksp", kpad) << ";\n    }\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_KI; ++lm_j)\n"
    << "      " << to_words(hi_only, "lm_x[lm_j][0]", "lm_x[lm_j][1]", "lm_khi[lm_kk * (lm_DK / 2) + lm_p0 + 4 * lm_j]", "lm_klo[lm_kk * (lm_DK / 2) + lm_p0 + 4 * lm_j]")
    << "\n    return;\n  }\n"
    << "  {\n    float lm_x[lm_VI][2];\n    const int lm_kp = threadIdx.x >> 3, lm_c0 = threadIdx.x & 7;\n"
    << "    #pragma unroll\n    for (int lm_h = 0; lm_h < 2; ++lm_h) {\n"
    << tile_key(*v, r, r - 2, r - 1, "2 * lm_kp + lm_h", "      ")
    << "      #pragma unroll\n      for (int lm_j = 0; lm_j < lm_VI; ++lm_j) lm_x[lm_j][lm_h] = "
    << tile_element("lm_V", dt[2], "lm_c0 + 8 * lm_j", "lm_vsj", vpad) << ";\n    }\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_VI; ++lm_j)\n"
    << "      " << to_words(hi_only, "lm_x[lm_j][0]", "lm_x[lm_j][1]", "lm_vhi[(lm_c0 + 8 * lm_j) * (lm_kpad / 2) + lm_kp]", "lm_vlo[(lm_c0 + 8 * lm_j) * (lm_kpad / 2) + lm_kp]")
    << "\n  }\n";
  return s.str();
}

Expr tiled_attention_mma_prep_words(const Node& n, bool hi_only) {
  const size_t r = n.inputs[0].view.rank();
  const int64_t dk = *n.inputs[0].view.shape()[r - 1].as_const(), dv = *n.inputs[2].view.shape()[r - 1].as_const();
  const Expr kpad = ceil_div(n.inputs[1].view.shape()[r - 1], Expr(kTiledKeys)) * Expr(kTiledKeys);
  return product_of(n.inputs[0].view.shape(), 0, r - 2) * kpad * Expr((dk / 2 + dv / 2) * (hi_only ? 1 : 2));
}

Expr tiled_attention_mma_shared_bytes(const Node& n) {
  const size_t r = n.inputs[0].view.rank();
  const MmaDims d{*n.inputs[0].view.shape()[r - 1].as_const(), *n.inputs[2].view.shape()[r - 1].as_const()};
  return Expr((2 * kTiledRows * qk_words(d.dk) + k_area_words(d) + 2 * d.dv * kVtWords + 2 * kTiledRows) * 4);
}

}  // namespace luminal::cuda::gen
