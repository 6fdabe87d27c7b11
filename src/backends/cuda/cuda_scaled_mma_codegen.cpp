// ScaledMatmul on the tensor cores (sm_80+): an MoE prefill's expert products as a grouped GEMM
// over each expert's listed rows. See scaled_mma_body in cuda_codegen_parts.h.
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

namespace {
// The product runs transposed on the tensor cores, Cᵀ = W Xᵀ: the weight's rows are the MMA's
// rows (its A operand, read as stored) and the expert's listed tokens its columns, in steps of 8,
// so a tile of few tokens wastes little. A block's tile is `cols` weight rows by kRows tokens,
// built `depth` values of k at a time. Each step's W (bf16) and X (f32) tiles are copied into
// shared memory `stages` - 1 steps ahead (cp.async), so a step's loads are in flight while the
// steps before run; X's tile is then split into bf16 hi + lo once, for all warps. Rows are
// padded (8 bf16, 4 floats) so that ldmatrix's eight row addresses fall in different banks.
// Eight warps, 4 (weight rows) x 2 (tokens), each cols / 4 x 32: m16n8k16 tiles, twice (hi, lo),
// or once with `hi_only` (X rounded to bf16).
// Warps whose tokens are all past the tile's listed rows skip their products.
constexpr int kRows = 64, kWindow = 2048;
struct Layout {
  int cols, depth, stages, pitch, pitch_x, stage_w, stage_x, shared, mt;
  explicit Layout(const ScaledMmaTile& t)
      : cols(t.cols), depth(t.depth), stages(t.stages), pitch(t.depth + 8), pitch_x(t.depth + 4), stage_w(t.cols * (t.depth + 8) * 2),
        stage_x(kRows * (t.depth + 4) * 4), shared(t.stages * (stage_w + stage_x) + 2 * kRows * (t.depth + 8) * 2), mt(t.cols / 64) {}
};
}  // namespace

// The copy of one operand's tile for step lm_st into its stage: `per_thread` 16-byte runs a
// thread, `runs` of them a row of `vals` values of `type`, rows `pitch` apart in `dst` (stages
// `stage` values apart); `ptrs` and `ok` are the thread's row pointers and whether each row
// exists. cp.async where rows are 16-byte aligned, else element by element.
static std::string copy_step_tile(const std::string& dst, const std::string& type, int per_thread, int runs, int vals, int pitch, int stage,
                                  const std::string& ptrs, const std::string& ok, int depth, const std::string& zero) {
  std::ostringstream s;
  s << "            #pragma unroll\n            for (int lm_h = 0; lm_h < " << per_thread << "; ++lm_h) {\n"
    << "              const int lm_q = threadIdx.x + " << kBlockThreads << " * lm_h, lm_ck = lm_q % " << runs << " * " << vals << ";\n"
    << "              const long long lm_k = lm_st * " << depth << " + lm_ck;\n"
    << "              " << type << "* lm_d = " << dst << " + lm_sg * " << stage << " + lm_q / " << runs << " * " << pitch << " + lm_ck;\n"
    << "              if (lm_vec) lm_cp_async16(lm_d, " << ok << "[lm_h] && lm_k < lm_kk ? " << ptrs << "[lm_h] + lm_k : " << ptrs << "[lm_h], " << ok
    << "[lm_h] && lm_k < lm_kk);\n"
    << "              else for (int lm_e = 0; lm_e < " << vals << "; ++lm_e) lm_d[lm_e] = " << ok << "[lm_h] && lm_k + lm_e < lm_kk ? " << ptrs
    << "[lm_h][lm_k + lm_e] : " << zero << ";\n"
    << "            }\n";
  return s.str();
}

std::optional<std::string> scaled_mma_body(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const std::vector<DType>& dt,
                                           const std::string& count_decl,
                                           const std::function<std::string(const std::string&, DType)>& out_store, DType out,
                                           const ScaledMmaTile& tile, bool hi_only) {
  const Layout L(tile);
  if (L.cols % 64 || L.depth % 32 || L.stages < 2) return std::nullopt;
  const int kCols = L.cols, kDepth = L.depth, kStages = L.stages, kPitch = L.pitch, kPitchX = L.pitch_x, kStageW = L.stage_w,
            kStageX = L.stage_x, MT = L.mt;
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || !scale || r < 2 || b->shape.size() != r || scale->shape.size() != r || dt.size() < 3) return std::nullopt;
  if (dt[0] != DType::F32 || dt[1] != DType::BF16 || dt[2] != DType::F32 || out != DType::F32) return std::nullopt;
  if (!a->strides[r - 1].is_const(1) || !b->strides[r - 2].is_const(1)) return std::nullopt;
  static_assert(kBlockThreads == 256, "the warp layout and copy assignments below are for eight warps");
  const int parts = hi_only ? 1 : 2;  // of X: hi, or hi and lo
  const int WR = kDepth / 8, WC = kCols * WR / kBlockThreads, XR = kDepth / 4, XC = kRows * XR / kBlockThreads;
  std::ostringstream s;
  s << count_decl << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_kk = " << c(a->shape[r - 1]) << ", lm_n = " << c(b->shape[r - 1])
    << ";\n  if (lm_m <= 0 || lm_n <= 0) return;\n"
    << "  const long long lm_batches = lm_count / (lm_m * lm_n), lm_ctiles = (lm_n + " << kCols - 1 << ") / " << kCols
    << ", lm_steps = (lm_kk + " << kDepth - 1 << ") / " << kDepth << ";\n"
    << "  extern __shared__ __align__(16) unsigned char lm_dyn[];  // kStages x (W bf16, X f32), then X's hi and lo\n"
    << "  uint16_t* const lm_sw = (uint16_t*)lm_dyn;\n"
    << "  float* const lm_sx = (float*)(lm_dyn + " << kStages * kStageW << ");\n"
    << "  uint16_t* const lm_sh = (uint16_t*)(lm_dyn + " << kStages * (kStageW + kStageX) << ");\n"
    << "  uint16_t* const lm_sl = lm_sh + " << kRows * kPitch << ";\n"
    << "  __shared__ int lm_rl[" << kWindow << "];\n  __shared__ unsigned lm_rbits[" << kWindow / 32 << "];\n"
    << "  __shared__ int lm_wcnt[" << kBlockThreads / 32 << "];\n"
    << "  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31, lm_gq = lm_lane >> 2, lm_tq = lm_lane & 3;\n"
    << "  const int lm_ww = lm_warp & 3, lm_wt = lm_warp >> 2;\n"
    << "  const long long lm_as = " << c(a->strides[r - 2]) << ", lm_bs = " << c(b->strides[r - 1]) << ", lm_srs = " << c(scale->strides[r - 2])
    << ";\n"
    << "  for (long long lm_item = blockIdx.x; lm_item < lm_batches * lm_ctiles; lm_item += gridDim.x) {\n"
    << "    const long long lm_b = lm_item / lm_ctiles, lm_j0 = (lm_item % lm_ctiles) * " << kCols << ";\n"
    << "    long long lm_ao = " << c(a->offset) << ", lm_bo = " << c(b->offset) << ", lm_so = " << c(scale->offset) << ";\n"
    << batch_offsets(a, b, scale, "    ")
    << "    const float* lm_X = (const float*)lm_in0 + lm_ao;\n"
    << "    const uint16_t* lm_W = (const uint16_t*)lm_in1 + lm_bo;\n"
    << "    const float* lm_S = (const float*)lm_in2 + lm_so;\n"
    // 16-byte copies where rows allow (every real model); element by element otherwise.
    << "    const bool lm_vec = ((lm_ao | lm_as | lm_kk) & 3) == 0 && ((lm_bo | lm_bs | lm_kk) & 7) == 0;\n"
    // Rows in windows of kWindow: each lists the rows with a nonzero scale, in order.
    << "    for (long long lm_w0 = 0; lm_w0 < lm_m; lm_w0 += " << kWindow << ") {\n"
    << "      const long long lm_wl = lm_m - lm_w0 < " << kWindow << " ? lm_m - lm_w0 : " << kWindow << ";\n"
    << "      __syncthreads();  // every thread is done with the last listing\n      int lm_nr = 0;\n"
    << "      for (long long lm_c0 = 0; lm_c0 < lm_wl; lm_c0 += blockDim.x) {\n"
    << "        const long long lm_cr = lm_c0 + threadIdx.x;\n"
    << "        const bool lm_on = lm_cr < lm_wl && lm_S[(lm_w0 + lm_cr) * lm_srs] != 0.0f;\n"
    << append_listed("        ", "lm_cr", "lm_wl", "lm_rbits", "lm_rl", "lm_nr") << "      }\n"
    << "      const int lm_nrb = lm_nr;\n"
    << "      for (int lm_t0 = 0; lm_t0 < lm_nrb; lm_t0 += " << kRows << ") {\n"
    // This warp's listed tokens in the tile (its MMA columns): none, or up to 32.
    << "        const int lm_vt = lm_nrb - lm_t0 - lm_wt * 32;\n"
    << "        float lm_acc[" << MT << "][4][4] = {};\n"
    // Each thread copies WC 16-byte runs of W (row q / WR) and XC of X (token q / XR) a step.
    << "        const uint16_t* lm_wp[" << WC << "];\n        const float* lm_xp[" << XC << "];\n        bool lm_wok[" << WC << "], lm_xok[" << XC << "];\n"
    << "        #pragma unroll\n        for (int lm_h = 0; lm_h < " << WC << "; ++lm_h) {\n"
    << "          const int lm_q = threadIdx.x + " << kBlockThreads << " * lm_h;\n"
    << "          lm_wok[lm_h] = lm_j0 + lm_q / " << WR << " < lm_n;\n"
    << "          lm_wp[lm_h] = lm_W + (lm_j0 + (lm_wok[lm_h] ? lm_q / " << WR << " : 0)) * lm_bs;\n"
    << "        }\n"
    << "        #pragma unroll\n        for (int lm_h = 0; lm_h < " << XC << "; ++lm_h) {\n"
    << "          const int lm_q = threadIdx.x + " << kBlockThreads << " * lm_h;\n"
    << "          lm_xok[lm_h] = lm_t0 + lm_q / " << XR << " < lm_nrb;\n"
    << "          lm_xp[lm_h] = lm_X + (lm_w0 + lm_rl[lm_xok[lm_h] ? lm_t0 + lm_q / " << XR << " : lm_t0]) * lm_as;\n"
    << "        }\n"
    // Step st's tiles into stage st % kStages: cp.async (zero-filled past k, the rows and the
    // tokens), or loads and stores where rows are not 16-byte aligned. Always one commit group.
    << "        auto lm_issue = [&](long long lm_st) {\n"
    << "          if (lm_st < lm_steps) {\n"
    << "            const int lm_sg = (int)(lm_st % " << kStages << ");\n"
    << copy_step_tile("lm_sw", "uint16_t", WC, WR, 8, kPitch, kCols * kPitch, "lm_wp", "lm_wok", kDepth, "(uint16_t)0")
    << copy_step_tile("lm_sx", "float", XC, XR, 4, kPitchX, kRows * kPitchX, "lm_xp", "lm_xok", kDepth, "0.0f")
    << "          }\n"
    << "          lm_cp_async_commit();\n"
    << "        };\n"
    << "        for (int lm_st = 0; lm_st < " << kStages - 1 << "; ++lm_st) lm_issue(lm_st);\n"
    << "        for (long long lm_st = 0; lm_st < lm_steps; ++lm_st) {\n"
    << "          lm_cp_async_wait<" << kStages - 2 << ">();\n"
    << "          __syncthreads();  // step st's tiles are in; step st - 1's fragments are read\n"
    // Split this step's X once: thread t takes token t / 4, values 8 (t % 4) + 32 g on.
    << "          #pragma unroll\n          for (int lm_g = 0; lm_g < " << kDepth / 32 << "; ++lm_g) {\n"
    << "            const int lm_r = threadIdx.x >> 2, lm_k0 = (threadIdx.x & 3) * 8 + lm_g * 32;\n"
    << "            const float* lm_x = lm_sx + (int)(lm_st % " << kStages << ") * " << kRows * kPitchX << " + lm_r * " << kPitchX << " + lm_k0;\n"
    << "            const float4 lm_x0 = *(const float4*)lm_x, lm_x1 = *(const float4*)(lm_x + 4);\n"
    << (hi_only ? "            const uint4 lm_hi = make_uint4(lm_pack_bf16(lm_x0.x, lm_x0.y), lm_pack_bf16(lm_x0.z, lm_x0.w), "
                  "lm_pack_bf16(lm_x1.x, lm_x1.y), lm_pack_bf16(lm_x1.z, lm_x1.w));\n"
                : "            uint4 lm_hi, lm_lo;\n"
                  "            lm_split_bf16(lm_x0.x, lm_x0.y, lm_hi.x, lm_lo.x); lm_split_bf16(lm_x0.z, lm_x0.w, lm_hi.y, lm_lo.y);\n"
                  "            lm_split_bf16(lm_x1.x, lm_x1.y, lm_hi.z, lm_lo.z); lm_split_bf16(lm_x1.z, lm_x1.w, lm_hi.w, lm_lo.w);\n")
    << "            *(uint4*)(lm_sh + lm_r * " << kPitch << " + lm_k0) = lm_hi;\n"
    << (hi_only ? "" : "            *(uint4*)(lm_sl + lm_r * " + std::to_string(kPitch) + " + lm_k0) = lm_lo;\n")
    << "          }\n"
    << "          lm_issue(lm_st + " << kStages - 1 << ");  // into the stage step st - 1 used\n"
    << "          __syncthreads();  // hi and lo are in\n"
    << "          if (lm_vt > 0) {\n"
    << "            const uint16_t* lm_tw = lm_sw + (int)(lm_st % " << kStages << ") * " << kCols * kPitch << ";\n"
    << "            #pragma unroll\n"
    << "            for (int lm_ks = 0; lm_ks < " << kDepth << "; lm_ks += 16) {\n"
    << "              unsigned lm_fa[" << MT << "][4], lm_fb[" << parts << "][4][2];\n"
    << "              #pragma unroll\n"
    << "              for (int lm_mt = 0; lm_mt < " << MT << "; ++lm_mt)\n"
    << "                lm_ldmatrix_x4(lm_fa[lm_mt], lm_tw + (lm_ww * " << 16 * MT << " + lm_mt * 16 + (lm_lane & 15)) * " << kPitch << " + lm_ks + (lm_lane >> 4) * 8);\n"
    << "              #pragma unroll\n"
    << "              for (int lm_pt = 0; lm_pt < " << parts << "; ++lm_pt)\n"
    << "                #pragma unroll\n"
    << "                for (int lm_np = 0; lm_np < 2; ++lm_np) {\n"
    << "                  unsigned lm_q4[4];\n"
    << "                  if (lm_np * 16 < lm_vt)\n"
    << "                    lm_ldmatrix_x4(lm_q4, (lm_pt ? lm_sl : lm_sh) + (lm_wt * 32 + lm_np * 16 + (lm_lane & 7) + ((lm_lane >> 4) << 3)) * " << kPitch
    << " + lm_ks + ((lm_lane >> 3) & 1) * 8);\n"
    << "                  lm_fb[lm_pt][2 * lm_np][0] = lm_q4[0]; lm_fb[lm_pt][2 * lm_np][1] = lm_q4[1];\n"
    << "                  lm_fb[lm_pt][2 * lm_np + 1][0] = lm_q4[2]; lm_fb[lm_pt][2 * lm_np + 1][1] = lm_q4[3];\n"
    << "                }\n"
    << "              #pragma unroll\n"
    << "              for (int lm_nt = 0; lm_nt < 4; ++lm_nt) {\n"
    << "                if (lm_nt * 8 >= lm_vt) break;\n"
    << "                #pragma unroll\n"
    << "                for (int lm_mt = 0; lm_mt < " << MT << "; ++lm_mt) {\n"
    << "                  lm_mma_bf16(lm_acc[lm_mt][lm_nt], lm_fa[lm_mt], lm_fb[0][lm_nt]);\n"
    << (hi_only ? "" : "                  lm_mma_bf16(lm_acc[lm_mt][lm_nt], lm_fa[lm_mt], lm_fb[1][lm_nt]);\n")
    << "                }\n"
    << "              }\n"
    << "            }\n"
    << "          }\n"
    << "        }\n"
    << "        lm_cp_async_wait<0>();  // nothing left in flight into the stages\n"
    // Accumulator e of tile (mt, nt) is weight row gq (+ 8 from e = 2) and token 2 tq (+ 1 for
    // odd e) of that tile.
    << "        #pragma unroll\n        for (int lm_nt = 0; lm_nt < 4; ++lm_nt)\n"
    << "          #pragma unroll\n          for (int lm_e = 0; lm_e < 2; ++lm_e) {\n"
    << "            const int lm_tk = lm_wt * 32 + lm_nt * 8 + lm_tq * 2 + lm_e;\n"
    << "            if (lm_t0 + lm_tk >= lm_nrb) continue;\n"
    << "            const long long lm_row = lm_w0 + lm_rl[lm_t0 + lm_tk];\n"
    << "            const float lm_scv = lm_S[lm_row * lm_srs];\n"
    << "            #pragma unroll\n            for (int lm_mt = 0; lm_mt < " << MT << "; ++lm_mt)\n"
    << "              #pragma unroll\n              for (int lm_hf = 0; lm_hf < 2; ++lm_hf) {\n"
    << "                const long long lm_j = lm_j0 + lm_ww * " << 16 * MT << " + lm_mt * 16 + lm_gq + lm_hf * 8;\n"
    << "                if (lm_j >= lm_n) continue;\n"
    << "                const float lm_v = lm_acc[lm_mt][lm_nt][lm_hf * 2 + lm_e] * lm_scv;\n"
    << "                const long long lm_z = (lm_b * lm_m + lm_row) * lm_n + lm_j; " << out_store("lm_z", DType::F32)
    << "              }\n"
    << "          }\n"
    << "      }\n"
    // The window's unlisted rows are zero in this tile's columns: a warp per row, 16-byte stores
    // (the output is f32 and contiguous; most rows of an MoE's experts are unlisted).
    << "      for (long long lm_cr = lm_warp; lm_cr < lm_wl; lm_cr += " << kBlockThreads / 32 << ") {\n"
    << "        if ((lm_rbits[lm_cr >> 5] >> (lm_cr & 31)) & 1u) continue;\n"
    << "        float* lm_o = (float*)lm_out + (lm_b * lm_m + lm_w0 + lm_cr) * lm_n + lm_j0;\n"
    << "        const int lm_cn = lm_n - lm_j0 < " << kCols << " ? (int)(lm_n - lm_j0) : " << kCols << ";\n"
    << "        int lm_c = 0;\n"
    << "        if ((reinterpret_cast<unsigned long long>(lm_o) & 15) == 0) {\n"
    << "          for (lm_c = lm_lane * 4; lm_c + 4 <= lm_cn; lm_c += 128) *(float4*)(lm_o + lm_c) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
    << "          lm_c = lm_cn & ~3;\n"
    << "        }\n"
    << "        for (lm_c += lm_lane; lm_c < lm_cn; lm_c += 32) lm_o[lm_c] = 0.0f;\n"
    << "      }\n"
    << "    }\n"
    << "  }\n";
  return s.str();
}

int scaled_mma_shared_bytes(const ScaledMmaTile& tile) { return Layout(tile).shared; }

Expr scaled_mma_threads(const std::vector<Expr>& a_shape, const Expr& n, const ScaledMmaTile& tile) {
  return product_of(a_shape, 0, a_shape.size() - 2) * ceil_div(n, Expr(tile.cols)) * Expr(kBlockThreads);
}

}  // namespace luminal::cuda::gen
