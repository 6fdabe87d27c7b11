// The decode GEMV of linear layers (see strided_linear_body below).
#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cpu/fused_codegen.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

Expr linear_threads(const Expr& count, const LinearVariant& v) { return ceil_div(count, Expr(v.cols)) * Expr(v.team); }

// Appends `idx` to `list` where lm_on holds, in order of idx across the block: a ballot per warp,
// the warps' counts prefixed by thread 0 onto `count`; `bits` gets the ballots (a bit per idx
// below `limit`). Every thread of the block runs it (barriers).
static std::string append_listed(const std::string& in, const std::string& idx, const std::string& limit, const std::string& bits,
                                 const std::string& list, const std::string& count) {
  std::ostringstream s;
  s << in << "const unsigned lm_bal = __ballot_sync(0xffffffffu, lm_on);\n"
    << in << "if ((threadIdx.x & 31) == 0) { lm_wcnt[threadIdx.x >> 5] = __popc(lm_bal); if (" << idx << " < " << limit << ") " << bits << "["
    << idx << " >> 5] = lm_bal; }\n"
    << in << "__syncthreads();\n"
    << in << "if (threadIdx.x == 0) {\n"
    << in << "  int lm_t = " << count << ";\n"
    << in << "  for (int lm_x = 0; lm_x < (int)(blockDim.x >> 5); ++lm_x) { const int lm_n1 = lm_wcnt[lm_x]; lm_wcnt[lm_x] = lm_t; lm_t += lm_n1; }\n"
    << in << "  " << count << " = lm_t;\n" << in << "}\n"
    << in << "__syncthreads();\n"
    << in << "if (lm_on) " << list << "[lm_wcnt[threadIdx.x >> 5] + __popc(lm_bal & ((1u << (threadIdx.x & 31)) - 1u))] = (int)" << idx << ";\n"
    << in << "__syncthreads();\n";
  return s.str();
}

// ScaledMatmul, few batches of few rows (an MoE decode: 128 experts, one token): each block
// lists the batches with a nonzero scale, in order, in shared memory (a ballot per warp, so
// every block lists them alike), zeroes the other batches' outputs (after its units), and the units are
// then those of the listed batches alone (lm_units recounted): every block streams chosen
// experts' weights, where a grid over all experts leaves most warps idle. Else (a prefill's many
// rows) the units are every batch's, and a unit whose rows' scales are all zero reads no k.
static constexpr int kMaxListedBatches = 1024;
static std::string scaled_batches_prologue(const ViewLayer* a, const ViewLayer* scale,
                                           const std::function<std::string(const std::string&, DType)>& out_store) {
  const size_t r = a->shape.size();
  std::ostringstream s;
  s << "  __shared__ int lm_act[" << kMaxListedBatches << "];\n"
    << "  __shared__ unsigned lm_on_bits[" << kMaxListedBatches / 32 << "];\n"
    << "  __shared__ int lm_wcnt[" << kBlockThreads / 32 << "];\n  __shared__ int lm_nact;\n"
    << "  const long long lm_batches = lm_count / (lm_m * lm_n);\n"
    << "  const bool lm_compact = lm_batches <= " << kMaxListedBatches << " && lm_batches * lm_m <= 16384;\n"
    << "  if (lm_compact) {\n"
    << "    if (threadIdx.x == 0) lm_nact = 0;\n"
    << "    __syncthreads();\n"
    << "    for (long long lm_c0 = 0; lm_c0 < lm_batches; lm_c0 += blockDim.x) {\n"
    << "      const long long lm_cb = lm_c0 + threadIdx.x;\n"
    << "      bool lm_on = false;\n"
    << "      if (lm_cb < lm_batches) {\n"
    << "        long long lm_so = " << c(scale->offset) << ", lm_rem = lm_cb;\n";
  for (size_t d = r - 2; d-- > 0;)
    s << "        { const long long lm_c = lm_rem % " << c(a->shape[d]) << "; lm_rem /= " << c(a->shape[d]) << "; lm_so += lm_c * "
      << c(scale->strides[d]) << "; }\n";
  s << "        for (long long lm_i = 0; lm_i < lm_m && !lm_on; ++lm_i) lm_on = ((const float*)lm_in2)[lm_so + lm_i * "
    << c(scale->strides[r - 2]) << "] != 0.0f;\n"
    << "      }\n"
    << append_listed("      ", "lm_cb", "lm_batches", "lm_on_bits", "lm_act", "lm_nact")
    << "    }\n"
    << "    lm_units = (long long)lm_nact * lm_groups * lm_tiles;\n"
    << "  }\n";
  return s.str();
}

// After the units (so that the weight loads start first): the outputs of the batches the list
// left out are zero.
static std::string scaled_batches_epilogue(const std::function<std::string(const std::string&, DType)>& out_store) {
  std::ostringstream s;
  s << "  if (lm_compact)\n"
    << "    for (long long lm_z = (long long)blockIdx.x * blockDim.x + threadIdx.x; lm_z < lm_batches * lm_m * lm_n; lm_z += (long long)gridDim.x * blockDim.x) {\n"
    << "      const long long lm_zb = lm_z / (lm_m * lm_n);\n"
    << "      if (!((lm_on_bits[lm_zb >> 5] >> (lm_zb & 31)) & 1u)) { const float lm_v = 0.0f; " << out_store("lm_z", DType::F32) << "      }\n"
    << "    }\n";
  return s.str();
}

// ScaledMatmul with many rows (a prefill: each expert's tokens are a few of them): per (batch,
// run of column tiles), the block lists the batch's rows with a nonzero scale, in order, and its
// teams take them `rows` at a time, so a weight row is read once per group of listed rows, not
// once per group of all rows (most of which a token did not route there); then each team
// zeroes the unlisted rows of its columns. `kloop` and `stores` are the GEMV's own, with rows
// through lm_ar and stores at lm_rl. For at most kMaxListedRows rows of a batch; more take the
// units over every row.
static constexpr int kMaxListedRows = 4096;
static std::string scaled_rows_path(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const LinearVariant& v, bool bf16,
                                    const std::string& kloop, const std::string& stores,
                                    const std::function<std::string(const std::string&, DType)>& out_store) {
  const size_t r = a->shape.size();
  const int C = v.cols, T = v.team, R = v.rows, per = bf16 ? 8 : 4;
  const std::string wt = bf16 ? "uint16_t" : "float", srs = c(scale->strides[r - 2]);
  std::ostringstream s;
  s << "  if (!lm_compact && lm_m <= " << kMaxListedRows << ") {\n"
    << "    __shared__ int lm_rl[" << kMaxListedRows << "];\n"
    << "    __shared__ unsigned lm_rbits[" << kMaxListedRows / 32 << "];\n"
    << "    __shared__ int lm_nr;\n"
    << "    const long long lm_chunks = (lm_tiles + lm_teams - 1) / lm_teams;\n"
    << "    for (long long lm_item = blockIdx.x; lm_item < lm_batches * lm_chunks; lm_item += gridDim.x) {\n"
    << "      const long long lm_b = lm_item / lm_chunks, lm_tile = (lm_item % lm_chunks) * lm_teams + threadIdx.x / " << T << ";\n"
    << "      const bool lm_live = lm_tile < lm_tiles;\n"
    << "      const long long lm_j0 = (lm_live ? lm_tile : 0) * " << C << ";\n"
    << "      long long lm_ao = " << c(a->offset) << ", lm_bo = " << c(b->offset) << " + lm_j0 * " << c(b->strides[r - 1]) << ", lm_so = "
    << c(scale->offset) << ";\n"
    << "      { long long lm_rem = lm_b;\n";
  for (size_t d = r - 2; d-- > 0;)
    s << "        { const long long lm_c = lm_rem % " << c(a->shape[d]) << "; lm_rem /= " << c(a->shape[d]) << "; lm_ao += lm_c * "
      << c(a->strides[d]) << "; lm_bo += lm_c * " << c(b->strides[d]) << "; lm_so += lm_c * " << c(scale->strides[d]) << "; }\n";
  s << "      }\n"
    // The listing, as the batches' above: a ballot per warp, counts prefixed by thread 0.
    << "      __syncthreads();\n"
    << "      if (threadIdx.x == 0) lm_nr = 0;\n"
    << "      __syncthreads();\n"
    << "      for (long long lm_c0 = 0; lm_c0 < lm_m; lm_c0 += blockDim.x) {\n"
    << "        const long long lm_cr = lm_c0 + threadIdx.x;\n"
    << "        const bool lm_on = lm_cr < lm_m && ((const float*)lm_in2)[lm_so + lm_cr * " << srs << "] != 0.0f;\n"
    << append_listed("        ", "lm_cr", "lm_m", "lm_rbits", "lm_rl", "lm_nr")
    << "      }\n"
    << "      const int lm_nrb = lm_nr;\n"
    << "      const long long lm_as = " << c(a->strides[r - 2]) << ", lm_bs = " << c(b->strides[r - 1]) << ", lm_ke = lm_kk;\n"
    << "      const float* lm_A0 = (const float*)lm_in0 + lm_ao;\n"
    << "      const " << wt << "* lm_B = (const " << wt << "*)lm_in1 + lm_bo;\n";
  for (int k = 0; k < C; ++k) s << "      const long long lm_o" << k << " = (lm_j0 + " << k << " < lm_n ? " << k << " : 0) * lm_bs;\n";
  s << "      const bool lm_vec = ((lm_ao | lm_bo | lm_as | lm_kk" << (C > 1 ? " | lm_bs" : "") << ") & " << per - 1
    << ") == 0 && ((lm_ao | lm_as) & 3) == 0;\n"
    // Every team runs the same groups (lm_nrb is the block's), so the barriers in the sums of
    // wide teams are reached by all.
    << "      for (int lm_g0 = 0; lm_g0 < lm_nrb; lm_g0 += " << R << ") {\n"
    << "        const int lm_rows = lm_nrb - lm_g0 < " << R << " ? lm_nrb - lm_g0 : " << R << ";\n"
    << "        const float* lm_ar[" << R << "];\n        float lm_sc[" << R << "];\n"
    << "        for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
    << "          const int lm_row = lm_rl[lm_g0 + (lm_i < lm_rows ? lm_i : 0)];\n"
    << "          lm_ar[lm_i] = lm_A0 + lm_row * lm_as;\n"
    << "          lm_sc[lm_i] = ((const float*)lm_in2)[lm_so + lm_row * " << srs << "];\n"
    << "        }\n"
    << "        float lm_acc[" << R << "][" << C << "] = {};\n"
    << "        if (lm_live) {\n"
    << "      long long lm_p0 = 0;\n"
    << "      if (lm_vec) {\n"
    << kloop << "        }\n" << stores << "      }\n"
    // The rows the list left out, in this team's columns.
    << "      if (lm_live)\n"
    << "        for (long long lm_cr = lm_tid; lm_cr < lm_m; lm_cr += " << T << ")\n"
    << "          if (!((lm_rbits[lm_cr >> 5] >> (lm_cr & 31)) & 1u))\n"
    << "            for (int lm_k = 0; lm_k < " << C << "; ++lm_k)\n"
    << "              if (lm_j0 + lm_k < lm_n) { const float lm_v = 0.0f; const long long lm_z = (lm_b * lm_m + lm_cr) * lm_n + lm_j0 + lm_k; "
    << out_store("lm_z", DType::F32) << "              }\n"
    << "    }\n"
    << "    return;\n"
    << "  }\n";
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
                                               const LinearVariant& v, const ViewLayer* scale) {
  const size_t r = a ? a->shape.size() : 0;
  if (scale && (scale->shape.size() != r || dt.size() < 3 || dt[2] != DType::F32)) return std::nullopt;
  if (!a || !b || r < 2 || b->shape.size() != r || dt[0] != DType::F32 || (dt[1] != DType::F32 && dt[1] != DType::BF16)) return std::nullopt;
  if (!a->strides[r - 1].is_const(1) || !b->strides[r - 2].is_const(1)) return std::nullopt;
  if (v.team < 32 || v.team % 32 != 0 || kBlockThreads % v.team != 0 || v.cols < 1 || v.in_flight < 1 || v.rows < 1) return std::nullopt;
  const bool bf16 = dt[1] == DType::BF16;
  const int per = bf16 ? 8 : 4;  // W values per 16-byte load
  const int C = v.cols, T = v.team, U = v.in_flight, R = v.rows;
  const std::string vec = bf16 ? "uint4" : "float4", wt = bf16 ? "uint16_t" : "float";
  const std::string step = "(" + std::to_string(T) + " * " + std::to_string(per) + ")";
  std::ostringstream s;
  s << count_decl << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_kk = " << c(a->shape[r - 1]) << ", lm_n = " << c(b->shape[r - 1])
    << ";\n  if (lm_m <= 0 || lm_n <= 0) return;\n"
    << "  const long long lm_groups = (lm_m + " << R - 1 << ") / " << R << ", lm_tiles = (lm_n + " << C - 1 << ") / " << C << ";\n"
    << "  " << (scale ? "" : "const ") << "long long lm_units = lm_count / (lm_m * lm_n) * lm_groups * lm_tiles;\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_tid = threadIdx.x % " << T << ", lm_teams = blockDim.x / " << T << ";\n";
  if (T > 32) s << "  __shared__ float lm_part[" << kBlockThreads / 32 << "][" << R * C << "];\n";
  if (scale) s << scaled_batches_prologue(a, scale, out_store);
  const std::string head = s.str();  // the listed rows' path (ScaledMatmul) goes here
  s.str("");
  // Whole blocks step through the units together, so the barriers below are reached by all.
  s << "  for (long long lm_base = (long long)blockIdx.x * lm_teams; lm_base < lm_units; lm_base += (long long)gridDim.x * lm_teams) {\n"
    << "    const long long lm_w = lm_base + threadIdx.x / " << T << ";\n"
    << "    const bool lm_live = lm_w < lm_units;\n"
    << "    float lm_acc[" << R << "][" << C << "] = {};\n"
    << (scale ? "    float lm_sc[" + std::to_string(R) + "];\n" : std::string())
    << "    int lm_rows = 0;\n    long long lm_j0 = 0, lm_g = 0, lm_b = 0;\n"
    << "    if (lm_live) {\n"
    << "      lm_j0 = (lm_w % lm_tiles) * " << C << ";\n"
    << "      const long long lm_t = lm_w / lm_tiles;\n"
    << "      lm_b = " << (scale ? "lm_compact ? (long long)lm_act[lm_t / lm_groups] : " : "") << "lm_t / lm_groups;\n"
    << "      lm_g = lm_t % lm_groups;\n"
    << "      lm_rows = (int)(lm_m - lm_g * " << R << " < " << R << " ? lm_m - lm_g * " << R << " : " << R << ");\n"
    // The batch coordinates of b, into both operands' offsets.
    << "      long long lm_ao = " << c(a->offset) << ", lm_bo = " << c(b->offset) << " + lm_j0 * " << c(b->strides[r - 1]) << ";\n"
    << (scale ? "      long long lm_so = " + c(scale->offset) + ";\n" : std::string())
    << "      { long long lm_rem = lm_b;\n";
  for (size_t d = r - 2; d-- > 0;)
    s << "        { const long long lm_c = lm_rem % " << c(a->shape[d]) << "; lm_rem /= " << c(a->shape[d]) << "; lm_ao += lm_c * "
      << c(a->strides[d]) << "; lm_bo += lm_c * " << c(b->strides[d]) << ";" << (scale ? " lm_so += lm_c * " + c(scale->strides[d]) + ";" : "") << " }\n";
  s << "      }\n"
    << "      const long long lm_as = " << c(a->strides[r - 2]) << ", lm_bs = " << c(b->strides[r - 1]) << ";\n"
    << "      const float* lm_A = (const float*)lm_in0 + lm_ao + lm_g * " << R << " * lm_as;\n"
    << "      const " << wt << "* lm_B = (const " << wt << "*)lm_in1 + lm_bo;\n"
    << "      " << (scale ? "" : "const ") << "long long lm_ke = lm_kk;  // the k the unit reads: none where every row's scale is zero\n";
  if (scale)
    s << "      bool lm_any = false;\n"
      << "      for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
      << "        lm_sc[lm_i] = lm_i < lm_rows ? ((const float*)lm_in2)[lm_so + (lm_g * " << R << " + lm_i) * " << c(scale->strides[r - 2]) << "] : 0.0f;\n"
      << "        lm_any = lm_any || lm_sc[lm_i] != 0.0f;\n      }\n"
      << "      if (!lm_any) lm_ke = 0;\n";
  // A column past n reads the tile's first row again (its sums are not stored).
  for (int k = 0; k < C; ++k) s << "      const long long lm_o" << k << " = (lm_j0 + " << k << " < lm_n ? " << k << " : 0) * lm_bs;\n";
  // 16-byte loads need 16-byte aligned rows: true for every real weight (k a multiple of 8).
  s << "      const bool lm_vec = ((lm_ao | lm_bo | lm_as | lm_kk" << (C > 1 ? " | lm_bs" : "") << ") & " << per - 1
    << ") == 0 && ((lm_ao | lm_as) & 3) == 0;\n"
    << "      long long lm_p0 = 0;\n"
    << "      if (lm_vec) {\n";
  // The products of the 16-byte chunks of W at column `at` (registers lm_r<u>_<k>) with up to
  // `rows` rows of A: each A value is loaded once for all the tile's columns.
  std::string arow = "lm_A + lm_i * lm_as";  // row lm_i of the unit's A
  auto chunk = [&](int u, const std::string& at) {
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
    o << "            for (int lm_i = 0; lm_i < " << R << "; ++lm_i) {\n"
      << "              if (lm_i >= lm_rows) break;\n"
      << "              const float* lm_a = " << arow << " + " << at << ";\n"
      << "              for (int lm_e = 0; lm_e < " << per << "; lm_e += 4) {\n"
      << "                const float4 lm_x = *(const float4*)(lm_a + lm_e);\n"
      << "                for (int lm_k = 0; lm_k < " << C << "; ++lm_k) {\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.x, lm_wv[lm_k][lm_e], lm_acc[lm_i][lm_k]);\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.y, lm_wv[lm_k][lm_e + 1], lm_acc[lm_i][lm_k]);\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.z, lm_wv[lm_k][lm_e + 2], lm_acc[lm_i][lm_k]);\n"
      << "                  lm_acc[lm_i][lm_k] = __fmaf_rn(lm_x.w, lm_wv[lm_k][lm_e + 3], lm_acc[lm_i][lm_k]);\n"
      << "                }\n              }\n            }\n          }\n";
    return o.str();
  };
  std::string wload = "__ldcs";
  auto loads = [&](int u, const std::string& at) {
    std::ostringstream o;
    // Streaming loads (evict first): each weight is read once a step, and should not push the
    // activations out of the caches.
    for (int k = 0; k < C; ++k)
      o << "          const " << vec << " lm_r" << u << "_" << k << " = " << wload << "((const " << vec << "*)(lm_B + lm_o" << k << " + " << at << "));\n";
    return o.str();
  };
  // `in_flight` loads per column and thread before their products: decode is a stream over W,
  // and one outstanding 16-byte load per thread leaves the memory system idle between them.
  // The k loop after `if (lm_vec) {`, through the unaligned tail (`tail_a`: A's element lm_p of
  // row lm_i).
  auto kloop = [&](const std::string& tail_a) {
    std::ostringstream o;
    o << "        long long lm_p = lm_tid * " << per << ";\n"
      << "        for (; lm_p + " << U - 1 << " * " << step << " + " << per << " <= lm_ke; lm_p += " << U << " * " << step << ") {\n";
    for (int u = 0; u < U; ++u) o << loads(u, "lm_p + " + std::to_string(u) + " * " + step);
    for (int u = 0; u < U; ++u) o << chunk(u, "lm_p + " + std::to_string(u) + " * " + step);
    o << "        }\n"
      << "        for (; lm_p + " << per << " <= lm_ke; lm_p += " << step << ") {\n"
      << loads(0, "lm_p") << chunk(0, "lm_p") << "        }\n"
      << "        lm_p0 = lm_ke;\n      }\n"
      // Unaligned rows: one element per thread per step.
      << "      for (long long lm_p = lm_p0 + lm_tid; lm_p < lm_ke; lm_p += " << T << ") {\n";
    for (int k = 0; k < C; ++k)
      o << "        { const float lm_wv = " << (bf16 ? "lm_bf16_f32(lm_B[lm_o" + std::to_string(k) + " + lm_p])" : "lm_B[lm_o" + std::to_string(k) + " + lm_p]")
        << ";\n          for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n"
        << "            if (lm_i < lm_rows) lm_acc[lm_i][" << k << "] = __fmaf_rn(" << tail_a << ", lm_wv, lm_acc[lm_i][" << k << "]); }\n";
    o << "      }\n";
    return o.str();
  };
  s << kloop("lm_A[lm_i * lm_as + lm_p]") << "    }\n";
  // The sums, then the stores: row lm_i of the unit at output row `row` of its batch.
  auto stores = [&](const std::string& row) {
    std::ostringstream o;
    // A shuffle tree per warp (every lane of a warp is in one team, live or not).
    o << "    for (int lm_i = 0; lm_i < " << R << "; ++lm_i)\n"
      << "      for (int lm_k = 0; lm_k < " << C << "; ++lm_k) {\n"
      << "        float lm_v = lm_acc[lm_i][lm_k];\n"
      << "        for (int lm_s = 16; lm_s > 0; lm_s >>= 1) lm_v += __shfl_xor_sync(0xffffffffu, lm_v, lm_s);\n";
    if (T == 32)
      o << "        if (lm_live && lm_lane == 0 && lm_i < lm_rows && lm_j0 + lm_k < lm_n) {\n"
        << (scale ? "          lm_v *= lm_sc[lm_i];\n" : "")
        << "          const long long lm_z = (lm_b * lm_m + " << row << ") * lm_n + lm_j0 + lm_k; " << out_store("lm_z", DType::F32)
        << "        }\n      }\n";
    else  // then across the team's warps, in warp order
      o << "        if (lm_lane == 0) lm_part[threadIdx.x >> 5][lm_i * " << C << " + lm_k] = lm_v;\n      }\n"
        << "    __syncthreads();\n"
        << "    if (lm_live && lm_tid < " << R * C << ") {\n"
        << "      const int lm_i = lm_tid / " << C << ", lm_k = lm_tid % " << C << ";\n"
        << "      if (lm_i < lm_rows && lm_j0 + lm_k < lm_n) {\n"
        << "        float lm_v = 0.0f;\n"
        << "        for (int lm_x = 0; lm_x < " << T / 32 << "; ++lm_x) lm_v += lm_part[(threadIdx.x / " << T << ") * " << T / 32 << " + lm_x][lm_tid];\n"
        << (scale ? "        lm_v *= lm_sc[lm_i];\n" : "")
        << "        const long long lm_z = (lm_b * lm_m + " << row << ") * lm_n + lm_j0 + lm_k; " << out_store("lm_z", DType::F32)
        << "      }\n    }\n    __syncthreads();\n";
    return o.str();
  };
  s << stores("lm_g * " + std::to_string(R) + " + lm_i") << "  }\n";
  if (scale) s << scaled_batches_epilogue(out_store);
  if (!scale) return head + s.str();
  arow = "lm_ar[lm_i]";
  wload = "__ldg";  // each group of listed rows reads the weight rows again: keep them cached
  return head + scaled_rows_path(a, b, scale, v, bf16, kloop("lm_ar[lm_i][lm_p]"), stores("lm_rl[lm_g0 + lm_i]"), out_store) + s.str();
}

// How many bytes of a linear layer's weight the prefetch covers (LUMINAL_CUDA_PREFETCH_MB, for
// measuring): a seventh of H200's 60 MB L2, so lines fetched early are still there when the
// kernel reaches them and the activations and KV cache keep their place.
static long long prefetch_budget_bytes() {
  static const long long bytes = [] {
    const char* mb = std::getenv("LUMINAL_CUDA_PREFETCH_MB");
    return (mb ? std::max(0LL, std::atoll(mb)) : 8LL) << 20;
  }();
  return bytes;
}

std::string linear_weight_prefetch(const ViewLayer* a, const ViewLayer* b, DType w_dtype, const LinearVariant& v) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r) return "";
  for (size_t d = 0; d + 2 < r; ++d)
    if (!a->shape[d].is_const(1)) return "";
  const size_t bytes = dtype_size(w_dtype);
  // Each thread prefetches its team's units in the order the kernel reads them, whole weight
  // rows, until the units read first hold the budget's bytes: while the kernels before run
  // (attention, the norms), the weights stream into L2 and the memory system is not idle.
  std::ostringstream s;
  s << "  {\n    const long long lm_pn = " << c(b->shape[r - 1]) << ", lm_pk = " << c(a->shape[r - 1]) << " * " << bytes << ", lm_pt = (lm_pn + "
    << v.cols - 1 << ") / " << v.cols << ", lm_pu = (" << c(a->shape[r - 2]) << " + " << v.rows - 1 << ") / " << v.rows << " * lm_pt;\n"
    << "    const long long lm_plim = " << prefetch_budget_bytes() << "LL / (lm_pk * " << v.cols << " + 1) + 1;\n"
    << "    const long long lm_pstep = (long long)gridDim.x * (blockDim.x / " << v.team << ");\n"
    << "    for (long long lm_w = (long long)blockIdx.x * (blockDim.x / " << v.team << ") + threadIdx.x / " << v.team
    << "; lm_w < lm_pu && lm_w < lm_plim; lm_w += lm_pstep) {\n"
    << "      const long long lm_j = (lm_w % lm_pt) * " << v.cols << ";\n"
    << "      for (int lm_k = 0; lm_k < " << v.cols << " && lm_j + lm_k < lm_pn; ++lm_k) {\n"
    << "        const char* lm_row = lm_in1 + (" << c(b->offset) << " + (lm_j + lm_k) * " << c(b->strides[r - 1]) << ") * " << bytes << ";\n"
    << "        for (long long lm_at = (long long)(threadIdx.x % " << v.team << ") * 128; lm_at < lm_pk; lm_at += " << v.team * 128 << ")\n"
    << "          asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(lm_row + lm_at));\n"
    << "      }\n    }\n  }\n";
  return s.str();
}

}  // namespace luminal::cuda::gen
