// Prefill attention on the tensor cores: a flash-style kernel (FlashAttention-2's layout) with
// both products, scores = q·kᵀ and out = p·v, as mma.sync m16n8k16 on bf16 parts, and its
// pre-pass (the keys and values as bf16 words, and a summary of the mask by tiles).
#include <algorithm>
#include <sstream>

#include "backends/cpu/fused_codegen.h"
#include "backends/cuda/cuda_attention_parts.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

namespace {

// Shared memory holds q, key tiles and value tiles as 32-bit words of two bf16 values (the mma
// operands' registers), read through ldmatrix: q and key rows of qk_words(dk) words, values
// transposed ([column][key pairs]) in rows of kVtWords. Row strides of 4 (mod 32) words put the
// eight 16-byte rows an ldmatrix phase reads in distinct banks.
int64_t qk_words(int64_t dk) { return dk / 2 + 4; }
constexpr int64_t kVtWords = kTiledKeys / 2 + 4;

struct MmaDims {
  int64_t dk, dv;
};

std::optional<MmaDims> mma_dims(const Node& n, const StridedKv& kv) {
  const size_t r = kv.r;
  const std::optional<int64_t> dk = n.inputs[0].view.shape()[r - 1].as_const(), dv = kv.v->shape[r - 1].as_const();
  if (!dk || !dv || *dk % 16 != 0 || *dv % 16 != 0 || *dk > kTiledMaxHeadDim || *dv > kTiledMmaMaxValueDim) return std::nullopt;
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
// K part and one V part, lm_kvwords all of them. After them the mask's summary for batch entry
// 0's rows: a byte per (row tile, key tile), 0 where no score of the tile is visible, 1 where
// every one is (its 64 rows exist, its 64 keys are below the keys' count, the mask passes
// each), 2 otherwise; then, from word lm_bitwords on, a tile's visible scores as the kernel's
// threads hold them (kTiledMmaThreads words a tile, see visible_bits_fn). Needs
// lm_keys, lm_DK and lm_DV.
std::string prep_sizes(const Node& n, size_t r, bool hi_only) {
  const std::string batches = c(product_of(n.inputs[0].view.shape(), 0, r - 2)), tile = std::to_string(kTiledKeys);
  return "  const long long lm_kpad = (lm_keys + " + tile + " - 1) / " + tile + " * " + tile + ";\n" +
         "  const long long lm_kw = " + batches + " * lm_kpad * (lm_DK / 2), lm_vw = " + batches + " * lm_DV * (lm_kpad / 2);\n" +
         "  const long long lm_kvwords = " + (hi_only ? "" : "2 * ") + "(lm_kw + lm_vw);\n" +
         "  const long long lm_seq = " + c(n.inputs[0].view.shape()[r - 2]) + ", lm_rtiles = (lm_seq + " + std::to_string(kTiledRows) + " - 1) / " +
         std::to_string(kTiledRows) + ", lm_ktiles = lm_kpad / " + tile + ";\n" +
         "  const long long lm_bitwords = lm_kvwords + (lm_rtiles * lm_ktiles + 3) / 4;\n";
}

// The visible scores of a tile that thread lm_th of the kernel holds, as bits: bit 4·j + e for
// accumulator element e of score tile j, that is row 16·(warp % 4) + g + 8·(e / 2) and key
// 32·(warp / 4) + 8·j + 2·tq + e % 2 of the tile at rows lm_r0 and keys lm_k0; lm_rb is the
// rows' batch base (lm_b · lm_seq).
std::string visible_bits_fn() {
  return "  auto lm_visible = [&](int lm_th, long long lm_r0, long long lm_rb, long long lm_k0) -> unsigned {\n"
         "    const int lm_vw = lm_th >> 5, lm_vtq = lm_th & 3;\n"
         "    const int lm_vr = 16 * (lm_vw & 3) + ((lm_th & 31) >> 2), lm_vk = 32 * (lm_vw >> 2) + 2 * lm_vtq;\n"
         "    unsigned lm_bits = 0;\n"
         "    #pragma unroll\n    for (int lm_h = 0; lm_h < 2; ++lm_h) {\n"
         "      const long long lm_row = lm_r0 + lm_vr + 8 * lm_h;\n"
         "      if (lm_row >= lm_seq) continue;\n"
         "      const long long lm_base = lm_mask_row(lm_rb + lm_row);\n"
         "      #pragma unroll\n      for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
         "        #pragma unroll\n        for (int lm_e = 0; lm_e < 2; ++lm_e) {\n"
         "          const long long lm_key = lm_k0 + lm_vk + 8 * lm_j + lm_e;\n"
         "          if (lm_key < lm_keys && lm_mask_at(lm_base, lm_key) != 0) lm_bits |= 1u << (4 * lm_j + 2 * lm_h + lm_e);\n"
         "        }\n    }\n    return lm_bits;\n  };\n";
}

// A tile's copies: CH 16-byte chunks over the block's threads, a constant number each; `body`
// copies chunk lm_i.
std::string chunk_loop(int64_t chunks, const std::string& body) {
  const int64_t each = (chunks + kTiledMmaThreads - 1) / kTiledMmaThreads;
  const bool exact = chunks % kTiledMmaThreads == 0;
  return "    #pragma unroll\n    for (int lm_u = 0; lm_u < " + std::to_string(each) + "; ++lm_u) {\n" +
         "      const int lm_i = threadIdx.x + " + std::to_string(kTiledMmaThreads) + " * lm_u;\n" +
         (exact ? "" : "      if (lm_i >= " + std::to_string(chunks) + ") break;\n") + body + "    }\n";
}

// Words of the shared layout: q, one key tile and one value tile, each as hi words (and lo
// words, unless hi_only). At the end the key and value area holds the second key half's
// outputs ([BM][dv + 4] floats) and row statistics (2 · BM floats).
int64_t shared_words(const MmaDims& d, bool hi_only) {
  const int64_t parts = hi_only ? 1 : 2;
  return parts * kTiledRows * qk_words(d.dk) +
         std::max(parts * (kTiledKeys * qk_words(d.dk) + d.dv * kVtWords), kTiledRows * (d.dv + 4) + 2 * kTiledRows);
}

// q's tile as bf16 hi (and lo) words: through q_row_index where it applies (four threads a row),
// else through q's loader, element by element.
std::string q_tile(const Node& n, DType t, int64_t dk, bool hi_only) {
  std::ostringstream s;
  if (std::optional<Expr> row = q_row_index(n.inputs[0].view, dk)) {
    s << "  #pragma unroll\n  for (int lm_h = 0; lm_h < lm_BM * 4 / " << kTiledMmaThreads << "; ++lm_h) {\n"
      << "    const int lm_row = (threadIdx.x >> 2) + lm_h * " << kTiledMmaThreads / 4 << ", lm_p0 = threadIdx.x & 3;\n"
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

// One block of eight warps per (batch entry, tile of 64 query rows), walking the keys in tiles
// of 64. Warp w owns rows 16·(w % 4) .. +16 and keys 32·(w / 4) .. +32 of each tile: its scores
// are four m16n8 accumulator tiles, which are also, unchanged, the A operand of its share of p·v
// (FlashAttention-2's register reuse), so probabilities stay in registers. The two warps of a
// row group each keep their own running maximum, sum and output over their key halves (a split
// of the keys inside the block: two warps a row group, as many warps as a prefill has to spread
// over the SMs, without waiting on each other every tile) and merge them once at the end.
// Fragments come from shared memory through ldmatrix, four 8x8 matrices an instruction.
//
// f32 operands are split into bf16 hi + lo and multiplied three times (hi·hi + hi·lo + lo·hi),
// which keeps each product to about 2^-16 of its size; the CUDA-core kernel's products are
// exact. With `hi_only` (bf16 activations) each operand is rounded to bf16 and multiplied once.
// Keys and values come as the pre-pass's words through cp.async into one key and one value
// buffer, pipelined as FlashAttention-2 does: a tile's values are copied while its scores are
// multiplied, the next tile's keys while its probabilities are made and multiplied.
//
// The mask is read only through the pre-pass's summary: tiles it hides are skipped, tiles it
// shows whole take every score, and a mixed tile's (a causal mask's diagonal) visible scores
// are one word a thread. The summary is of batch entry 0's rows; a block whose rows' mask
// bases differ from those (a mask that varies over the batch) reads the mask in every tile and
// skips those it hides from every row.
std::optional<std::string> tiled_attention_mma(const Node& n, const std::vector<DType>& dt, DType out_dtype, bool hi_only) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const std::optional<MmaDims> d = mma_dims(n, *kv);
  if (!d) return std::nullopt;
  static_assert(kTiledMmaThreads == 256 && kTiledRows == 64 && kTiledKeys == 64, "the warp layout below assumes these");
  const ViewLayer* k = kv->k;
  const size_t r = kv->r;
  const DType t = dt[0];
  const std::string parts = hi_only ? "1" : "2";
  std::ostringstream s;
  s << batch_shape_fn(*k, r) << mask_reader(n, dt[3], k->shape[r - 1])
    << "  extern __shared__ float lm_sh[];\n"
    << "  constexpr int lm_DK = " << d->dk << ", lm_DV = " << d->dv << ", lm_QPW = " << qk_words(d->dk) << ", lm_VPW = " << kVtWords << ";\n"
    << "  constexpr int lm_BM = 64, lm_BN = 64, lm_NT = lm_DV / 8, lm_OW = lm_DV + 4;\n"
    << "  unsigned* lm_qhi = (unsigned*)lm_sh;  // [BM][QPW], then lo alike\n"
    << "  unsigned* lm_qlo = lm_qhi + lm_BM * lm_QPW;\n"
    << "  unsigned* lm_khi = lm_qhi + " << parts << " * lm_BM * lm_QPW;  // [BN][QPW], then lo alike\n"
    << "  unsigned* lm_klo = lm_khi + lm_BN * lm_QPW;\n"
    << "  unsigned* lm_vhi = lm_khi + " << parts << " * lm_BN * lm_QPW;  // [DV][VPW]: values transposed; then lo alike\n"
    << "  unsigned* lm_vlo = lm_vhi + lm_DV * lm_VPW;\n"
    << "  const long long lm_keys = " << c(k->shape[r - 1]) << ";\n"
    << prep_sizes(n, r, hi_only)
    << "  const unsigned* lm_prep = (const unsigned*)lm_out1;  // the pre-pass's words\n"
    // Blocks go out row tile by row tile from the last (under a causal mask the longest).
    << "  const long long lm_nb = " << c(product_of(n.inputs[0].view.shape(), 0, r - 2)) << ";\n"
    << "  const long long lm_rt = lm_rtiles - 1 - blockIdx.x / lm_nb, lm_b = blockIdx.x % lm_nb, lm_r0 = lm_rt * lm_BM;\n"
    << q_tile(n, t, d->dk, hi_only)
    // Lane (g, tq) of warp (rg, kh) holds rows ra and ra + 8 of the tile, and in score tile j the
    // keys 32·kh + 8·j + 2·tq and the one after.
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_g = lm_lane >> 2, lm_tq = lm_lane & 3;\n"
    << "  const int lm_rg = lm_warp & 3, lm_kh = lm_warp >> 2, lm_ra = 16 * lm_rg + lm_g;\n"
    << "  bool lm_live[2], lm_same = true;\n"
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    const long long lm_row = lm_r0 + lm_ra + 8 * lm_a;\n"
    << "    lm_live[lm_a] = lm_row < lm_seq;\n"
    << "    if (lm_live[lm_a] && lm_mask_row(lm_b * lm_seq + lm_row) != lm_mask_row(lm_row)) lm_same = false;\n  }\n"
    << "  const float lm_ninf = __int_as_float((int)0xff800000u), lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
    << visible_bits_fn()
    // The summary serves this block where its rows read the mask where batch entry 0's do.
    << "  const bool lm_use = __syncthreads_and(lm_same);\n"
    << "  const unsigned char* lm_sum = (const unsigned char*)(lm_prep + lm_kvwords) + lm_rt * lm_ktiles;\n"
    << "  const unsigned* lm_bits = lm_prep + lm_bitwords + lm_rt * lm_ktiles * " << kTiledMmaThreads << " + threadIdx.x;\n"
    << "  const int lm_nt = (int)lm_ktiles;\n"
    << "  auto lm_next = [&](int lm_t) -> int {\n"
    << "    if (lm_use) while (lm_t < lm_nt && lm_sum[lm_t] == 0) ++lm_t;\n"
    << "    return lm_t;\n  };\n"
    // A tile's keys (values): 16-byte copies of the pre-pass's words into the shared layout,
    // one cp.async commit group.
    << "  const unsigned* lm_pk0 = lm_prep + lm_b * lm_kpad * (lm_DK / 2);\n"
    << "  const unsigned* lm_pv0 = lm_prep + " << parts << " * lm_kw + lm_b * lm_DV * (lm_kpad / 2);\n"
    << "  const int lm_vrow = (int)(lm_kpad / 2);\n"
    << "  auto lm_fetch_k = [&](int lm_t) {\n"
    << "    const unsigned* lm_pk = lm_pk0 + lm_t * (lm_BN * lm_DK / 2);\n"
    << chunk_loop(kTiledKeys * d->dk / 8,
                  "      const int lm_kk = lm_i / (lm_DK / 8), lm_c4 = 4 * (lm_i % (lm_DK / 8));\n"
                  "      lm_cp_async16(lm_khi + lm_kk * lm_QPW + lm_c4, lm_pk + lm_kk * (lm_DK / 2) + lm_c4, true);\n" +
                      std::string(hi_only ? "" : "      lm_cp_async16(lm_klo + lm_kk * lm_QPW + lm_c4, lm_pk + lm_kw + lm_kk * (lm_DK / 2) + lm_c4, true);\n"))
    << "    lm_cp_async_commit();\n  };\n"
    << "  auto lm_fetch_v = [&](int lm_t) {\n"
    << "    const unsigned* lm_pv = lm_pv0 + lm_t * (lm_BN / 2);\n"
    << chunk_loop(d->dv * kTiledKeys / 8,
                  "      const int lm_cc = lm_i / (lm_BN / 8), lm_c4 = 4 * (lm_i % (lm_BN / 8));\n"
                  "      lm_cp_async16(lm_vhi + lm_cc * lm_VPW + lm_c4, lm_pv + lm_cc * lm_vrow + lm_c4, true);\n" +
                      std::string(hi_only ? "" : "      lm_cp_async16(lm_vlo + lm_cc * lm_VPW + lm_c4, lm_pv + lm_vw + lm_cc * lm_vrow + lm_c4, true);\n"))
    << "    lm_cp_async_commit();\n  };\n"
    // ldmatrix addresses: lane l gives row l % 16 of the warp's 16 q rows at word 4·(l / 16) (the
    // A fragment's four matrices), and key (or value column) 8·(l / 16) + l % 8 at word
    // 4·(l / 8 % 2) (the B fragments of two adjacent n tiles).
    << "  const int lm_qrow = (16 * lm_rg + (lm_lane & 15)) * lm_QPW + 4 * (lm_lane >> 4);\n"
    << "  const int lm_brow = (lm_lane & 7) + ((lm_lane >> 4) << 3), lm_bw = 4 * ((lm_lane >> 3) & 1);\n"
    << "  float lm_m[2] = {lm_ninf, lm_ninf}, lm_l[2] = {0.0f, 0.0f}, lm_o[lm_NT][4];\n"
    << "  #pragma unroll\n  for (int lm_j = 0; lm_j < lm_NT; ++lm_j) lm_o[lm_j][0] = lm_o[lm_j][1] = lm_o[lm_j][2] = lm_o[lm_j][3] = 0.0f;\n"
    << "  int lm_t0 = lm_next(0);\n"
    << "  if (lm_t0 < lm_nt) lm_fetch_k(lm_t0);\n"
    << "  while (lm_t0 < lm_nt) {\n"
    << "    const int lm_t1 = lm_next(lm_t0 + 1);\n"
    << "    const int lm_cls = lm_use ? lm_sum[lm_t0] : 2;\n"
    << "    const unsigned lm_vis = lm_cls == 1 ? 0xffffu : lm_use ? lm_bits[lm_t0 * " << kTiledMmaThreads
    << "] : lm_visible(threadIdx.x, lm_r0, lm_b * lm_seq, (long long)lm_t0 * lm_BN);\n"
    << "    lm_cp_async_wait<0>();\n"
    // The tile's keys are in; every warp is done with the values before.
    << "    __syncthreads();\n"
    << "    if (!lm_use && !__syncthreads_or(lm_vis != 0)) {\n"
    << "      lm_t0 = lm_t1;\n      if (lm_t0 < lm_nt) lm_fetch_k(lm_t0);\n      continue;\n    }\n"
    << "    lm_fetch_v(lm_t0);\n"
    << "    float lm_s[4][4];\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j) lm_s[lm_j][0] = lm_s[lm_j][1] = lm_s[lm_j][2] = lm_s[lm_j][3] = 0.0f;\n"
    << "    #pragma unroll\n    for (int lm_ks = 0; lm_ks < lm_DK / 16; ++lm_ks) {\n"
    << "      unsigned lm_ah[4]" << (hi_only ? "" : ", lm_al[4]") << ";\n"
    << "      lm_ldmatrix_x4(lm_ah, lm_qhi + lm_qrow + 8 * lm_ks);\n"
    << (hi_only ? "" : "      lm_ldmatrix_x4(lm_al, lm_qlo + lm_qrow + 8 * lm_ks);\n")
    << "      #pragma unroll\n      for (int lm_jp = 0; lm_jp < 2; ++lm_jp) {\n"
    << "        const int lm_w = (32 * lm_kh + 16 * lm_jp + lm_brow) * lm_QPW + 8 * lm_ks + lm_bw;\n"
    << "        unsigned lm_bh[4];\n        lm_ldmatrix_x4(lm_bh, lm_khi + lm_w);\n"
    << (hi_only ? ""
                : "        unsigned lm_bl[4];\n        lm_ldmatrix_x4(lm_bl, lm_klo + lm_w);\n"
                  "        lm_mma_bf16(lm_s[2 * lm_jp], lm_al, lm_bh);\n        lm_mma_bf16(lm_s[2 * lm_jp], lm_ah, lm_bl);\n"
                  "        lm_mma_bf16(lm_s[2 * lm_jp + 1], lm_al, lm_bh + 2);\n        lm_mma_bf16(lm_s[2 * lm_jp + 1], lm_ah, lm_bl + 2);\n")
    << "        lm_mma_bf16(lm_s[2 * lm_jp], lm_ah, lm_bh);\n        lm_mma_bf16(lm_s[2 * lm_jp + 1], lm_ah, lm_bh + 2);\n"
    << "      }\n    }\n"
    // Every warp is done with the keys: the next tile's go in while this one's probabilities are
    // made and multiplied.
    << "    __syncthreads();\n"
    << "    if (lm_t1 < lm_nt) lm_fetch_k(lm_t1);\n"
    // Scale and mask; each row's max over the warp's keys (its quad of lanes), in a tree.
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) lm_s[lm_j][lm_e] = " << convert("lm_s[lm_j][lm_e]", DType::F32, t) << " * "
    << float_lit(n.constant) << ";\n"
    << "    if (lm_vis != 0xffffu) {\n"
    << "      #pragma unroll\n      for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "        #pragma unroll\n        for (int lm_e = 0; lm_e < 4; ++lm_e)\n"
    << "          if (!((lm_vis >> (4 * lm_j + lm_e)) & 1u)) lm_s[lm_j][lm_e] = lm_ninf;\n    }\n"
    << "    float lm_tmax[2];\n"
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "      const float lm_x0 = lm_max_nan(lm_max_nan(lm_s[0][2 * lm_a], lm_s[0][2 * lm_a + 1]), lm_max_nan(lm_s[1][2 * lm_a], lm_s[1][2 * lm_a + 1]));\n"
    << "      const float lm_x1 = lm_max_nan(lm_max_nan(lm_s[2][2 * lm_a], lm_s[2][2 * lm_a + 1]), lm_max_nan(lm_s[3][2 * lm_a], lm_s[3][2 * lm_a + 1]));\n"
    << "      lm_tmax[lm_a] = lm_max_nan(lm_x0, lm_x1);\n    }\n"
    // exp2(x·log2e − m·log2e) as one FMA and ex2: hidden scores (−inf) give 0, and a row with
    // nothing visible yet subtracts 0, not −inf.
    << "    float lm_alpha[2], lm_nm[2];\n"
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "      lm_tmax[lm_a] = lm_max_nan(lm_tmax[lm_a], __shfl_xor_sync(0xffffffffu, lm_tmax[lm_a], 1));\n"
    << "      lm_tmax[lm_a] = lm_max_nan(lm_tmax[lm_a], __shfl_xor_sync(0xffffffffu, lm_tmax[lm_a], 2));\n"
    << "      const float lm_mn = lm_max_nan(lm_m[lm_a], lm_tmax[lm_a]);\n"
    << "      lm_alpha[lm_a] = lm_m[lm_a] == lm_ninf ? 0.0f : exp2f((lm_m[lm_a] + lm_mn * -1.0f) * lm_log2e);\n"
    << "      lm_m[lm_a] = lm_mn;\n      lm_l[lm_a] *= lm_alpha[lm_a];\n"
    << "      lm_nm[lm_a] = lm_mn == lm_ninf ? 0.0f : lm_mn * -lm_log2e;\n    }\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < 4; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        lm_s[lm_j][lm_e] = exp2f(fmaf(lm_s[lm_j][lm_e], lm_log2e, lm_nm[lm_e >> 1]));\n"
    << "        lm_l[lm_e >> 1] += lm_s[lm_j][lm_e];\n      }\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j) {\n"
    << "      lm_o[lm_j][0] *= lm_alpha[0]; lm_o[lm_j][1] *= lm_alpha[0]; lm_o[lm_j][2] *= lm_alpha[1]; lm_o[lm_j][3] *= lm_alpha[1];\n    }\n"
    // The values are in (the next keys may still be in flight).
    << "    if (lm_t1 < lm_nt) lm_cp_async_wait<1>(); else lm_cp_async_wait<0>();\n"
    << "    __syncthreads();\n"
    // out += p·v over the warp's 32 keys: two k16 steps, score tiles 2·ks and 2·ks + 1 as A.
    << "    #pragma unroll\n    for (int lm_ks = 0; lm_ks < 2; ++lm_ks) {\n"
    << "      unsigned lm_ph[4]" << (hi_only ? "" : ", lm_pl[4]") << ";\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks][0]", "lm_s[2 * lm_ks][1]", "lm_ph[0]", "lm_pl[0]") << "\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks][2]", "lm_s[2 * lm_ks][3]", "lm_ph[1]", "lm_pl[1]") << "\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks + 1][0]", "lm_s[2 * lm_ks + 1][1]", "lm_ph[2]", "lm_pl[2]") << "\n"
    << "      " << to_words(hi_only, "lm_s[2 * lm_ks + 1][2]", "lm_s[2 * lm_ks + 1][3]", "lm_ph[3]", "lm_pl[3]") << "\n"
    << "      #pragma unroll\n      for (int lm_jp = 0; lm_jp < lm_NT / 2; ++lm_jp) {\n"
    << "        const int lm_w = (16 * lm_jp + lm_brow) * lm_VPW + 16 * lm_kh + 8 * lm_ks + lm_bw;\n"
    << "        unsigned lm_bh[4];\n        lm_ldmatrix_x4(lm_bh, lm_vhi + lm_w);\n"
    << (hi_only ? ""
                : "        unsigned lm_bl[4];\n        lm_ldmatrix_x4(lm_bl, lm_vlo + lm_w);\n"
                  "        lm_mma_bf16(lm_o[2 * lm_jp], lm_pl, lm_bh);\n        lm_mma_bf16(lm_o[2 * lm_jp], lm_ph, lm_bl);\n"
                  "        lm_mma_bf16(lm_o[2 * lm_jp + 1], lm_pl, lm_bh + 2);\n        lm_mma_bf16(lm_o[2 * lm_jp + 1], lm_ph, lm_bl + 2);\n")
    << "        lm_mma_bf16(lm_o[2 * lm_jp], lm_ph, lm_bh);\n        lm_mma_bf16(lm_o[2 * lm_jp + 1], lm_ph, lm_bh + 2);\n"
    << "      }\n    }\n"
    << "    lm_t0 = lm_t1;\n"
    << "  }\n"
    // Merge the key halves: the second half's sums, maxima and outputs through shared memory
    // (the key and value area), scaled to the common maximum.
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    lm_l[lm_a] += __shfl_xor_sync(0xffffffffu, lm_l[lm_a], 1);\n"
    << "    lm_l[lm_a] += __shfl_xor_sync(0xffffffffu, lm_l[lm_a], 2);\n  }\n"
    << "  float* lm_ox = (float*)lm_khi;  // [BM][OW]\n"
    << "  float* lm_xm = lm_ox + lm_BM * lm_OW;  // [BM] maxima, then [BM] sums\n"
    << "  __syncthreads();\n"
    << "  if (lm_kh == 1) {\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 4; ++lm_e)\n"
    << "        lm_ox[(lm_ra + 8 * (lm_e >> 1)) * lm_OW + 8 * lm_j + 2 * lm_tq + (lm_e & 1)] = lm_o[lm_j][lm_e];\n"
    << "    if (lm_tq == 0) {\n"
    << "      lm_xm[lm_ra] = lm_m[0]; lm_xm[lm_ra + 8] = lm_m[1];\n"
    << "      lm_xm[lm_BM + lm_ra] = lm_l[0]; lm_xm[lm_BM + lm_ra + 8] = lm_l[1];\n    }\n  }\n"
    << "  __syncthreads();\n"
    << "  if (lm_kh == 1) return;\n"
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < 2; ++lm_a) {\n"
    << "    if (!lm_live[lm_a]) continue;\n"
    << "    const int lm_rt2 = lm_ra + 8 * lm_a;\n"
    << "    const float lm_m1 = lm_xm[lm_rt2], lm_mt = lm_max_nan(lm_m[lm_a], lm_m1);\n"
    << "    const float lm_c0 = lm_m[lm_a] == lm_ninf ? 0.0f : exp2f((lm_m[lm_a] + lm_mt * -1.0f) * lm_log2e);\n"
    << "    const float lm_c1 = lm_m1 == lm_ninf ? 0.0f : exp2f((lm_m1 + lm_mt * -1.0f) * lm_log2e);\n"
    << "    const float lm_inv = 1.0f / (lm_l[lm_a] * lm_c0 + lm_xm[lm_BM + lm_rt2] * lm_c1);\n"
    << "    const long long lm_row = lm_b * lm_seq + lm_r0 + lm_rt2;\n"
    << "    #pragma unroll\n    for (int lm_j = 0; lm_j < lm_NT; ++lm_j)\n"
    << "      #pragma unroll\n      for (int lm_e = 0; lm_e < 2; ++lm_e) {\n"
    << "        const int lm_col = 8 * lm_j + 2 * lm_tq + lm_e;\n"
    << "        const float lm_x = (lm_o[lm_j][2 * lm_a + lm_e] * lm_c0 + lm_ox[lm_rt2 * lm_OW + lm_col] * lm_c1) * lm_inv;\n"
    << "        ((" << storage_type(out_dtype) << "*)lm_out)[lm_row * lm_DV + lm_col] = "
    << store(out_dtype, convert("lm_x", DType::F32, out_dtype)) << ";\n      }\n  }\n";
  return s.str();
}

// Blocks of the pre-pass: two per (batch entry, tile of kTiledKeys keys), the keys' and the
// values' (a prefill has few KV heads: one block for both left most SMs idle), their bf16 words
// (see prep_sizes), through strided reads: four lanes per key, each every fourth pair of
// head-dim elements; eight lanes per pair of keys (values), each every eighth column. Keys past
// the cached length are zeros, keys the view masks its pad value. Then one block per (row tile,
// key tile) of batch entry 0 for the mask's summary and visible scores (see prep_sizes).
std::optional<std::string> tiled_attention_mma_prep(const Node& n, const std::vector<DType>& dt, bool hi_only) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const std::optional<MmaDims> d = mma_dims(n, *kv);
  if (!d) return std::nullopt;
  static_assert(kBlockThreads == kTiledMmaThreads, "the summary's threads below are the kernel's");
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const std::string kpad = value_lit(n.inputs[1].view.pad_value(), dt[1]), vpad = value_lit(n.inputs[2].view.pad_value(), dt[2]);
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  std::ostringstream s;
  s << batch_shape_fn(*k, r) << mask_reader(n, dt[3], k->shape[r - 1])
    << "  constexpr int lm_DK = " << d->dk << ", lm_DV = " << d->dv << ";\n"
    << "  constexpr int lm_KI = lm_DK / 8, lm_VI = lm_DV / 8;  // pairs a thread converts\n"
    << "  const long long lm_keys = " << c(k->shape[r - 1]) << ";\n"
    << prep_sizes(n, r, hi_only)
    << "  const long long lm_kvblocks = 2 * " << c(product_of(n.inputs[0].view.shape(), 0, r - 2)) << " * lm_ktiles;\n"
    << visible_bits_fn()
    // Thread th takes the kernel's thread th's visible scores.
    << "  if (blockIdx.x >= lm_kvblocks) {\n"
    << "    const long long lm_i = blockIdx.x - lm_kvblocks, lm_rt = lm_i / lm_ktiles, lm_k0 = (lm_i - lm_rt * lm_ktiles) * " << kTiledKeys << ";\n"
    << "    const unsigned lm_v = lm_visible(threadIdx.x, lm_rt * " << kTiledRows << ", 0, lm_k0);\n"
    << "    const bool lm_any = __syncthreads_or(lm_v != 0), lm_all = __syncthreads_and(lm_v == 0xffffu);\n"
    << "    ((unsigned*)lm_out)[lm_bitwords + lm_i * " << kTiledMmaThreads << " + threadIdx.x] = lm_v;\n"
    << "    if (threadIdx.x == 0) ((unsigned char*)((unsigned*)lm_out + lm_kvwords))[lm_i] = lm_any ? (lm_all ? 1 : 2) : 0;\n"
    << "    return;\n  }\n"
    << "  const long long lm_blk = blockIdx.x >> 1;\n"
    << "  const long long lm_b = lm_blk / lm_ktiles, lm_k0 = (lm_blk - lm_b * lm_ktiles) * " << kTiledKeys << ";\n"
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

namespace {

Expr row_tiles(const Node& n) {
  const size_t r = n.inputs[0].view.rank();
  return ceil_div(n.inputs[0].view.shape()[r - 2], Expr(kTiledRows));
}
Expr key_tiles(const Node& n) {
  const size_t r = n.inputs[0].view.rank();
  return ceil_div(n.inputs[1].view.shape()[r - 1], Expr(kTiledKeys));
}

}  // namespace

Expr tiled_attention_mma_prep_words(const Node& n, bool hi_only) {
  const size_t r = n.inputs[0].view.rank();
  const int64_t dk = *n.inputs[0].view.shape()[r - 1].as_const(), dv = *n.inputs[2].view.shape()[r - 1].as_const();
  const Expr kpad = key_tiles(n) * Expr(kTiledKeys);
  return product_of(n.inputs[0].view.shape(), 0, r - 2) * kpad * Expr((dk / 2 + dv / 2) * (hi_only ? 1 : 2)) +
         ceil_div(row_tiles(n) * key_tiles(n), Expr(4)) + row_tiles(n) * key_tiles(n) * Expr(kTiledMmaThreads);
}

Expr tiled_attention_mma_prep_blocks(const Node& n) {
  const size_t r = n.inputs[0].view.rank();
  return (Expr(2) * product_of(n.inputs[0].view.shape(), 0, r - 2) + row_tiles(n)) * key_tiles(n);
}

Expr tiled_attention_mma_shared_bytes(const Node& n, bool hi_only) {
  const size_t r = n.inputs[0].view.rank();
  const MmaDims d{*n.inputs[0].view.shape()[r - 1].as_const(), *n.inputs[2].view.shape()[r - 1].as_const()};
  return Expr(shared_words(d, hi_only) * 4);
}

}  // namespace luminal::cuda::gen
