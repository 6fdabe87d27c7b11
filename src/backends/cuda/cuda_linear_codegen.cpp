// The decode GEMV of linear layers (see strided_linear_body below).
#include <sstream>

#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cpu/fused_codegen.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

// Matmul C[b, i, j] = sum_p A[b, i, p] * B[b, p, j] where both operands are plain strided, A is
// f32 with unit stride along k and B (f32 or bf16) has unit stride along k too: a linear layer,
// B = Wᵀ of a row-major [n, k] weight. One warp per output column j and group of up to four rows
// of A: each lane loads 16 bytes of W's row at a time (8 bf16 or 4 f32) and the matching A
// values, so the weight streams through in full 128-byte lines, read once per group of rows.
// Sums use FMA and a shuffle tree (float rounding, not the reference's order).
std::optional<std::string> strided_linear_body(const ViewLayer* a, const ViewLayer* b, const std::vector<DType>& dt,
                                               const std::string& count_decl,
                                               const std::function<std::string(const std::string&, DType)>& out_store,
                                               int in_flight, bool split_k) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r || dt[0] != DType::F32 || (dt[1] != DType::F32 && dt[1] != DType::BF16)) return std::nullopt;
  if (!a->strides[r - 1].is_const(1) || !b->strides[r - 2].is_const(1)) return std::nullopt;
  const bool bf16 = dt[1] == DType::BF16;
  const int per = bf16 ? 8 : 4;  // W values per 16-byte load
  std::ostringstream s;
  s << count_decl << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_kk = " << c(a->shape[r - 1]) << ", lm_n = " << c(b->shape[r - 1])
    << ";\n  const long long lm_groups = (lm_m + 3) / 4, lm_warps = lm_count / lm_m * lm_groups;\n"
    << "  const int lm_lane = threadIdx.x & 31;\n";
  if (split_k)  // a block per output column, its warps over eighths of k
    s << "  const int lm_wid = threadIdx.x >> 5, lm_nw = blockDim.x >> 5;\n  __shared__ float lm_part[32][4];\n"
      << "  for (long long lm_w = blockIdx.x; lm_w < lm_warps; lm_w += gridDim.x) {\n";
  else
    s << "  for (long long lm_w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; lm_w < lm_warps;"
         " lm_w += ((long long)gridDim.x * blockDim.x) >> 5) {\n";
  s
    << "    const long long lm_j = lm_w % lm_n, lm_t = lm_w / lm_n, lm_g = lm_t % lm_groups, lm_b = lm_t / lm_groups;\n"
    << "    const int lm_rows = (int)(lm_m - lm_g * 4 < 4 ? lm_m - lm_g * 4 : 4);\n"
    // The batch coordinates of b, into both operands' offsets.
    << "    long long lm_ao = " << c(a->offset) << ", lm_bo = " << c(b->offset) << " + lm_j * " << c(b->strides[r - 1]) << ";\n"
    << "    { long long lm_rem = lm_b;\n";
  for (size_t d = r - 2; d-- > 0;)
    s << "      { const long long lm_c = lm_rem % " << c(a->shape[d]) << "; lm_rem /= " << c(a->shape[d]) << "; lm_ao += lm_c * "
      << c(a->strides[d]) << "; lm_bo += lm_c * " << c(b->strides[d]) << "; }\n";
  s << "    }\n"
    << "    const long long lm_as = " << c(a->strides[r - 2]) << ";\n"
    << "    const float* lm_A = (const float*)lm_in0 + lm_ao + lm_g * 4 * lm_as;\n"
    << "    const " << (bf16 ? "uint16_t" : "float") << "* lm_B = (const " << (bf16 ? "uint16_t" : "float") << "*)lm_in1 + lm_bo;\n"
    << "    float lm_acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
    // 16-byte loads need 16-byte aligned rows: true for every real weight (k a multiple of 8).
    << "    const bool lm_vec = ((lm_ao | lm_bo | lm_as | lm_kk) & " << (per - 1) << ") == 0 && ((lm_ao | lm_as) & 3) == 0;\n"
    << (split_k ? "    const long long lm_span = (lm_kk + lm_nw * " + std::to_string(per) + " - 1) / (lm_nw * " + std::to_string(per) + ") * " +
                      std::to_string(per) + ", lm_kb = lm_wid * lm_span < lm_kk ? lm_wid * lm_span : lm_kk,"
                      " lm_ke = lm_kb + lm_span < lm_kk ? lm_kb + lm_span : lm_kk;\n"
                : "    const long long lm_kb = 0, lm_ke = lm_kk;\n")
    << "    long long lm_p0 = lm_kb;\n"
    << "    if (lm_vec) {\n";
  // The products of one 16-byte chunk of W (register `raw`, at column `at`) with up to four rows.
  auto chunk = [&](const std::string& raw, const std::string& at) {
    std::ostringstream o;
    o << "        {\n          float lm_wv[" << per << "];\n";
    if (bf16)
      o << "          const uint32_t lm_u[4] = {" << raw << ".x, " << raw << ".y, " << raw << ".z, " << raw << ".w};\n"
        << "          for (int lm_e = 0; lm_e < 4; ++lm_e) { lm_wv[2 * lm_e] = __uint_as_float(lm_u[lm_e] << 16);"
           " lm_wv[2 * lm_e + 1] = __uint_as_float(lm_u[lm_e] & 0xffff0000u); }\n";
    else
      o << "          lm_wv[0] = " << raw << ".x; lm_wv[1] = " << raw << ".y; lm_wv[2] = " << raw << ".z; lm_wv[3] = " << raw << ".w;\n";
    o << "          for (int lm_i = 0; lm_i < 4; ++lm_i) {\n"
      << "            if (lm_i >= lm_rows) break;\n"
      << "            const float* lm_a = lm_A + lm_i * lm_as + " << at << ";\n"
      << "            for (int lm_e = 0; lm_e < " << per << "; lm_e += 4) {\n"
      << "              const float4 lm_x = *(const float4*)(lm_a + lm_e);\n"
      << "              lm_acc[lm_i] = __fmaf_rn(lm_x.x, lm_wv[lm_e], lm_acc[lm_i]);\n"
      << "              lm_acc[lm_i] = __fmaf_rn(lm_x.y, lm_wv[lm_e + 1], lm_acc[lm_i]);\n"
      << "              lm_acc[lm_i] = __fmaf_rn(lm_x.z, lm_wv[lm_e + 2], lm_acc[lm_i]);\n"
      << "              lm_acc[lm_i] = __fmaf_rn(lm_x.w, lm_wv[lm_e + 3], lm_acc[lm_i]);\n"
      << "            }\n          }\n        }\n";
    return o.str();
  };
  const std::string vec = bf16 ? "uint4" : "float4";
  const std::string step = "(32 * " + std::to_string(per) + ")";
  // `in_flight` loads per lane before their products: decode is a stream over W, and one
  // outstanding 16-byte load per lane leaves the memory system idle between them.
  s << "      long long lm_p = lm_kb + lm_lane * " << per << ";\n"
    << "      for (; lm_p + " << in_flight - 1 << " * " << step << " + " << per << " <= lm_ke; lm_p += " << in_flight << " * " << step << ") {\n";
  for (int u = 0; u < in_flight; ++u)
    s << "        const " << vec << " lm_r" << u << " = __ldg((const " << vec << "*)(lm_B + lm_p + " << u << " * " << step << "));\n";
  for (int u = 0; u < in_flight; ++u) s << chunk("lm_r" + std::to_string(u), "lm_p + " + std::to_string(u) + " * " + step);
  s << "      }\n"
    << "      for (; lm_p + " << per << " <= lm_ke; lm_p += " << step << ") {\n"
    << "        const " << vec << " lm_r0 = __ldg((const " << vec << "*)(lm_B + lm_p));\n"
    << chunk("lm_r0", "lm_p") << "      }\n"
    << "      lm_p0 = lm_ke;\n    }\n"
    // Unaligned rows: one element per lane per step.
    << "    for (long long lm_p = lm_p0 + lm_lane; lm_p < lm_ke; lm_p += 32) {\n"
    << "      const float lm_wv = " << (bf16 ? "lm_bf16_f32(lm_B[lm_p])" : "lm_B[lm_p]") << ";\n"
    << "      for (int lm_i = 0; lm_i < 4; ++lm_i)\n"
    << "        if (lm_i < lm_rows) lm_acc[lm_i] = __fmaf_rn(lm_A[lm_i * lm_as + lm_p], lm_wv, lm_acc[lm_i]);\n    }\n"
    << "    for (int lm_i = 0; lm_i < 4; ++lm_i) {\n"
    << "      float lm_v = lm_acc[lm_i];\n"
    << "      for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_v += __shfl_xor_sync(0xffffffffu, lm_v, lm_o);\n";
  if (split_k)  // the warps' sums meet in shared memory, added in warp order
    s << "      if (lm_lane == 0) lm_part[lm_wid][lm_i] = lm_v;\n    }\n    __syncthreads();\n"
      << "    if (lm_wid == 0 && lm_lane < 4 && lm_lane < lm_rows) {\n"
      << "      const int lm_i = lm_lane;\n      float lm_v = 0.0f;\n"
      << "      for (int lm_x = 0; lm_x < lm_nw; ++lm_x) lm_v += lm_part[lm_x][lm_i];\n"
      << "      const long long lm_z = (lm_b * lm_m + lm_g * 4 + lm_i) * lm_n + lm_j; " << out_store("lm_z", DType::F32) << "    }\n"
      << "    __syncthreads();\n  }\n";
  else
    s << "      if (lm_lane == 0 && lm_i < lm_rows) { const long long lm_z = (lm_b * lm_m + lm_g * 4 + lm_i) * lm_n + lm_j; "
      << out_store("lm_z", DType::F32) << "      }\n    }\n  }\n";
  return s.str();
}

std::string linear_weight_prefetch(const ViewLayer* a, const ViewLayer* b, DType w_dtype, bool split_k) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r) return "";
  for (size_t d = 0; d + 2 < r; ++d)
    if (!a->shape[d].is_const(1)) return "";
  const size_t bytes = dtype_size(w_dtype);
  const int per = bytes == 2 ? 8 : 4;
  std::ostringstream s;
  s << "  {\n    const long long lm_pn = " << c(b->shape[r - 1]) << ", lm_pk = " << c(a->shape[r - 1]) << ", lm_pw = (" << c(a->shape[r - 2])
    << " + 3) / 4 * lm_pn;\n";
  if (split_k)
    s << "    const long long lm_w0 = blockIdx.x, lm_nw0 = blockDim.x >> 5, lm_sp = (lm_pk + lm_nw0 * " << per << " - 1) / (lm_nw0 * " << per
      << ") * " << per << ", lm_k0 = (threadIdx.x >> 5) * lm_sp < lm_pk ? (threadIdx.x >> 5) * lm_sp : lm_pk,"
      << " lm_k1 = lm_k0 + lm_sp < lm_pk ? lm_k0 + lm_sp : lm_pk;\n";
  else
    s << "    const long long lm_w0 = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5, lm_k0 = 0, lm_k1 = lm_pk;\n";
  s << "    const long long lm_at = (long long)(threadIdx.x & 31) * 128;\n"
    << "    if (lm_w0 < lm_pw && lm_at < (lm_k1 - lm_k0) * " << bytes << ") {\n"
    << "      const char* lm_row = lm_in1 + (" << c(b->offset) << " + (lm_w0 % lm_pn) * " << c(b->strides[r - 1]) << " + lm_k0) * " << bytes << ";\n"
    << "      asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(lm_row + lm_at));\n    }\n  }\n";
  return s.str();
}

}  // namespace luminal::cuda::gen
