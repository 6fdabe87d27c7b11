// An MoE's expert products and their sum over the experts in one GEMV (see expert_sum_body).
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

Expr expert_sum_threads(const Expr& rows, const Expr& n, const ExpertSumVariant& v) {
  return ceil_div(rows, Expr(v.rows)) * ceil_div(n, Expr(v.cols)) * Expr(v.team);
}

// out[i, j] = sum over the experts e whose scale is not zero of s[e, i] * (A[e, i, :] · B[e, :, j]),
// with A (lm_xa, f32) [E, m, k], B (lm_xb, f32 or bf16) [E, k, n] with unit stride along k (an
// expert's row-major [n, k] weight), s (lm_xs, f32) shaped as A and constant along k. Each
// block first lists the experts that some row's scale chooses (as scaled_batches_prologue
// does); a unit is `cols` adjacent columns of `rows` rows, and its team streams the listed
// experts' weight rows end to end, as one k of (listed experts) x k: the chunk at p belongs to
// expert lm_act[p / k]. Each chunk's products are summed, then added to the unit's sums times
// that expert's scale, so the sums over k and over experts meet in one shuffle tree. No
// [E, m, n] intermediate is written (a decode's sum over 128 experts read 120 zero rows of it).
std::optional<std::string> expert_sum_body(const ViewLayer* a, const ViewLayer* b, const ViewLayer* s, DType w_dtype,
                                           const std::function<std::string(const std::string&, const std::string&)>& store,
                                           const ExpertSumVariant& v, std::string* before_wait) {
  if (!a || !b || !s || a->shape.size() != 3 || b->shape.size() != 3 || s->shape.size() != 3) return std::nullopt;
  if (!a->strides[2].is_const(1) || !b->strides[1].is_const(1) || !s->strides[2].is_const(0)) return std::nullopt;
  if (!a->shape[0].is_const() || a->shape[0].value() > kMaxListedExperts) return std::nullopt;
  if (w_dtype != DType::F32 && w_dtype != DType::BF16) return std::nullopt;
  if (v.team < 32 || v.team % 32 != 0 || kBlockThreads % v.team != 0 || v.cols < 1 || v.rows < 1) return std::nullopt;
  const bool bf16 = w_dtype == DType::BF16;
  const int C = v.cols, T = v.team, R = v.rows, U = 4, per = bf16 ? 8 : 4;
  const std::string vec = bf16 ? "uint4" : "float4", wt = bf16 ? "uint16_t" : "float";
  const std::string step = std::to_string(T * per);
  std::ostringstream o;
  o << "  const long long lm_E = " << c(a->shape[0]) << ", lm_m = " << c(a->shape[1]) << ", lm_kk = " << c(a->shape[2]) << ", lm_n = " << c(b->shape[2])
    << ";\n  if (lm_m <= 0 || lm_n <= 0) return;\n"
    << "  __shared__ int lm_act[" << kMaxListedExperts << "];\n"
    << "  __shared__ unsigned lm_on_bits[" << kMaxListedExperts / 32 << "];\n"
    << "  __shared__ int lm_wcnt[" << kBlockThreads / 32 << "];\n";
  if (T > 32) o << "  __shared__ float lm_part[" << kBlockThreads / 32 << "][" << R * C << "];\n";
  o << "  int lm_nact = 0;\n"
    << "  for (long long lm_c0 = 0; lm_c0 < lm_E; lm_c0 += blockDim.x) {\n"
    << "    const long long lm_cb = lm_c0 + threadIdx.x;\n    bool lm_on = false;\n"
    << "    if (lm_cb < lm_E)\n"
    << "      for (long long lm_i = 0; lm_i < lm_m && !lm_on; ++lm_i)\n"
    << "        lm_on = " << (before_wait ? "__ldcg((const float*)lm_xs + " : "((const float*)lm_xs)[") << c(s->offset) << " + lm_cb * " << c(s->strides[0])
    << " + lm_i * " << c(s->strides[1]) << (before_wait ? ")" : "]") << " != 0.0f;\n"
    << append_listed("    ", "lm_cb", "lm_E", "lm_on_bits", "lm_act", "lm_nact") << "  }\n"
    << "  const long long lm_len = (long long)lm_nact * lm_kk;  // the listed experts' k, end to end\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_tid = threadIdx.x % " << T << ", lm_teams = blockDim.x / " << T << ";\n"
    << "  const long long lm_groups = (lm_m + " << R - 1 << ") / " << R << ", lm_tiles = (lm_n + " << C - 1 << ") / " << C
    << ", lm_units = lm_groups * lm_tiles;\n"
    << "  const long long lm_ae = " << c(a->strides[0]) << ", lm_as = " << c(a->strides[1]) << ", lm_be = " << c(b->strides[0])
    << ", lm_bs = " << c(b->strides[2]) << ", lm_se = " << c(s->strides[0]) << ", lm_ss = " << c(s->strides[1]) << ";\n"
    // 16-byte loads need every chunk's weight row and activations aligned: true for real models.
    << "  const bool lm_vec = ((" << c(b->offset) << " | lm_be | lm_bs | lm_kk) & " << per - 1 << ") == 0 && ((" << c(a->offset)
    << " | lm_ae | lm_as) & 3) == 0;\n";
  // With `before_wait`, all of the above runs before the kernel's wait (the scales read from L2:
  // their producer finished before the kernel before this one released it, CudaExecutor), and
  // so do the weight loads of the first pass of each thread's first unit (lm_pw<u>_<k>, lm_pre);
  // after the wait that pass is summed into lm_acc, which lives through the units' loop (zeroed
  // after each unit's stores), and the unit's loop starts at its second pass.
  const bool pre = before_wait != nullptr;
  const std::string head = o.str();
  o.str("");
  // Unit lm_w's rows, columns and operands (lm_live: whether it is one).
  std::string unit_setup =
      "    const long long lm_j0 = lm_live ? (lm_w % lm_tiles) * " + std::to_string(C) + " : 0, lm_g = lm_live ? lm_w / lm_tiles : 0;\n" +
      "    const int lm_rows = lm_live ? (int)(lm_m - lm_g * " + std::to_string(R) + " < " + std::to_string(R) + " ? lm_m - lm_g * " +
      std::to_string(R) + " : " + std::to_string(R) + ") : 0;\n" + "    const float* lm_A = (const float*)lm_xa + " + c(a->offset) + " + lm_g * " +
      std::to_string(R) + " * lm_as;\n" + "    const " + wt + "* lm_B = (const " + wt + "*)lm_xb + " + c(b->offset) + " + lm_j0 * lm_bs;\n" +
      "    const float* lm_S = (const float*)lm_xs + " + c(s->offset) + " + lm_g * " + std::to_string(R) + " * lm_ss;\n";
  // A column past n reads the tile's first column again (its sums are not stored).
  for (int k = 0; k < C; ++k)
    unit_setup += "    const long long lm_o" + std::to_string(k) + " = (lm_j0 + " + std::to_string(k) + " < lm_n ? " + std::to_string(k) + " : 0) * lm_bs;\n";
  // Whole blocks step through the units together, so the barriers of wide teams are reached by all.
  o << "  for (long long lm_base = (long long)blockIdx.x * lm_teams; lm_base < lm_units; lm_base += (long long)gridDim.x * lm_teams) {\n"
    << "    const long long lm_w = lm_base + threadIdx.x / " << T << ";\n"
    << "    const bool lm_live = lm_w < lm_units;\n"
    << (pre ? "    const bool lm_from_pre = lm_pre;  // the unit whose first pass is in lm_acc already\n    lm_pre = false;\n"
            : "    float lm_acc[" + std::to_string(R) + "][" + std::to_string(C) + "] = {};\n")
    << unit_setup;
  // Chunk u of the loop: its expert's offsets, then C weight loads (streaming: read once a step).
  // With one row a unit (a decode's), the chunk's activations and scale load here too, with the
  // weights: loaded in the products below, each chunk's went out only after the chunk before
  // had been summed, one trip to L2 after another (session 43, read in the SASS).
  const bool early = R == 1;
  auto index = [&](int u) {
    return "        const long long lm_p" + std::to_string(u) + " = lm_p + " + std::to_string(u) + " * " + step + ";\n" +
           "        const int lm_x" + std::to_string(u) + " = (int)(lm_p" + std::to_string(u) + " / lm_kk);\n" +
           "        const long long lm_e" + std::to_string(u) + " = lm_act[lm_x" + std::to_string(u) + "], lm_q" + std::to_string(u) + " = lm_p" +
           std::to_string(u) + " - lm_x" + std::to_string(u) + " * lm_kk;\n";
  };
  // Chunk u's weights into `name`<u>_<k> (declared with `decl`, "" where they were).
  auto weights = [&](int u, const std::string& name, const std::string& decl) {
    std::string l;
    for (int k = 0; k < C; ++k)
      l += "        " + decl + name + std::to_string(u) + "_" + std::to_string(k) + " = __ldcs((const " + vec + "*)(lm_B + lm_e" + std::to_string(u) +
           " * lm_be + lm_o" + std::to_string(k) + " + lm_q" + std::to_string(u) + "));\n";
    return l;
  };
  auto loads = [&](int u, bool with_weights = true) {
    std::ostringstream l;
    const std::string U_ = std::to_string(u);
    l << index(u);
    if (with_weights) l << weights(u, "lm_r", "const " + vec + " ");
    if (early) {
      l << "        const float lm_s" << U_ << " = lm_S[lm_e" << U_ << " * lm_se];\n";
      for (int f = 0; f < per; f += 4)
        l << "        const float4 lm_a" << U_ << "_" << f / 4 << " = *(const float4*)(lm_A + lm_e" << U_ << " * lm_ae + lm_q" << U_ << " + " << f << ");\n";
    }
    return l.str();
  };
  auto products = [&](int u) {
    std::ostringstream l;
    const std::string U_ = std::to_string(u);
    l << "        {\n          float lm_wv[" << C << "][" << per << "];\n";
    for (int k = 0; k < C; ++k) {
      const std::string raw = "lm_r" + U_ + "_" + std::to_string(k), w = "lm_wv[" + std::to_string(k) + "]";
      if (bf16)
        for (int h = 0; h < 4; ++h) {
          const char* f = "xyzw";
          l << "          " << w << "[" << 2 * h << "] = __uint_as_float(" << raw << "." << f[h] << " << 16); " << w << "[" << 2 * h + 1
            << "] = __uint_as_float(" << raw << "." << f[h] << " & 0xffff0000u);\n";
        }
      else
        l << "          " << w << "[0] = " << raw << ".x; " << w << "[1] = " << raw << ".y; " << w << "[2] = " << raw << ".z; " << w << "[3] = " << raw
          << ".w;\n";
    }
    if (early) {  // the one row, its values loaded with the weights
      l << "          {\n"
        << "            const int lm_i = 0;\n"
        << "            const float lm_sc = lm_s" << U_ << ";\n"
        << "            const float4 lm_xa[" << per / 4 << "] = {";
      for (int f = 0; f < per; f += 4) l << (f ? ", " : "") << "lm_a" << U_ << "_" << f / 4;
      l << "};\n";
    } else {
      l << "          for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
        << "            if (lm_i >= lm_rows) break;\n"
        << "            const float lm_sc = lm_S[lm_e" << u << " * lm_se + lm_i * lm_ss];\n"
        << "            const float* lm_a = lm_A + lm_e" << u << " * lm_ae + lm_i * lm_as + lm_q" << u << ";\n";
    }
    l << "            float lm_t[" << C << "] = {};\n"
      << "            for (int lm_f = 0; lm_f < " << per << "; lm_f += 4) {\n"
      << "              const float4 lm_x = " << (early ? "lm_xa[lm_f / 4]" : "*(const float4*)(lm_a + lm_f)") << ";\n"
      << "              for (int lm_k = 0; lm_k < " << C << "; ++lm_k) {\n"
      << "                lm_t[lm_k] = __fmaf_rn(lm_x.x, lm_wv[lm_k][lm_f], lm_t[lm_k]);\n"
      << "                lm_t[lm_k] = __fmaf_rn(lm_x.y, lm_wv[lm_k][lm_f + 1], lm_t[lm_k]);\n"
      << "                lm_t[lm_k] = __fmaf_rn(lm_x.z, lm_wv[lm_k][lm_f + 2], lm_t[lm_k]);\n"
      << "                lm_t[lm_k] = __fmaf_rn(lm_x.w, lm_wv[lm_k][lm_f + 3], lm_t[lm_k]);\n"
      << "              }\n            }\n"
      << "            for (int lm_k = 0; lm_k < " << C << "; ++lm_k) lm_acc[lm_i][lm_k] = __fmaf_rn(lm_sc, lm_t[lm_k], lm_acc[lm_i][lm_k]);\n"
      << "          }\n        }\n";
    return l.str();
  };
  o << "    if (lm_live && lm_vec) {\n"
    << "      long long lm_p = lm_tid * " << per << (pre ? " + (lm_from_pre ? " + std::to_string(U) + " * " + step + " : 0)" : "") << ";\n"
    << "      for (; lm_p + " << U - 1 << " * " << step << " + " << per << " <= lm_len; lm_p += " << U << " * " << step << ") {\n";
  for (int u = 0; u < U; ++u) o << loads(u);
  for (int u = 0; u < U; ++u) o << products(u);
  o << "      }\n"
    << "      for (; lm_p + " << per << " <= lm_len; lm_p += " << step << ") {\n"
    << loads(0) << products(0) << "      }\n"
    << "    } else if (lm_live) {  // unaligned rows: an element per thread per step\n"
    << "      for (long long lm_p = lm_tid; lm_p < lm_len; lm_p += " << T << ") {\n"
    << "        const int lm_x = (int)(lm_p / lm_kk);\n"
    << "        const long long lm_e = lm_act[lm_x], lm_q = lm_p - lm_x * lm_kk;\n"
    << "        for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
    << "          if (lm_i >= lm_rows) break;\n"
    << "          const float lm_xv = __fmul_rn(lm_S[lm_e * lm_se + lm_i * lm_ss], lm_A[lm_e * lm_ae + lm_i * lm_as + lm_q]);\n";
  for (int k = 0; k < C; ++k)
    o << "          lm_acc[lm_i][" << k << "] = __fmaf_rn(lm_xv, " << (bf16 ? "lm_bf16_f32(" : "(") << "lm_B[lm_e * lm_be + lm_o" << k
      << " + lm_q]), lm_acc[lm_i][" << k << "]);\n";
  o << "        }\n      }\n    }\n";
  // The sums: a shuffle tree per warp (every lane of a warp is in one team, live or not), then
  // across the team's warps in warp order.
  auto put = [&](const std::string& in) {
    return in + "const long long lm_z = (lm_g * " + std::to_string(R) + " + lm_i) * lm_n + lm_j0 + lm_k;\n" + in + store("lm_z", "lm_v");
  };
  o << "    for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n"
    << "      for (int lm_k = 0; lm_k < " << C << "; ++lm_k) {\n"
    << "        float lm_v = lm_acc[lm_i][lm_k];\n"
    << "        for (int lm_h = 16; lm_h > 0; lm_h >>= 1) lm_v += __shfl_xor_sync(0xffffffffu, lm_v, lm_h);\n";
  if (T == 32)
    o << "        if (lm_live && lm_lane == 0 && lm_i < lm_rows && lm_j0 + lm_k < lm_n) {\n" << put("          ") << "        }\n      }\n";
  else
    o << "        if (lm_lane == 0) lm_part[threadIdx.x >> 5][lm_i * " << C << " + lm_k] = lm_v;\n      }\n"
      << "    __syncthreads();\n"
      << "    if (lm_live && lm_tid < " << R * C << ") {\n"
      << "      const int lm_i = lm_tid / " << C << ", lm_k = lm_tid % " << C << ";\n"
      << "      if (lm_i < lm_rows && lm_j0 + lm_k < lm_n) {\n"
      << "        float lm_v = 0.0f;\n"
      << "        for (int lm_y = 0; lm_y < " << T / 32 << "; ++lm_y) lm_v += lm_part[(threadIdx.x / " << T << ") * " << T / 32
      << " + lm_y][lm_i * " << C << " + lm_k];\n"
      << put("        ") << "      }\n    }\n    __syncthreads();\n";
  if (pre) o << "    for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n      for (int lm_k = 0; lm_k < " << C << "; ++lm_k) lm_acc[lm_i][lm_k] = 0.0f;\n";
  o << "  }\n";
  if (!pre) return head + o.str();
  // Before the wait: the first pass's weights of the thread's first unit.
  const std::string first_unit = "    const long long lm_w = (long long)blockIdx.x * lm_teams + threadIdx.x / " + std::to_string(T) +
                                 ";\n    const bool lm_live = lm_w < lm_units;\n" + unit_setup +
                                 "    long long lm_p = lm_tid * " + std::to_string(per) + ";\n";
  const std::string fits = "lm_live && lm_vec && lm_p + " + std::to_string(U - 1) + " * " + step + " + " + std::to_string(per) + " <= lm_len";
  std::ostringstream w;
  w << "  " << vec << " ";
  for (int u = 0; u < U; ++u)
    for (int k = 0; k < C; ++k) w << (u || k ? ", " : "") << "lm_pw" << u << "_" << k;
  w << ";\n  bool lm_pre = false;\n  {\n" << first_unit << "    if (" << fits << ") {\n";
  for (int u = 0; u < U; ++u) w << index(u) << weights(u, "lm_pw", "");
  w << "      lm_pre = true;\n    }\n  }\n";
  *before_wait = head + w.str();
  // After it: that pass's products (its activations and scales loaded now).
  std::ostringstream f;
  f << "  float lm_acc[" << R << "][" << C << "] = {};\n  if (lm_pre) {\n" << first_unit;
  for (int u = 0; u < U; ++u) {
    f << loads(u, false);
    for (int k = 0; k < C; ++k) f << "        const " << vec << " lm_r" << u << "_" << k << " = lm_pw" << u << "_" << k << ";\n";
  }
  for (int u = 0; u < U; ++u) f << products(u);
  f << "  }\n";
  return f.str() + o.str();
}

}  // namespace luminal::cuda::gen
