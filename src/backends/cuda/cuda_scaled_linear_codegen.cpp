// ScaledMatmul's parts of the GEMV (strided_linear_body with a scale): which batches and rows
// a block works on, listed from the scales on the device.
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

std::string append_listed(const std::string& in, const std::string& idx, const std::string& limit, const std::string& bits,
                          const std::string& list, const std::string& count) {
  std::ostringstream s;
  s << in << "const unsigned lm_bal = __ballot_sync(0xffffffffu, lm_on);\n"
    << in << "if ((threadIdx.x & 31) == 0) { lm_wcnt[threadIdx.x >> 5] = __popc(lm_bal); if (" << idx << " < " << limit << ") " << bits << "["
    << idx << " >> 5] = lm_bal; }\n"
    << in << "__syncthreads();\n"
    << in << "{\n"
    << in << "  int lm_before = 0, lm_all = 0;  // the counts of the warps before this thread's, and of all\n"
    << in << "  #pragma unroll\n"
    << in << "  for (int lm_x = 0; lm_x < " << kBlockThreads / 32 << "; ++lm_x) {\n"
    << in << "    const int lm_n1 = lm_x < (int)(blockDim.x >> 5) ? lm_wcnt[lm_x] : 0;\n"
    << in << "    if (lm_x < (int)(threadIdx.x >> 5)) lm_before += lm_n1;\n"
    << in << "    lm_all += lm_n1;\n"
    << in << "  }\n"
    << in << "  if (lm_on) " << list << "[" << count << " + lm_before + __popc(lm_bal & ((1u << (threadIdx.x & 31)) - 1u))] = (int)" << idx << ";\n"
    << in << "  " << count << " += lm_all;\n"
    << in << "}\n"
    << in << "__syncthreads();\n";
  return s.str();
}

bool listed_scales() {
  static const bool on = env_switch_on("LUMINAL_CUDA_LISTED_SCALES");
  return on;
}

std::string scaled_batches_prologue(const ViewLayer* a, const ViewLayer* scale) {
  const size_t r = a->shape.size();
  std::ostringstream s;
  s << "  __shared__ int lm_act[" << kMaxListedBatches << "];\n"
    << "  __shared__ unsigned lm_on_bits[" << kMaxListedBatches / 32 << "];\n"
    << "  __shared__ int lm_wcnt[" << kBlockThreads / 32 << "];\n"
    << (listed_scales() ? "  __shared__ float lm_scl[" + std::to_string(kMaxListedBatches) + "];\n" : std::string())
    << "  const long long lm_batches = lm_count / (lm_m * lm_n);\n"
    << "  const bool lm_compact = lm_batches <= " << kMaxListedBatches << " && lm_batches * lm_m <= " << kMaxListedBatchRows << ";\n"
    << "  if (lm_compact) {\n"
    << "    int lm_nact = 0;\n"
    << "    for (long long lm_c0 = 0; lm_c0 < lm_batches; lm_c0 += blockDim.x) {\n"
    << "      const long long lm_cb = lm_c0 + threadIdx.x;\n"
    << "      bool lm_on = false;\n"
    << "      if (lm_cb < lm_batches) {\n"
    << "        long long lm_so = " << c(scale->offset) << ", lm_rem = lm_cb;\n";
  for (size_t d = r - 2; d-- > 0;)
    s << "        { const long long lm_c = lm_rem % " << c(a->shape[d]) << "; lm_rem /= " << c(a->shape[d]) << "; lm_so += lm_c * "
      << c(scale->strides[d]) << "; }\n";
  if (listed_scales())  // the first row's scale kept for one-row units (listed_scales)
    s << "        const float lm_s0 = ((const float*)lm_in2)[lm_so];\n"
      << "        lm_scl[lm_cb] = lm_s0;\n"
      << "        lm_on = lm_s0 != 0.0f;\n";
  s << "        for (long long lm_i = " << (listed_scales() ? 1 : 0) << "; lm_i < lm_m && !lm_on; ++lm_i) lm_on = ((const float*)lm_in2)[lm_so + lm_i * "
    << c(scale->strides[r - 2]) << "] != 0.0f;\n"
    << "      }\n"
    << append_listed("      ", "lm_cb", "lm_batches", "lm_on_bits", "lm_act", "lm_nact")
    << "    }\n"
    << "    lm_units = (long long)lm_nact * lm_groups * lm_tiles;\n"
    << "  }\n";
  return s.str();
}

std::string scaled_batches_epilogue(const std::string& width, const std::string& zero_store) {
  std::ostringstream s;
  s << "  if (lm_compact)\n"
    << "    for (long long lm_z = (long long)blockIdx.x * blockDim.x + threadIdx.x; lm_z < lm_batches * lm_m * " << width
    << "; lm_z += (long long)gridDim.x * blockDim.x) {\n"
    << "      const long long lm_zb = lm_z / (lm_m * " << width << ");\n"
    << "      if (!((lm_on_bits[lm_zb >> 5] >> (lm_zb & 31)) & 1u)) { " << zero_store << "      }\n"
    << "    }\n";
  return s.str();
}

static constexpr int kMaxListedRows = 4096;
std::string scaled_rows_path(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const LinearVariant& v, bool bf16,
                                    const std::string& kloop, const std::string& stores,
                                    const std::function<std::string(const std::string&, DType)>& out_store) {
  const size_t r = a->shape.size();
  const int C = v.cols, T = v.team, R = v.rows, per = bf16 ? 8 : 4;
  const std::string wt = bf16 ? "uint16_t" : "float", srs = c(scale->strides[r - 2]);
  std::ostringstream s;
  s << "  if (!lm_compact && lm_m <= " << kMaxListedRows << ") {\n"
    << "    __shared__ int lm_rl[" << kMaxListedRows << "];\n"
    << "    __shared__ unsigned lm_rbits[" << kMaxListedRows / 32 << "];\n"
    << "    const long long lm_chunks = (lm_tiles + lm_teams - 1) / lm_teams;\n"
    << "    for (long long lm_item = blockIdx.x; lm_item < lm_batches * lm_chunks; lm_item += gridDim.x) {\n"
    << "      const long long lm_b = lm_item / lm_chunks, lm_tile = (lm_item % lm_chunks) * lm_teams + threadIdx.x / " << T << ";\n"
    << "      const bool lm_live = lm_tile < lm_tiles;\n"
    << "      const long long lm_j0 = (lm_live ? lm_tile : 0) * " << C << ";\n"
    << "      long long lm_ao = " << c(a->offset) << ", lm_bo = " << c(b->offset) << " + lm_j0 * " << c(b->strides[r - 1]) << ", lm_so = "
    << c(scale->offset) << ";\n"
    << batch_offsets(a, b, scale, "      ")
    // The listing, as the batches' above (append_listed).
    << "      __syncthreads();  // every thread is done with the last listing\n"
    << "      int lm_nr = 0;\n"
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

}  // namespace luminal::cuda::gen
