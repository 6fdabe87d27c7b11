// An MoE decode's experts in one kernel: gate/up, their gated product and the sum of the down
// products (see experts_in_one_body in cuda_codegen_parts.h).
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

// The kernel's warps, and the rows of a 16-row chunk each takes of an expert past the stage.
constexpr int kWarps = kBlockThreads / 32, kRowsPerWarp = 16 / kWarps;
static_assert(16 % kWarps == 0, "a chunk's 16 rows shared evenly by the warps");

std::optional<std::string> experts_in_one_body(const ExpertsInOne& x) {
  const ViewLayer *a = x.a, *gb = x.gate_up, *gs = x.gate_up_scale, *db = x.down, *ds = x.down_scale;
  if (!a || !gb || !gs || !db || !ds) return std::nullopt;
  for (const ViewLayer* l : {a, gb, gs, db, ds})
    if (l->shape.size() != 3) return std::nullopt;
  const std::optional<int64_t> E = a->shape[0].as_const(), H = a->shape[2].as_const(), I2 = gb->shape[2].as_const(), I = db->shape[1].as_const(),
                               N = db->shape[2].as_const();
  // Up to 256 experts: their list and scales (12 bytes each) share the SM with the stage.
  if (!E || !H || !I2 || !I || !N || *E < 1 || *E > 256 || *I2 != 2 * *I || *H % 8 != 0 || *I % 8 != 0 || *N < 1) return std::nullopt;
  // x shared by every expert, read along k; weights with unit stride along k and 16-byte aligned
  // rows; the down weight's rows adjacent (one bulk copy a chosen expert); scales constant along k.
  if (!a->strides[0].is_const(0) || !a->strides[2].is_const(1)) return std::nullopt;
  if (!gb->strides[1].is_const(1) || !multiple_of(gb->strides[2], 8) || !multiple_of(gb->strides[0], 8) || !multiple_of(gb->offset, 8))
    return std::nullopt;
  if (!db->strides[1].is_const(1) || !db->strides[2].is_const(*I) || !multiple_of(db->strides[0], 8) || !multiple_of(db->offset, 8))
    return std::nullopt;
  if (!gs->strides[2].is_const(0) || !ds->strides[2].is_const(0)) return std::nullopt;
  const int64_t x_bytes = (*H * 4 + 127) / 128 * 128, stage_bytes = kExpertsInOneSharedBytes - x_bytes;
  if (stage_bytes < 16 * 1024) return std::nullopt;  // x alone would fill shared memory
  // x's values a thread keeps in registers while the experts are listed, and h's a lane keeps
  // for its expert's down rows (8 a chunk): bounded so that neither spills.
  const int64_t x_per_thread = (*H + kBlockThreads - 1) / kBlockThreads, h_chunks = (*I + 255) / 256;
  if (x_per_thread > 32 || h_chunks > 8) return std::nullopt;
  const NormPrologue* norm = x.norm;
  const bool gain = norm && norm->gain, gain_bf16 = gain && norm->gain_dtype == DType::BF16;
  if (gain && norm->gain_dtype != DType::F32 && !gain_bf16) return std::nullopt;
  const std::string GSO = c(gs->offset), GS0 = c(gs->strides[0]), DSO = c(ds->offset), DS0 = c(ds->strides[0]);
  const std::string down_rows = "(const uint16_t*)lm_db + " + c(db->offset) + " + lm_act[lm_t] * " + c(db->strides[0]) + " + lm_j0 * lm_h";
  std::ostringstream s;
  s << "  const long long lm_E = " << *E << ", lm_m = " << c(a->shape[1]) << ", lm_kk = " << *H << ", lm_h = " << *I << ", lm_n = " << *N << ";\n"
    << "  if (lm_m != 1) __trap();  // the executor runs it for one token's row alone\n"
    << "  extern __shared__ __align__(128) unsigned char lm_dyn[];\n"
    << "  float* lm_xv = (float*)lm_dyn;  // x (times the norm's gain)\n"
    << "  unsigned char* lm_stage = lm_dyn + " << x_bytes << ";  // the block's down rows of the first chosen experts\n"
    << "  __shared__ int lm_act[" << *E << "];\n"
    << "  __shared__ unsigned lm_on_bits[" << (*E + 31) / 32 << "];\n"
    << "  __shared__ int lm_wcnt[" << kBlockThreads / 32 << "];\n"
    << "  __shared__ float lm_gse[" << *E << "], lm_dse[" << *E << "];  // the scales, by expert\n"
    << "  __shared__ float lm_part[" << kBlockThreads / 32 << "][16];\n"
    << "  __shared__ __align__(8) unsigned long long lm_bar;\n"
    << "  float* lm_hs = (float*)lm_out1;  // [chosen, h]: the gated products, for every block's down rows\n"
    << "  unsigned* lm_sync = (unsigned*)lm_out2;  // the grid barrier's count and generation\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_warps = blockDim.x >> 5;\n"
    // 1. x's values (and the gain's) into registers, their loads in flight with the scales' below:
    // one wait on L2 for all. (Loads issued after the bulk copies below would queue behind the
    // block's 200 KB; the gain's loaded in step 3's loop, which may stop early, went out one
    // round trip at a time: 8 in a row, read in the SASS.)
    << "  float lm_xr[" << x_per_thread << "], lm_gr[" << x_per_thread << "];\n"
    << "  #pragma unroll\n"
    << "  for (int lm_i = 0; lm_i < " << x_per_thread << "; ++lm_i) {\n"
    << "    const long long lm_k = threadIdx.x + lm_i * " << kBlockThreads << ";\n"
    << "    lm_xr[lm_i] = lm_k < lm_kk ? ((const float*)lm_ga)[" << c(a->offset) << " + lm_k] : 0.0f;\n";
  if (gain)
    s << "    lm_gr[lm_i] = lm_k < lm_kk ? " << (gain_bf16 ? "lm_bf16_f32(((const uint16_t*)lm_gain)[" : "(((const float*)lm_gain)[")
      << c(norm->gain_offset) << " + lm_k]) : 0.0f;\n";
  s << "  }\n"
    // 2. The experts row 0 chooses (a nonzero gate/up or down scale), in order, and their scales.
    << "  int lm_nact = 0;\n"
    << "  for (long long lm_c0 = 0; lm_c0 < lm_E; lm_c0 += blockDim.x) {\n"
    << "    const long long lm_cb = lm_c0 + threadIdx.x;\n    bool lm_on = false;\n"
    << "    if (lm_cb < lm_E) {\n"
    << "      const float lm_gv = ((const float*)lm_gs)[" << GSO << " + lm_cb * " << GS0 << "], lm_dv = ((const float*)lm_ds)[" << DSO << " + lm_cb * "
    << DS0 << "];\n"
    << "      lm_gse[lm_cb] = lm_gv, lm_dse[lm_cb] = lm_dv;\n"
    << "      lm_on = lm_gv != 0.0f || lm_dv != 0.0f;\n"
    << "    }\n"
    << append_listed("    ", "lm_cb", "lm_E", "lm_on_bits", "lm_act", "lm_nact") << "  }\n"
    << "  const int lm_na = lm_nact;\n"
    // 3. x into shared memory (times the gain); with a norm, the row's sum of squares.
    << "  float lm_q = 0.0f;\n"
    << "  #pragma unroll\n"
    << "  for (int lm_i = 0; lm_i < " << x_per_thread << "; ++lm_i) {\n"
    << "    const long long lm_k = threadIdx.x + lm_i * " << kBlockThreads << ";\n"
    << "    if (lm_k >= lm_kk) break;\n"
    << "    float lm_v = lm_xr[lm_i];\n";
  if (norm) s << "    lm_q = __fmaf_rn(lm_v, lm_v, lm_q);\n";
  if (gain) s << "    lm_v *= lm_gr[lm_i];\n";
  s << "    lm_xv[lm_k] = lm_v;\n  }\n";
  if (norm)  // as the normed GEMVs: 1 / sqrt(mean(x²) + eps) on each sum
    s << "  lm_q = lm_block_reduce(lm_q, [](float a, float b) { return a + b; });\n"
      << "  const float lm_f = 1.0f / sqrtf(lm_q * (1.0f / (float)lm_kk) + " << float_lit(norm->eps) << ");\n";
  s << "  __syncthreads();\n"
    // 4. The block's output columns, and their rows of the first chosen experts' down weights
    // copied into shared memory by the tensor memory accelerator while the gate/up pairs stream.
    // The stage is what the launch gave past x (%dynamic_smem_size).
    << "  const long long lm_j0 = lm_n * blockIdx.x / gridDim.x, lm_rows = lm_n * (blockIdx.x + 1) / gridDim.x - lm_j0;\n"
    << "  const long long lm_slot_bytes = lm_rows * lm_h * 2;\n"
    << "  const unsigned lm_dsmem = lm_dynamic_smem_size();\n"
    << "  const long long lm_stage_bytes = (long long)lm_dsmem - " << x_bytes << ";\n"
    << "  const int lm_staged = lm_slot_bytes > 0 && lm_stage_bytes > 0 ? (int)min((long long)lm_na, lm_stage_bytes / lm_slot_bytes) : 0;\n"
    << "  if (threadIdx.x == 0 && lm_staged > 0) {\n"
    << "    lm_bulk_expect(&lm_bar, (unsigned)(lm_staged * lm_slot_bytes));\n"
    << "    for (int lm_t = 0; lm_t < lm_staged; ++lm_t)\n"
    << "      lm_bulk_copy(lm_stage + lm_t * lm_slot_bytes, " << down_rows << ", (unsigned)lm_slot_bytes, &lm_bar);\n"
    << "  }\n"
    // 5. A warp per (chosen expert, gate row and its up row): x from shared memory, eight 16-byte
    // loads of each row in flight a lane (a 2048-wide row whole: with four, the experts streamed
    // slower than the generated GEMV's); the gated product's value to lm_hs.
    << "  for (long long lm_p = blockIdx.x * (long long)lm_warps + lm_warp; lm_p < (long long)lm_na * lm_h; lm_p += (long long)gridDim.x * lm_warps) {\n"
    << "    const int lm_t = (int)(lm_p / lm_h);\n"
    << "    const long long lm_j = lm_p - lm_t * lm_h;\n"
    << "    const int lm_e = lm_act[lm_t];\n"
    << "    const float lm_sc = lm_gse[lm_e];\n"
    << "    float lm_g = 0.0f, lm_u = 0.0f;\n"
    << "    if (lm_sc != 0.0f) {\n"
    << "      const uint16_t* lm_G = (const uint16_t*)lm_gb + " << c(gb->offset) << " + lm_e * " << c(gb->strides[0]) << " + lm_j * "
    << c(gb->strides[2]) << ";\n"
    << "      const uint16_t* lm_U = lm_G + lm_h * " << c(gb->strides[2]) << ";\n"
    << "      for (long long lm_k = lm_lane * 8; lm_k < lm_kk; lm_k += 32 * 8 * 8) {\n"
    << "        uint4 lm_wg[8], lm_wu[8];\n"
    << "        #pragma unroll\n"
    << "        for (int lm_x = 0; lm_x < 8; ++lm_x) {\n"
    << "          const long long lm_at = lm_k + lm_x * 256;\n"
    << "          lm_wg[lm_x] = lm_at < lm_kk ? __ldcs((const uint4*)(lm_G + lm_at)) : make_uint4(0, 0, 0, 0);\n"
    << "          lm_wu[lm_x] = lm_at < lm_kk ? __ldcs((const uint4*)(lm_U + lm_at)) : make_uint4(0, 0, 0, 0);\n"
    << "        }\n"
    << "        #pragma unroll\n"
    << "        for (int lm_x = 0; lm_x < 8; ++lm_x) {\n"
    << "          const long long lm_at = lm_k + lm_x * 256;\n"
    << "          if (lm_at < lm_kk) {\n"
    << "            const float4 lm_xa = *(const float4*)(lm_xv + lm_at), lm_xb = *(const float4*)(lm_xv + lm_at + 4);\n"
    << "            lm_g = lm_dot8(lm_wg[lm_x], lm_xa, lm_xb, lm_g);\n"
    << "            lm_u = lm_dot8(lm_wu[lm_x], lm_xa, lm_xb, lm_u);\n"
    << "          }\n        }\n      }\n"
    << "      for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_g += __shfl_xor_sync(0xffffffffu, lm_g, lm_o), lm_u += __shfl_xor_sync(0xffffffffu, lm_u, lm_o);\n"
    << "    }\n"
    << "    if (lm_lane == 0) {\n"
    << "      float lm_gv = lm_g * lm_sc, lm_uv = lm_u * lm_sc;\n"
    << (norm ? "      lm_gv *= lm_f;\n      lm_uv *= lm_f;\n" : "") << x.gated_value("lm_gv", "lm_uv", "lm_hv", "      ")
    << "      lm_hs[lm_t * lm_h + lm_j] = lm_hv;\n"
    << "    }\n  }\n"
    // 6. Every block's products are in: a grid barrier (every block is resident: one a
    // multiprocessor), after which the kernels behind this one may start.
    << grid_barrier("lm_sync")
    << "  lm_grid_release();\n"
    // 7. The block's output columns, 16 at a time: warp w takes the staged experts w, w + warps,
    // .. (their down rows from shared memory), every warp its rows of each expert past the stage
    // (from memory); each lane 8 of h's values a chunk, held in registers (the first staged
    // expert's loaded before the staged rows are waited for); the 16 sums over the lanes by
    // halving, then over the warps, then the sum's epilogue.
    << "  float4 lm_hr[" << h_chunks << "][2];\n"
    << "  auto lm_load_h = [&](int lm_t) {\n"
    << "    const float* lm_hp = lm_hs + lm_t * lm_h;\n"
    << "    #pragma unroll\n"
    << "    for (int lm_c = 0; lm_c < " << h_chunks << "; ++lm_c) {\n"
    << "      const long long lm_k = lm_lane * 8 + lm_c * 256;\n"
    << "      const bool lm_in = lm_k < lm_h;\n"
    << "      lm_hr[lm_c][0] = lm_in ? __ldcg((const float4*)(lm_hp + lm_k)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
    << "      lm_hr[lm_c][1] = lm_in ? __ldcg((const float4*)(lm_hp + lm_k + 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
    << "    }\n"
    << "  };\n"
    << "  if (lm_warp < lm_staged) lm_load_h(lm_warp);\n"
    << "  if (lm_staged > 0) lm_bulk_wait(&lm_bar);\n"
    << "  for (long long lm_r0 = 0; lm_r0 < lm_rows; lm_r0 += 16) {\n"
    << "    float lm_pr[16];\n"
    << "    #pragma unroll\n    for (int lm_i = 0; lm_i < 16; ++lm_i) lm_pr[lm_i] = 0.0f;\n"
    << "    for (int lm_t = lm_warp; lm_t < lm_staged; lm_t += lm_warps) {  // staged: a warp an expert\n"
    << "      if (lm_t != lm_warp || lm_r0 > 0) lm_load_h(lm_t);\n"
    << "      const float lm_sc = lm_dse[lm_act[lm_t]];\n"
    << "      if (lm_sc == 0.0f) continue;\n"
    << "      float lm_d[16];\n"
    << "      #pragma unroll\n      for (int lm_i = 0; lm_i < 16; ++lm_i) lm_d[lm_i] = 0.0f;\n"
    // The warp's 16 output columns of the expert's staged down rows (shared-memory loads, not
    // generic ones) against the lane's h values.
    << "      const uint4* lm_W = (const uint4*)(lm_stage + lm_t * lm_slot_bytes);\n"
    << "      #pragma unroll\n      for (int lm_c = 0; lm_c < " << h_chunks << "; ++lm_c) {\n"
    << "        const long long lm_k = lm_lane * 8 + lm_c * 256;\n        if (lm_k < lm_h) {\n"
    << "          #pragma unroll\n          for (int lm_i = 0; lm_i < 16; ++lm_i)\n            if (lm_r0 + lm_i < lm_rows)\n"
    << "              lm_d[lm_i] = lm_dot8(lm_W[((lm_r0 + lm_i) * lm_h + lm_k) / 8], lm_hr[lm_c][0], lm_hr[lm_c][1], lm_d[lm_i]);\n"
    << "        }\n      }\n"
    << "      #pragma unroll\n      for (int lm_i = 0; lm_i < 16; ++lm_i) lm_pr[lm_i] = __fmaf_rn(lm_sc, lm_d[lm_i], lm_pr[lm_i]);\n"
    << "    }\n"
    // Past the stage, every warp takes its rows of each expert (rows w, w + warps, ..), all of a
    // lane's row loads in flight before h's: one trip to memory an expert. (A warp taking all 16
    // rows of an expert, as the staged ones, issued them a few at a time: a 172 KB stage, with one
    // expert of eight past it, decoded the 8-layer MoE at 0.756 ms a token against 0.643.)
    << "    for (int lm_t = lm_staged; lm_t < lm_na; ++lm_t) {\n"
    << "      const float lm_sc = lm_dse[lm_act[lm_t]];\n"
    << "      if (lm_sc == 0.0f) continue;\n"
    << "      const uint16_t* lm_W = " << down_rows << ";\n"
    << "      uint4 lm_wr[" << kRowsPerWarp << "][" << h_chunks << "];\n"
    << "      #pragma unroll\n"
    << "      for (int lm_j = 0; lm_j < " << kRowsPerWarp << "; ++lm_j)\n"
    << "        #pragma unroll\n"
    << "        for (int lm_c = 0; lm_c < " << h_chunks << "; ++lm_c) {\n"
    << "          const long long lm_i = lm_r0 + lm_warp + lm_j * " << kWarps << ", lm_k = lm_lane * 8 + lm_c * 256;\n"
    << "          lm_wr[lm_j][lm_c] = lm_i < lm_rows && lm_k < lm_h ? __ldcs((const uint4*)(lm_W + lm_i * lm_h + lm_k)) : make_uint4(0, 0, 0, 0);\n"
    << "        }\n"
    << "      lm_load_h(lm_t);\n"
    << "      float lm_e[" << kRowsPerWarp << "];\n"
    << "      #pragma unroll\n"
    << "      for (int lm_j = 0; lm_j < " << kRowsPerWarp << "; ++lm_j) {\n"
    << "        lm_e[lm_j] = 0.0f;\n"
    << "        #pragma unroll\n"
    << "        for (int lm_c = 0; lm_c < " << h_chunks << "; ++lm_c) lm_e[lm_j] = lm_dot8(lm_wr[lm_j][lm_c], lm_hr[lm_c][0], lm_hr[lm_c][1], lm_e[lm_j]);\n"
    << "      }\n"
    << "      #pragma unroll\n"
    << "      for (int lm_i = 0; lm_i < 16; ++lm_i)\n"
    << "        if (lm_i % " << kWarps << " == lm_warp) lm_pr[lm_i] = __fmaf_rn(lm_sc, lm_e[lm_i / " << kWarps << "], lm_pr[lm_i]);\n"
    << "    }\n"
    << "    lm_halve_rows<8>(lm_pr, lm_lane, 16);\n    lm_halve_rows<4>(lm_pr, lm_lane, 8);\n"
    << "    lm_halve_rows<2>(lm_pr, lm_lane, 4);\n    lm_halve_rows<1>(lm_pr, lm_lane, 2);\n"
    << "    lm_pr[0] += __shfl_xor_sync(0xffffffffu, lm_pr[0], 1);\n"
    << "    if ((lm_lane & 1) == 0) lm_part[lm_warp][(lm_lane >> 4 & 1) * 8 + (lm_lane >> 3 & 1) * 4 + (lm_lane >> 2 & 1) * 2 + (lm_lane >> 1 & 1)] = lm_pr[0];\n"
    << "    __syncthreads();\n"
    << "    if (threadIdx.x < 16 && lm_r0 + threadIdx.x < lm_rows) {\n"
    << "      float lm_v = 0.0f;\n"
    << "      for (int lm_x = 0; lm_x < lm_warps; ++lm_x) lm_v += lm_part[lm_x][threadIdx.x];\n"
    << "      const long long lm_z = lm_j0 + lm_r0 + threadIdx.x;\n"
    << "      " << x.store("lm_z", "lm_v") << "    }\n"
    << "    __syncthreads();\n"
    << "  }\n";
  return s.str();
}

}  // namespace luminal::cuda::gen
