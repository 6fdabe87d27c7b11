// The decode GEMV of linear layers (see strided_linear_body below).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cpu/fused_codegen.h"
#include "core/error.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

Expr linear_threads(const Expr& count, const LinearVariant& v) { return ceil_div(count, Expr(v.cols)) * Expr(v.team); }

LinearUnits linear_units(const LinearVariant& v) {
  const std::string teams = "(long long)(blockDim.x / " + std::to_string(v.team) + ")", team = "(long long)(threadIdx.x / " + std::to_string(v.team) + ")";
  if (v.spread) return {"(long long)blockIdx.x", team + " * gridDim.x", "(long long)gridDim.x * " + teams};
  return {"(long long)blockIdx.x * " + teams, team, "(long long)gridDim.x * " + teams};
}

// Unit lm_w's offsets lm_o<k> of its C weight rows from lm_B (rows lm_j0 + k, or with a gated
// product gate's rows lm_j0 + k and up's lm_h + lm_j0 + k - C / 2). A column past the output's
// width reads the tile's first row again (its sums are not stored).
static std::string column_offsets(int C, bool gated) {
  const int CW = gated ? C / 2 : C;
  std::ostringstream s;
  for (int k = 0; k < C; ++k) {
    if (!gated) s << "      const long long lm_o" << k << " = (lm_j0 + " << k << " < lm_n ? " << k << " : 0) * lm_bs;\n";
    else if (k < CW) s << "      const long long lm_o" << k << " = (lm_j0 + " << k << " < lm_h ? " << k << " : 0) * lm_bs;\n";
    else s << "      const long long lm_o" << k << " = (lm_h + (lm_j0 + " << k - CW << " < lm_h ? " << k - CW << " : 0)) * lm_bs;\n";  // up's rows
  }
  return s.str();
}

// Whether the unit's 16-byte loads are aligned (lm_vec): true for every real weight (k a
// multiple of 8).
static std::string vec_condition(int C, int per, bool gain) {
  return "      const bool lm_vec = ((lm_ao | lm_bo | lm_as | lm_kk" + std::string(C > 1 ? " | lm_bs" : "") + ") & " + std::to_string(per - 1) +
         ") == 0 && ((lm_ao | lm_as" + (gain ? " | lm_go" : "") + ") & 3) == 0;\n";
}

// The first unit of this thread (lm_w: its team's first, as linear_units deals them) and that
// unit's tile, batch and group (lm_j0, lm_b, lm_g) with its operands' offsets (lm_ao, lm_bo
// and their strides lm_as, lm_bs): the weight preload's and the first pass's, which must agree.
static std::string first_unit_offsets(const ViewLayer* a, const ViewLayer* b, const LinearVariant& v, int CW) {
  const size_t r = a->shape.size();
  const LinearUnits units = linear_units(v);
  return "      const long long lm_w = " + units.block_first + " + " + units.team_offset + ";\n" +
         "      const long long lm_j0 = (lm_w % lm_tiles) * " + std::to_string(CW) +
         ", lm_t = lm_w / lm_tiles, lm_b = lm_t / lm_groups, lm_g = lm_t % lm_groups;\n" + "      long long lm_ao = " + c(a->offset) +
         ", lm_bo = " + c(b->offset) + " + lm_j0 * " + c(b->strides[r - 1]) + ";\n" + batch_offsets(a, b, nullptr, "      ") +
         "      const long long lm_as = " + c(a->strides[r - 2]) + ", lm_bs = " + c(b->strides[r - 1]) + ";\n";
}

bool weights_before_wait() {
  static const bool on = env_switch_on("LUMINAL_CUDA_GEMV_PRELOAD");
  return on;
}

std::vector<int> grid_caps(const char* env, std::vector<int> defaults) {
  const char* e = std::getenv(env);
  if (!e) return defaults;
  std::vector<int> caps;
  std::string item;
  std::istringstream in(e);
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long cap = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || cap < 0 || cap > 64) {
      caps.clear();
      break;
    }
    caps.push_back(static_cast<int>(cap));
  }
  if (caps.empty() || caps.size() > 4)
    throw Error(std::string(env) + "='" + e + "': expected one to four grid caps (blocks a multiprocessor, 0 for the executor's), such as \"1,2\"");
  return caps;
}

bool gated_whole_units() {
  static const bool on = env_switch_set("LUMINAL_CUDA_GATED_WHOLE_UNITS");
  return on;
}

const std::vector<int>& gated_expert_caps() {
  static const std::vector<int> caps = grid_caps("LUMINAL_CUDA_GATED_EXPERT_CAPS", {1, 2, 4});
  return caps;
}

const std::vector<int>& expert_sum_caps() {
  static const std::vector<int> caps = grid_caps("LUMINAL_CUDA_EXPERT_SUM_CAPS", {0});
  return caps;
}

bool expert_sums_before_wait() {
  static const bool on = env_switch_on("LUMINAL_CUDA_EXPERT_SUM_PRELOAD");
  return on;
}

std::string linear_weight_preload(const ViewLayer* a, const ViewLayer* b, DType w_dtype, const std::string& count_decl, const LinearVariant& v,
                                  const NormPrologue* norm, const GatedEpilogue* gated) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r || (w_dtype != DType::F32 && w_dtype != DType::BF16)) return "";
  const bool bf16 = w_dtype == DType::BF16, gain = norm && norm->gain;
  const int per = bf16 ? 8 : 4, C = v.cols, T = v.team, U = v.in_flight, R = v.rows, CW = gated ? C / 2 : C;
  const std::string vec = bf16 ? "uint4" : "float4", wt = bf16 ? "uint16_t" : "float";
  const std::string step = "(" + std::to_string(T) + " * " + std::to_string(per) + ")";
  const LinearUnits units = linear_units(v);
  std::ostringstream s;
  s << "  " << vec << " ";
  for (int u = 0; u < U; ++u)
    for (int k = 0; k < C; ++k) s << (u || k ? ", " : "") << "lm_q" << u << "_" << k;
  s << ";\n  bool lm_pre = false;  // the first pass of this thread's first unit, loaded before the wait\n"
    << "  {\n" << count_decl
    << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_kk = " << c(a->shape[r - 1]) << ", lm_n = " << c(b->shape[r - 1]) << ";\n"
    << (gated ? "  const long long lm_h = " + c(gated->half) + ";\n" : std::string())
    << "  const long long lm_groups = (lm_m + " << R - 1 << ") / " << R << ", lm_tiles = (" << (gated ? "lm_h" : "lm_n") << " + " << CW - 1 << ") / "
    << CW << ";\n"
    << "  const long long lm_units = lm_m > 0 && lm_n > 0 ? lm_count / (lm_m * lm_n) * lm_groups * lm_tiles : 0;\n"
    << "  const int lm_tid = threadIdx.x % " << T << ";\n"
    << "  if (" << units.block_first << " + " << units.team_offset << " < lm_units) {\n"
    << first_unit_offsets(a, b, v, CW)
    << "      const " << wt << "* lm_B = (const " << wt << "*)lm_in1 + lm_bo;\n"
    << (gain ? "      const long long lm_go = " + c(norm->gain_offset) + ";\n" : std::string())
    << column_offsets(C, gated != nullptr) << vec_condition(C, per, gain)
    << "      const long long lm_p = lm_tid * " << per << ";\n"
    << "      if (lm_vec && lm_p + " << U - 1 << " * " << step << " + " << per << " <= lm_kk) {\n";
  for (int u = 0; u < U; ++u)
    for (int k = 0; k < C; ++k)
      s << "        lm_q" << u << "_" << k << " = __ldcs((const " << vec << "*)(lm_B + lm_o" << k << " + lm_p + " << u << " * " << step << "));\n";
  s << "        lm_pre = true;\n      }\n  }\n  }\n";
  return s.str();
}

// Matmul C[b, i, j] = sum_p A[b, i, p] * B[b, p, j] where both operands are plain strided, A is
// f32 with unit stride along k and B (f32 or bf16) has unit stride along k too: a linear layer,
// B = Wᵀ of a row-major [n, k] weight. A work unit is `cols` adjacent columns j and a group of up
// to `rows` rows of A (four, or one for decode); a team of threads (LinearVariant) takes one:
// its threads load 16 bytes of each column's weight row at a time (8 bf16 or 4 f32) and the
// matching A values, so the weight streams through in full 128-byte lines, read once per group
// of rows. Sums use FMA, then a shuffle tree, then shared memory across a team's warps (float
// rounding, not the reference's order).
std::optional<std::string> strided_linear_body(const ViewLayer* a, const ViewLayer* b, const std::vector<DType>& dt,
                                               const std::string& count_decl,
                                               const std::function<std::string(const std::string&, DType)>& out_store,
                                               const LinearVariant& v, const ViewLayer* scale, const NormPrologue* norm,
                                               const GatedEpilogue* gated, bool preloaded) {
  const size_t r = a ? a->shape.size() : 0;
  if (scale && (scale->shape.size() != r || dt.size() < 3 || dt[2] != DType::F32)) return std::nullopt;
  // A norm with a scale only for a gated product (an MoE decode's gate/up experts: listed
  // experts, no path for many rows) and inline (a stage is one batch's).
  if (norm && ((scale && (!gated || v.staged)) || (norm->gain && norm->gain_dtype != DType::F32 && norm->gain_dtype != DType::BF16)))
    return std::nullopt;
  if (gated && v.cols % 2 != 0) return std::nullopt;
  if (!a || !b || r < 2 || b->shape.size() != r || dt[0] != DType::F32 || (dt[1] != DType::F32 && dt[1] != DType::BF16)) return std::nullopt;
  if (!a->strides[r - 1].is_const(1) || !b->strides[r - 2].is_const(1)) return std::nullopt;
  if (v.team < 32 || v.team % 32 != 0 || kBlockThreads % v.team != 0 || v.cols < 1 || v.in_flight < 1 || v.rows < 1) return std::nullopt;
  const bool bf16 = dt[1] == DType::BF16;
  const int per = bf16 ? 8 : 4;  // W values per 16-byte load
  const int C = v.cols, T = v.team, U = v.in_flight, R = v.rows;
  // With a norm, column C of the accumulators holds the row's sum of x² (summed as the columns are).
  const int CC = C + (norm ? 1 : 0);
  // With `preloaded`, the thread's first unit takes its first pass from the loads issued before
  // the wait (linear_weight_preload: lm_q<u>_<k>, lm_pre): summed into the unit's sums at once
  // after the wait (and the stage), so that those registers are free before the loops, and the
  // unit's k loop then starts at its second pass. The sums' order is the loop's.
  const bool use_preload = preloaded && !scale;
  // Output columns a unit stores: with a gated product, half its columns are gate's, half up's.
  const int CW = gated ? C / 2 : C;
  const std::string NT = gated ? "lm_h" : "lm_n";  // the output's columns
  const bool gain = norm && norm->gain, gain_bf16 = gain && norm->gain_dtype == DType::BF16;
  const std::string vec = bf16 ? "uint4" : "float4", wt = bf16 ? "uint16_t" : "float";
  const std::string step = "(" + std::to_string(T) + " * " + std::to_string(per) + ")";
  std::ostringstream s;
  s << count_decl << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_kk = " << c(a->shape[r - 1]) << ", lm_n = " << c(b->shape[r - 1])
    << ";\n  if (lm_m <= 0 || lm_n <= 0) return;\n"
    << (gated ? "  const long long lm_h = " + c(gated->half) + ";\n" : std::string())
    << "  const long long lm_groups = (lm_m + " << R - 1 << ") / " << R << ", lm_tiles = (" << NT << " + " << CW - 1 << ") / " << CW << ";\n"
    << "  " << (scale ? "" : "const ") << "long long lm_units = lm_count / (lm_m * lm_n) * lm_groups * lm_tiles;\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_tid = threadIdx.x % " << T << ", lm_teams = blockDim.x / " << T << ";\n";
  if (T > 32) s << "  __shared__ float lm_part[" << kBlockThreads / 32 << "][" << R * CC << "];\n";
  if (scale) s << scaled_batches_prologue(a, scale);
  // A staged norm: where the norm's rows are one batch of at most R rows (a decode) and fit
  // shared memory, each block computes every row's sum of squares and x times the gain once,
  // before its units; the k loop then reads x from shared memory and only multiplies (the 8B
  // gate/up schedule's main loop: 329 instructions a thread per 256 weight bytes against 415
  // inline, and 59 µs a step-layer against 64 on the H200). Units of any other shape take the
  // inline path below, which stays in the kernel.
  // The norm's two steps on a float4 lm_x of x, for the stage and the inline path alike: its
  // squares summed into `acc`, then each value times the gain `g` at `at` (f32 or bf16 words).
  auto squares_into = [](const std::string& acc, const std::string& in) {
    return in + acc + " = __fmaf_rn(lm_x.x, lm_x.x, " + acc + "); " + acc + " = __fmaf_rn(lm_x.y, lm_x.y, " + acc + ");\n" + in + acc +
           " = __fmaf_rn(lm_x.z, lm_x.z, " + acc + "); " + acc + " = __fmaf_rn(lm_x.w, lm_x.w, " + acc + ");\n";
  };
  // The gain's four values for a float4 of x: two bf16 words' worth (uint2) or a float4.
  const std::string gvec = gain_bf16 ? "uint2" : "float4";
  // lm_x times the gain's four values held in `value` (a gvec expression: loaded, or registers).
  auto times_gain_value = [&](const std::string& value, const std::string& in) -> std::string {
    if (gain_bf16)
      return in + "{ const uint2 lm_gu = " + value + ";\n" + in +
             "  lm_x.x *= __uint_as_float(lm_gu.x << 16); lm_x.y *= __uint_as_float(lm_gu.x & 0xffff0000u);\n" + in +
             "  lm_x.z *= __uint_as_float(lm_gu.y << 16); lm_x.w *= __uint_as_float(lm_gu.y & 0xffff0000u); }\n";
    if (gain) return in + "{ const float4 lm_gv = " + value + ";\n" + in + "  lm_x.x *= lm_gv.x; lm_x.y *= lm_gv.y; lm_x.z *= lm_gv.z; lm_x.w *= lm_gv.w; }\n";
    return "";
  };
  auto times_gain = [&](const std::string& g, const std::string& at, const std::string& in) {
    return times_gain_value("*(const " + gvec + "*)(" + g + " + " + at + ")", in);
  };
  const std::optional<int64_t> kconst = a->shape[r - 1].as_const();
  const bool staged = v.staged && norm && kconst && *kconst > 0 && *kconst % per == 0 && R * *kconst * 4 <= kMaxStagedNormBytes;
  if (v.staged && !staged) return std::nullopt;  // no stage possible: the inline schedule is the one
  const std::string KS = staged ? std::to_string(*kconst) : "0";
  if (staged) {
    const std::string go = gain ? c(norm->gain_offset) : "0";
    s << "  __shared__ __align__(16) float lm_xn[" << R * *kconst << "];\n"
      << "  __shared__ float lm_ssq[" << R << "];\n"
      << "  const bool lm_staged = lm_count / (lm_m * lm_n) == 1 && lm_m <= " << R << " && lm_kk == " << KS << " && ((" << c(a->offset) << " | "
      << c(a->strides[r - 2]) << " | " << go << ") & 3) == 0;\n"
      << "  if (lm_staged) {\n"
      << "    const float* lm_X = (const float*)lm_in0 + " << c(a->offset) << ";\n";
    if (gain)
      s << "    const " << (gain_bf16 ? "uint16_t" : "float") << "* lm_G0 = (const " << (gain_bf16 ? "uint16_t" : "float") << "*)lm_gain + " << go
        << ";\n";
    // A thread's float4s of the row (and the gain's) loaded together before any is used: one
    // trip to L2 (a loop striding by blockDim.x went out one iteration, two loads, at a time);
    // then, for blocks narrower than kBlockThreads, the rest of the row.
    const int64_t NU = (*kconst + kBlockThreads * 4 - 1) / (kBlockThreads * 4);
    s << "    for (int lm_i = 0; lm_i < lm_m; ++lm_i) {\n"
      << "      float lm_q = 0.0f;\n"
      << "      float4 lm_xs[" << NU << "];\n"
      << (gain ? "      " + gvec + " lm_gs[" + std::to_string(NU) + "];\n" : std::string())
      << "      #pragma unroll\n"
      << "      for (int lm_u = 0; lm_u < " << NU << "; ++lm_u) {\n"
      << "        const int lm_p = (threadIdx.x + lm_u * blockDim.x) * 4;\n"
      << "        lm_xs[lm_u] = lm_p < " << KS << " ? *(const float4*)(lm_X + lm_i * " << c(a->strides[r - 2]) << " + lm_p) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n";
    if (gain)
      s << "        lm_gs[lm_u] = lm_p < " << KS << " ? *(const " << gvec << "*)(lm_G0 + lm_p) : " << (gain_bf16 ? "make_uint2(0, 0)" : "make_float4(0.0f, 0.0f, 0.0f, 0.0f)")
        << ";\n";
    s << "      }\n"
      << "      #pragma unroll\n"
      << "      for (int lm_u = 0; lm_u < " << NU << "; ++lm_u) {\n"
      << "        const int lm_p = (threadIdx.x + lm_u * blockDim.x) * 4;\n"
      << "        if (lm_p >= " << KS << ") break;\n"
      << "        float4 lm_x = lm_xs[lm_u];\n"
      << squares_into("lm_q", "        ") << times_gain_value("lm_gs[lm_u]", "        ")
      << "        *(float4*)(lm_xn + lm_i * " << KS << " + lm_p) = lm_x;\n"
      << "      }\n"
      << "      for (int lm_p = (threadIdx.x + " << NU << " * blockDim.x) * 4; lm_p < " << KS << "; lm_p += blockDim.x * 4) {\n"
      << "        float4 lm_x = *(const float4*)(lm_X + lm_i * " << c(a->strides[r - 2]) << " + lm_p);\n"
      << squares_into("lm_q", "        ") << times_gain("lm_G0", "lm_p", "        ")
      << "        *(float4*)(lm_xn + lm_i * " << KS << " + lm_p) = lm_x;\n"
      << "      }\n"
      << "      lm_q = lm_block_reduce(lm_q, [](float a, float b) { return a + b; });\n"
      << "      if (threadIdx.x == 0) lm_ssq[lm_i] = lm_q;\n"
      << "    }\n"
      << "    __syncthreads();  // the stage and the sums, for every thread's units\n"
      << "  }\n";
  }
  const std::string head = s.str();  // the listed rows' path (ScaledMatmul) goes here
  s.str("");
  // Whole blocks step through the units together, so the barriers below are reached by all.
  const LinearUnits units = linear_units(v);  // lm_base: the block's first unit of the pass
  s << "  for (long long lm_base = " << units.block_first << "; lm_base < lm_units; lm_base += " << units.step << ") {\n"
    << "    const long long lm_w = lm_base + " << units.team_offset << ";\n"
    << "    const bool lm_live = lm_w < lm_units;\n"
    << (use_preload ? "    const bool lm_from_pre = lm_pre;  // the unit whose first pass is in lm_acc already\n    lm_pre = false;\n"
                    : "    float lm_acc[" + std::to_string(R) + "][" + std::to_string(CC) + "] = {};\n")
    << (scale ? "    float lm_sc[" + std::to_string(R) + "];\n" : std::string())
    << "    int lm_rows = 0;\n    long long lm_j0 = 0, lm_g = 0, lm_b = 0;\n"
    << "    if (lm_live) {\n"
    << "      lm_j0 = (lm_w % lm_tiles) * " << CW << ";\n"
    << "      const long long lm_t = lm_w / lm_tiles;\n"
    << "      lm_b = " << (scale ? "lm_compact ? (long long)lm_act[lm_t / lm_groups] : " : "") << "lm_t / lm_groups;\n"
    << "      lm_g = lm_t % lm_groups;\n"
    << "      lm_rows = (int)(lm_m - lm_g * " << R << " < " << R << " ? lm_m - lm_g * " << R << " : " << R << ");\n"
    // The batch coordinates of b, into both operands' offsets.
    << "      long long lm_ao = " << c(a->offset) << ", lm_bo = " << c(b->offset) << " + lm_j0 * " << c(b->strides[r - 1]) << ";\n"
    << (scale ? "      long long lm_so = " + c(scale->offset) + ";\n" : std::string())
    << batch_offsets(a, b, scale, "      ")
    << "      const long long lm_as = " << c(a->strides[r - 2]) << ", lm_bs = " << c(b->strides[r - 1]) << ";\n"
    << "      const float* lm_A = (const float*)lm_in0 + lm_ao + lm_g * " << R << " * lm_as;\n"
    << "      const " << wt << "* lm_B = (const " << wt << "*)lm_in1 + lm_bo;\n"
    << (gain ? "      const long long lm_go = " + c(norm->gain_offset) + ";\n      const " + std::string(gain_bf16 ? "uint16_t" : "float") +
                   "* lm_G = (const " + (gain_bf16 ? "uint16_t" : "float") + "*)lm_gain + lm_go;\n"
             : std::string())
    << "      " << (scale ? "" : "const ") << "long long lm_ke = lm_kk;  // the k the unit reads: none where every row's scale is zero\n";
  if (scale)
    s << "      bool lm_any = false;\n"
      << "      for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
      << "        lm_sc[lm_i] = lm_i >= lm_rows ? 0.0f : " << (listed_scales() ? "lm_compact && lm_m == 1 ? lm_scl[lm_b] : " : "")
      << "((const float*)lm_in2)[lm_so + (lm_g * " << R << " + lm_i) * " << c(scale->strides[r - 2]) << "];\n"
      << "        lm_any = lm_any || lm_sc[lm_i] != 0.0f;\n      }\n"
      << "      if (!lm_any) lm_ke = 0;\n";
  s << column_offsets(C, gated != nullptr) << vec_condition(C, per, gain)
    << "      long long lm_p0 = 0;\n"
    << "      if (lm_vec) {\n";
  // The products of the 16-byte chunks of W at column `at` (registers lm_r<u>_<k>) with up to
  // `rows` rows of A: each A value is loaded once for all the tile's columns.
  std::string arow = "lm_A + lm_i * lm_as";  // row lm_i of the unit's A
  // LinearVariant::early (an MoE decode's experts: ScaledMatmul, one row a unit, the plain rows'
  // path): each chunk's x values (and the inline norm's gain) load with its weights (loads
  // below), not in its products.
  auto early = [&](bool from_stage) { return v.early && scale && R == 1 && !from_stage && arow == "lm_A + lm_i * lm_as"; };
  auto chunk = [&](int u, const std::string& at, bool from_stage = false) {
    const bool inline_norm = norm && !from_stage;
    std::ostringstream o;
    o << "          {\n            float lm_wv[" << C << "][" << per << "];\n";
    for (int k = 0; k < C; ++k) {
      const std::string raw = "lm_r" + std::to_string(u) + "_" + std::to_string(k), w = "lm_wv[" + std::to_string(k) + "]";
      if (bf16)
        o << "            " << w << "[0] = __uint_as_float(" << raw << ".x << 16); " << w << "[1] = __uint_as_float(" << raw << ".x & 0xffff0000u); "
          << w << "[2] = __uint_as_float(" << raw << ".y << 16); " << w << "[3] = __uint_as_float(" << raw << ".y & 0xffff0000u);\n            "
          << w << "[4] = __uint_as_float(" << raw << ".z << 16); " << w << "[5] = __uint_as_float(" << raw << ".z & 0xffff0000u); "
          << w << "[6] = __uint_as_float(" << raw << ".w << 16); " << w << "[7] = __uint_as_float(" << raw << ".w & 0xffff0000u);\n";
      else
        o << "            " << w << "[0] = " << raw << ".x; " << w << "[1] = " << raw << ".y; " << w << "[2] = " << raw << ".z; " << w << "[3] = " << raw
          << ".w;\n";
    }
    const bool pre = early(from_stage);
    o << "            for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
      << "              if (lm_i >= lm_rows) break;\n";
    if (!pre) o << "              const float* lm_a = " << (from_stage ? "lm_xn + lm_i * " + KS : arow) << " + " << at << ";\n";
    if (pre) o << "              #pragma unroll\n";  // lm_xe's index a constant: registers
    o << "              for (int lm_e = 0; lm_e < " << per << "; lm_e += 4) {\n"
      << "                " << (inline_norm ? "" : "const ") << "float4 lm_x = "
      << (pre ? "lm_xe" + std::to_string(u) + "[lm_e / 4]" : "*(const float4*)(lm_a + lm_e)") << ";\n";
    if (inline_norm) {  // the row's sum of x², then x times the gain
      o << squares_into("lm_acc[lm_i][" + std::to_string(C) + "]", "                ")
        << (pre ? times_gain_value("lm_ge" + std::to_string(u) + "[lm_e / 4]", "                ") : times_gain("lm_G", at + " + lm_e", "                "));
    }
    o << "                for (int lm_k = 0; lm_k < " << C << "; ++lm_k) {\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.x, lm_wv[lm_k][lm_e], lm_acc[lm_i][lm_k]);\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.y, lm_wv[lm_k][lm_e + 1], lm_acc[lm_i][lm_k]);\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.z, lm_wv[lm_k][lm_e + 2], lm_acc[lm_i][lm_k]);\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.w, lm_wv[lm_k][lm_e + 3], lm_acc[lm_i][lm_k]);\n"
      << "                }\n              }\n            }\n          }\n";
    return o.str();
  };
  std::string wload = "__ldcs";
  auto loads = [&](int u, const std::string& at, bool from_stage) {
    std::ostringstream o;
    // Streaming loads (evict first): each weight is read once a step, and should not push the
    // activations out of the caches.
    for (int k = 0; k < C; ++k)
      o << "          const " << vec << " lm_r" << u << "_" << k << " = " << wload << "((const " << vec << "*)(lm_B + lm_o" << k << " + " << at << "));\n";
    if (early(from_stage)) {  // row 0's x (and gain) for the chunk, with its weights
      const std::string n4 = std::to_string(per / 4), U_ = std::to_string(u);
      o << "          float4 lm_xe" << U_ << "[" << n4 << "];\n";
      if (gain) o << "          " << gvec << " lm_ge" << U_ << "[" << n4 << "];\n";
      o << "          #pragma unroll\n"
        << "          for (int lm_e = 0; lm_e < " << per << "; lm_e += 4) {\n"
        << "            lm_xe" << U_ << "[lm_e / 4] = *(const float4*)(lm_A + " << at << " + lm_e);\n";
      if (gain) o << "            lm_ge" << U_ << "[lm_e / 4] = *(const " << gvec << "*)(lm_G + " << at << " + lm_e);\n";
      o << "          }\n";
    }
    return o.str();
  };
  // `in_flight` loads per column and thread before their products: decode is a stream over W,
  // and one outstanding 16-byte load per thread leaves the memory system idle between them.
  // The k loop after `if (lm_vec) {`, through the unaligned tail (`tail_a`: A's element lm_p of
  // row lm_i).
  auto kloop = [&](const std::string& tail_a) {
    std::ostringstream o;
    auto vector_loop = [&](bool from_stage) {
      o << "        long long lm_p = lm_tid * " << per << (use_preload ? " + (lm_from_pre ? " + std::to_string(U) + " * " + step + " : 0)" : "") << ";\n"
        << "        for (; lm_p + " << U - 1 << " * " << step << " + " << per << " <= lm_ke; lm_p += " << U << " * " << step << ") {\n";
      for (int u = 0; u < U; ++u) o << loads(u, "lm_p + " + std::to_string(u) + " * " + step, from_stage);
      for (int u = 0; u < U; ++u) o << chunk(u, "lm_p + " + std::to_string(u) + " * " + step, from_stage);
      o << "        }\n"
        << "        for (; lm_p + " << per << " <= lm_ke; lm_p += " << step << ") {\n"
        << loads(0, "lm_p", from_stage) << chunk(0, "lm_p", from_stage) << "        }\n";
    };
    if (staged && arow == "lm_A + lm_i * lm_as") {  // the plain rows' path: x may come from the stage
      o << "        if (lm_staged) {\n";
      vector_loop(true);
      o << "        } else {\n";
      vector_loop(false);
      o << "        }\n";
    } else {
      vector_loop(false);
    }
    o << "        lm_p0 = lm_ke;\n      }\n"
      // Unaligned rows: one element per thread per step.
      << "      for (long long lm_p = lm_p0 + lm_tid; lm_p < lm_ke; lm_p += " << T << ") {\n";
    if (norm) {  // each row's x once: its square summed, then times the gain
      o << "        float lm_av[" << R << "];\n"
        << "        for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
        << "          lm_av[lm_i] = lm_i < lm_rows ? " << tail_a << " : 0.0f;\n"
        << "          lm_acc[lm_i][" << C << "] = __fmaf_rn(lm_av[lm_i], lm_av[lm_i], lm_acc[lm_i][" << C << "]);\n";
      if (gain) o << "          lm_av[lm_i] *= " << (gain_bf16 ? "lm_bf16_f32(lm_G[lm_p])" : "lm_G[lm_p]") << ";\n";
      o << "        }\n";
    }
    const std::string tail_value = norm ? "lm_av[lm_i]" : tail_a;
    for (int k = 0; k < C; ++k)
      o << "        { const float lm_wv = " << (bf16 ? "lm_bf16_f32(lm_B[lm_o" + std::to_string(k) + " + lm_p])" : "lm_B[lm_o" + std::to_string(k) + " + lm_p]")
        << ";\n          for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n"
        << "            if (lm_i < lm_rows) lm_acc[lm_i][" << k << "] = __fmaf_rn(" << tail_value << ", lm_wv, lm_acc[lm_i][" << k << "]); }\n";
    o << "      }\n";
    return o.str();
  };
  std::string first_pass;
  if (use_preload) {
    std::ostringstream o;
    // The unit's sums live through the loop (zeroed after each unit's stores), so the first
    // pass needs no registers of its own past it.
    o << "  float lm_acc[" << R << "][" << CC << "] = {};\n"
      << "  if (lm_pre) {  // the first pass of the thread's first unit, from the loads before the wait\n"
      << first_unit_offsets(a, b, v, CW)
      << "      const int lm_rows = (int)(lm_m - lm_g * " << R << " < " << R << " ? lm_m - lm_g * " << R << " : " << R << ");\n"
      << "      const float* lm_A = (const float*)lm_in0 + lm_ao + lm_g * " << R << " * lm_as;\n"
      << (gain ? "      const " + std::string(gain_bf16 ? "uint16_t" : "float") + "* lm_G = (const " + (gain_bf16 ? "uint16_t" : "float") +
                     "*)lm_gain + " + c(norm->gain_offset) + ";\n"
               : std::string())
      << "      const long long lm_p = lm_tid * " << per << ";\n";
    for (int u = 0; u < U; ++u)
      for (int k = 0; k < C; ++k) o << "      const " << vec << " lm_r" << u << "_" << k << " = lm_q" << u << "_" << k << ";\n";
    auto chunks = [&](bool from_stage) {
      for (int u = 0; u < U; ++u) o << chunk(u, "lm_p + " + std::to_string(u) + " * " + step, from_stage);
    };
    if (staged) {
      o << "      if (lm_staged) {\n";
      chunks(true);
      o << "      } else {\n";
      chunks(false);
      o << "      }\n";
    } else {
      chunks(false);
    }
    o << "  }\n";
    first_pass = o.str();
  }
  s << kloop("lm_A[lm_i * lm_as + lm_p]") << "    }\n";
  // The sums, then the stores: row lm_i of the unit at output row `row` of its batch.
  auto stores = [&](const std::string& row) {
    std::ostringstream o;
    // With a norm: the row's 1 / sqrt(mean(x²) + eps), from its summed squares `ss`, as the
    // norm kernel computes it, on each stored sum.
    auto normed = [&](const std::string& ss, const std::string& in) {
      if (!norm) return std::string();
      const std::string sum = staged ? "(lm_staged ? lm_ssq[lm_i] : " + ss + ")" : ss;
      const std::string f = "1.0f / sqrtf(" + sum + " * (1.0f / (float)lm_kk) + " + float_lit(norm->eps) + ")";
      return in + "lm_v *= " + f + ";\n" + (gated ? in + "lm_u *= " + f + ";\n" : std::string());
    };
    // With a scale: the row's sums times it (gate's and up's both, for a gated product).
    auto scaled = [&](const std::string& in) {
      if (!scale) return std::string();
      return in + "lm_v *= lm_sc[lm_i];\n" + (gated ? in + "lm_u *= lm_sc[lm_i];\n" : std::string());
    };
    auto store = [&](const std::string& in) {
      const std::string z = in + "const long long lm_z = (lm_b * lm_m + " + row + ") * " + NT + " + lm_j0 + lm_k; ";
      return z + (gated ? gated->store("lm_z", "lm_v", "lm_u") : out_store("lm_z", DType::F32));
    };
    // A shuffle tree per warp (every lane of a warp is in one team, live or not).
    o << "    for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n"
      << "      for (int lm_k = 0; lm_k < " << CC << "; ++lm_k) {\n"
      << "        float lm_v = lm_acc[lm_i][lm_k];\n"
      << "        for (int lm_s = 16; lm_s > 0; lm_s >>= 1) lm_v += __shfl_xor_sync(0xffffffffu, lm_v, lm_s);\n";
    if (T == 32 && (norm || gated))  // every lane holds the sums: all of them first, then the stores
      o << "        lm_acc[lm_i][lm_k] = lm_v;\n      }\n"
        << "    for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n"
        << "      for (int lm_k = 0; lm_k < " << CW << "; ++lm_k) {\n"
        << "        float lm_v = lm_acc[lm_i][lm_k];\n"
        << (gated ? "        float lm_u = lm_acc[lm_i][lm_k + " + std::to_string(CW) + "];\n" : std::string());
    if (T == 32)
      o << "        if (lm_live && lm_lane == 0 && lm_i < lm_rows && lm_j0 + lm_k < " << NT << ") {\n"
        << scaled("          ") << normed("lm_acc[lm_i][" + std::to_string(C) + "]", "          ")
        << store("          ") << "        }\n      }\n";
    else  // then across the team's warps, in warp order
      o << "        if (lm_lane == 0) lm_part[threadIdx.x >> 5][lm_i * " << CC << " + lm_k] = lm_v;\n      }\n"
        << "    __syncthreads();\n"
        << "    if (lm_live && lm_tid < " << R * CW << ") {\n"
        << "      const int lm_i = lm_tid / " << CW << ", lm_k = lm_tid % " << CW << ";\n"
        << "      if (lm_i < lm_rows && lm_j0 + lm_k < " << NT << ") {\n"
        << "        float lm_v = 0.0f" << (norm ? ", lm_ss = 0.0f" : "") << (gated ? ", lm_u = 0.0f" : "") << ";\n"
        << "        for (int lm_x = 0; lm_x < " << T / 32 << "; ++lm_x) {\n"
        << "          const float* lm_pp = lm_part[(threadIdx.x / " << T << ") * " << T / 32 << " + lm_x] + lm_i * " << CC << ";\n"
        << "          lm_v += lm_pp[lm_k];\n"
        << (gated ? "          lm_u += lm_pp[lm_k + " + std::to_string(CW) + "];\n" : std::string())
        << (norm ? "          lm_ss += lm_pp[" + std::to_string(C) + "];\n" : std::string())
        << "        }\n"
        << scaled("        ") << normed("lm_ss", "        ")
        << store("        ") << "      }\n    }\n    __syncthreads();\n";
    return o.str();
  };
  s << stores("lm_g * " + std::to_string(R) + " + lm_i");
  if (use_preload)
    s << "    for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n      for (int lm_k = 0; lm_k < " << CC << "; ++lm_k) lm_acc[lm_i][lm_k] = 0.0f;\n";
  s << "  }\n";
  if (scale)
    s << scaled_batches_epilogue(NT, gated ? gated->store("lm_z", "0.0f", "0.0f") : "const float lm_v = 0.0f; " + out_store("lm_z", DType::F32));
  if (!scale || gated) return head + first_pass + s.str();
  arow = "lm_ar[lm_i]";
  wload = "__ldg";  // each group of listed rows reads the weight rows again: keep them cached
  return head + scaled_rows_path(a, b, scale, v, bf16, kloop("lm_ar[lm_i][lm_p]"), stores("lm_rl[lm_g0 + lm_i]"), out_store) + s.str();
}

static long long env_megabytes(const char* name, long long fallback) {
  const char* mb = std::getenv(name);
  return (mb ? std::max(0LL, std::atoll(mb)) : fallback) << 20;
}

long long linear_prefetch_budget(const Node& producer) {
  static const long long after_attention = env_megabytes("LUMINAL_CUDA_PREFETCH_AFTER_ATTENTION_MB", 0);
  static const long long otherwise = env_megabytes("LUMINAL_CUDA_PREFETCH_MB", 0);
  return producer.kernel == "Attention" ? after_attention : otherwise;
}

// LUMINAL_CUDA_PREFETCH_WHOLE_KB: a weight of at most this many bytes is prefetched whole,
// whatever the budget (an MoE's router, 0.5 MB, whose latency-bound GEMV follows the o
// projection). For measuring; none by default.
static long long whole_prefetch_limit() {
  static const long long kb = [] {
    const char* v = std::getenv("LUMINAL_CUDA_PREFETCH_WHOLE_KB");
    return v ? std::max(0LL, std::atoll(v)) : 0LL;
  }();
  return kb << 10;
}

std::string linear_weight_prefetch(const ViewLayer* a, const ViewLayer* b, DType w_dtype, const LinearVariant& v, long long budget_bytes,
                                   const Expr* half) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r) return "";
  const size_t bytes = dtype_size(w_dtype);
  const Expr& n_cols = half ? *half : b->shape[r - 1];
  if (n_cols.is_const() && a->shape[r - 1].is_const()) {
    const long long whole = n_cols.value() * (half ? 2 : 1) * a->shape[r - 1].value() * static_cast<long long>(bytes);
    if (whole <= whole_prefetch_limit()) budget_bytes = std::max(budget_bytes, whole);
  }
  if (budget_bytes <= 0) return "";
  for (size_t d = 0; d + 2 < r; ++d)
    if (!a->shape[d].is_const(1)) return "";
  // A gated group's unit reads cols / 2 gate rows and the matching up rows (GatedEpilogue).
  const int cw = half ? v.cols / 2 : v.cols;
  // Each thread prefetches its team's units in the order the kernel reads them, whole weight
  // rows, until the units read first hold the budget's bytes: while the kernels before run
  // (attention, the norms), the weights stream into L2 and the memory system is not idle.
  const LinearUnits units = linear_units(v);
  std::ostringstream s;
  s << "  {\n    const long long lm_pn = " << (half ? c(*half) : c(b->shape[r - 1])) << ", lm_pk = " << c(a->shape[r - 1]) << " * " << bytes
    << ", lm_pt = (lm_pn + " << cw - 1 << ") / " << cw << ", lm_pu = (" << c(a->shape[r - 2]) << " + " << v.rows - 1 << ") / " << v.rows
    << " * lm_pt;\n"
    << "    const long long lm_plim = " << budget_bytes << "LL / (lm_pk * " << v.cols << " + 1) + 1;\n"
    << "    for (long long lm_w = " << units.block_first << " + " << units.team_offset << "; lm_w < lm_pu && lm_w < lm_plim; lm_w += " << units.step
    << ") {\n"
    << "      const long long lm_j = (lm_w % lm_pt) * " << cw << ";\n"
    << "      for (int lm_k = 0; lm_k < " << v.cols << "; ++lm_k) {\n"
    << (half ? "        const long long lm_col = lm_k < " + std::to_string(cw) + " ? lm_j + lm_k : lm_pn + lm_j + lm_k - " + std::to_string(cw) +
                   ";\n        if (lm_j + lm_k % " + std::to_string(cw) + " >= lm_pn) continue;\n"
             : "        const long long lm_col = lm_j + lm_k;\n        if (lm_col >= lm_pn) break;\n")
    << "        const char* lm_row = lm_in1 + (" << c(b->offset) << " + lm_col * " << c(b->strides[r - 1]) << ") * " << bytes << ";\n"
    << "        for (long long lm_at = (long long)(threadIdx.x % " << v.team << ") * 128; lm_at < lm_pk; lm_at += " << v.team * 128 << ")\n"
    << "          lm_prefetch_l2(lm_row + lm_at);\n"
    << "      }\n    }\n  }\n";
  return s.str();
}

}  // namespace luminal::cuda::gen
