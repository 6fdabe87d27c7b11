// The code of the decode attention that computes its q norms and its new keys' and values' rows
// (cuda_attention_fold.h): the loaders, the normed rotary q rows, and the new rows with their
// stores into the caches, for split_attention_once.
#include <sstream>

#include "backends/cpu/fused_codegen.h"
#include "backends/cuda/cuda_attention_fold.h"
#include "backends/cuda/cuda_attention_parts.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

namespace {

// `name`(flat index) = input `e` read through its view from parameter `param` (the pad value
// where the view's mask hides it), as a float.
std::string loader(const std::string& name, const std::string& param, const Edge& e, DType t) {
  const IndexExprs ix = e.view.flat_index();
  std::ostringstream s;
  s << "  auto " << name << " = [&](long long lm_q) -> float {\n";
  if (!ix.valid.is_const(1)) s << "    if (!" << c(ix.valid) << ") return " << float_lit(e.view.pad_value()) << ";\n";
  s << "    return (float)" << load(t, "((const " + std::string(storage_type(t)) + "*)" + param + ")[" + c(ix.index) + "]") << ";\n  };\n";
  return s.str();
}

// One lane's four values (p = lane * 4 + e) of a normed rotary row of `len` values: `x`(i) and
// the gain `g`(i), cos `cs`(i), sin `sn`(i) at the norm's flat index i, where `at`(p) gives the
// index of element p; into dst[0..3], 0 past the row or where `live` is false. The sum of
// squares crosses the warp by shuffles, and so do the rotary partners' x and gain where `len` is
// a power of two (element p's partner p ± len / 2 is then lane ^ len / 8's, same e): every lane
// of the warp must run it. The arithmetic is RMSNormRotary's (cuda_codegen.cpp), in that order.
std::string normed_rotary_lane(const std::string& dst, const std::string& live, const std::string& at, const std::string& ld, int64_t len,
                               float eps, const std::string& in) {
  const std::string L = std::to_string(len), H = std::to_string(len / 2);
  const bool shuffled = len >= 8 && len <= 128 && (len & (len - 1)) == 0;
  std::ostringstream s;
  s << in << "{\n"
    << in << "  float lm_xs[4], lm_gs[4], lm_ps[4], lm_pg[4], lm_cs[4], lm_sn[4], lm_ss = 0.0f;\n"
    << in << "  #pragma unroll\n"
    << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << in << "    const long long lm_p = lm_lane * 4 + lm_e;\n"
    << in << "    const bool lm_nin = (" << live << ") && lm_p < " << L << ";\n"
    << in << "    const long long lm_z = lm_nin ? " << at << "(lm_p) : 0;\n"
    << in << "    lm_xs[lm_e] = lm_nin ? " << ld << "0(lm_z) : 0.0f;\n"
    << in << "    lm_gs[lm_e] = lm_nin ? " << ld << "1(lm_z) : 0.0f;\n"
    << in << "    lm_cs[lm_e] = lm_nin ? " << ld << "2(lm_z) : 0.0f;\n"
    << in << "    lm_sn[lm_e] = lm_nin ? " << ld << "3(lm_z) : 0.0f;\n";
  if (!shuffled)
    s << in << "    const long long lm_pp = lm_p < " << L << " - " << H << " ? lm_p + " << H << " : lm_p - (" << L << " - " << H << ");\n"
      << in << "    const long long lm_zp = lm_nin ? " << at << "(lm_pp) : 0;\n"
      << in << "    lm_ps[lm_e] = lm_nin ? " << ld << "0(lm_zp) : 0.0f;\n"
      << in << "    lm_pg[lm_e] = lm_nin ? " << ld << "1(lm_zp) : 0.0f;\n";
  s << in << "  }\n";
  if (shuffled)
    s << in << "  #pragma unroll\n"
      << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
      << in << "    lm_ps[lm_e] = __shfl_xor_sync(0xffffffffu, lm_xs[lm_e], " << len / 8 << ");\n"
      << in << "    lm_pg[lm_e] = __shfl_xor_sync(0xffffffffu, lm_gs[lm_e], " << len / 8 << ");\n"
      << in << "  }\n";
  s << in << "  #pragma unroll\n"
    << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) lm_ss += lm_xs[lm_e] * lm_xs[lm_e];\n"
    << in << "  for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_ss += __shfl_xor_sync(0xffffffffu, lm_ss, lm_o);\n"
    << in << "  const float lm_scale = 1.0f / sqrtf(lm_ss * (1.0f / (float)" << L << ") + " << float_lit(eps) << ");\n"
    << in << "  #pragma unroll\n"
    << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << in << "    const long long lm_p = lm_lane * 4 + lm_e;\n"
    << in << "    const float lm_pn = (lm_ps[lm_e] * lm_scale) * lm_pg[lm_e];\n"
    << in << "    const float lm_rot = lm_p < " << L << " - " << H << " ? -lm_pn : lm_pn;\n"
    << in << "    const float lm_na = ((lm_xs[lm_e] * lm_scale) * lm_gs[lm_e]) * lm_cs[lm_e], lm_nb = lm_rot * lm_sn[lm_e];\n"
    << in << "    " << dst << "[lm_e] = (" << live << ") && lm_p < " << L << " ? lm_na + lm_nb : 0.0f;\n"
    << in << "  }\n"
    << in << "}\n";
  return s.str();
}

}  // namespace

std::optional<AttentionFoldCode> attention_fold_code(const Graph& g, const AttentionNorms& f) {
  const Node& q = g.node(f.q_norm);
  const Node& k = g.node(f.k_norm);
  const Node& kw = g.node(f.k_write);
  const Node& vw = g.node(f.v_write);
  const IndexExprs ki = kw.inputs[2].view.flat_index(), vi = vw.inputs[2].view.flat_index();
  if (!ki.valid.is_const(1) || !vi.valid.is_const(1)) return std::nullopt;
  AttentionFoldCode code;
  std::ostringstream s;
  const char* names[] = {"x", "g", "c", "s"};
  for (size_t i = 0; i < 4; ++i) {
    s << loader("lm_qld" + std::to_string(i), std::string("lm_q") + names[i], q.inputs[i], g.node(q.inputs[i].src).dtype);
    s << loader("lm_kld" + std::to_string(i), std::string("lm_k") + names[i], k.inputs[i], g.node(k.inputs[i].src).dtype);
  }
  s << "  auto lm_kup = [&](long long lm_q) -> long long { return " << c(ki.index) << "; };\n"
    << "  auto lm_vup = [&](long long lm_q) -> long long { return " << c(vi.index) << "; };\n";
  const DType vt = g.node(vw.inputs[2].src).dtype;
  s << "  auto lm_vval = [&](long long lm_i) -> float { return (float)" << load(vt, "((const " + std::string(storage_type(vt)) + "*)lm_vu)[lm_i]")
    << "; };\n";
  // A row's elements one apart in both updates' sources (one unmasked layer, unit stride along
  // the row): each row's first index found once, where every element's cost divisions by the dims.
  auto row_linear = [](const View& v) {
    return v.layers().size() == 1 && !v.layers()[0].masked() && v.layers()[0].strides.back().is_const(1);
  };
  code.rows_linear = row_linear(kw.inputs[2].view) && row_linear(vw.inputs[2].view);
  code.loaders = s.str();
  code.tokens = f.tokens;
  code.q_eps = q.constant;
  code.k_eps = k.constant;
  return code;
}

std::string folded_q_rows(const AttentionFoldCode& f, const Expr& row, int64_t dk) {
  // Warp w norms and rotates row w into shared memory (the eight warps would each need all four
  // rows in registers: computed once, read back after a barrier).
  std::ostringstream s;
  s << "  __shared__ __align__(16) float lm_qsh[lm_R][" << (dk + 3) / 4 * 4 << "];\n"
    << "  if (lm_warp < lm_R) {  // the q norm and rotary of row lm_warp, as it loads\n"
    << "    const bool lm_in = lm_warp < lm_live;\n"
    << "    const long long lm_q = lm_row0 + lm_warp, lm_qb = lm_in ? " << c(row) << " : 0;\n"
    << "    auto lm_qat = [&](long long lm_p) { return lm_qb + lm_p; };\n"
    << "    float lm_qn[4];\n"
    << normed_rotary_lane("lm_qn", "lm_in", "lm_qat", "lm_qld", dk, f.q_eps, "    ")
    << "    #pragma unroll\n"
    << "    for (int lm_e = 0; lm_e < 4; ++lm_e)\n"
    << "      if (lm_lane * 4 + lm_e < " << dk << ") lm_qsh[lm_warp][lm_lane * 4 + lm_e] = lm_qn[lm_e];\n"
    << "  }\n"
    << "  __syncthreads();\n"
    << "  #pragma unroll\n"
    << "  for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr)\n"
    << "    #pragma unroll\n"
    << "    for (int lm_e = 0; lm_e < 4; ++lm_e) lm_qr[lm_rr][lm_e] = lm_lane * 4 + lm_e < " << dk << " ? lm_qsh[lm_rr][lm_lane * 4 + lm_e] : 0.0f;\n";
  return s.str();
}

std::string folded_new_rows(const AttentionFoldCode& f, const ViewLayer& k, const ViewLayer& v, size_t r, int64_t dk) {
  std::ostringstream s;
  // Key lm_key of the warp's four is one this step writes: the same for every lane of the warp.
  s << "    if (lm_here && lm_key >= lm_new0) {  // a new key: its rows from the projections, then into the caches\n"
    << "      const long long lm_u0 = (lm_b * lm_S + (lm_key - lm_new0)) * " << dk << ";  // the updates' element (b, s, 0)\n";
  if (f.rows_linear)
    s << "      const long long lm_kz0 = lm_kup(lm_u0), lm_vz0 = lm_vup(lm_u0);\n"
      << "      auto lm_kat = [&](long long lm_p) { return lm_kz0 + lm_p; };\n"
      << "      auto lm_vat = [&](long long lm_p) { return lm_vz0 + lm_p; };\n";
  else
    s << "      auto lm_kat = [&](long long lm_p) { return lm_kup(lm_u0 + lm_p); };\n"
      << "      auto lm_vat = [&](long long lm_p) { return lm_vup(lm_u0 + lm_p); };\n";
  s << "      float lm_kn[4], lm_vn[4];\n"
    << "      #pragma unroll\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) lm_vn[lm_e] = lm_lane * 4 + lm_e < " << dk << " ? lm_vval(lm_vat(lm_lane * 4 + lm_e)) : 0.0f;\n"
    << normed_rotary_lane("lm_kn", "true", "lm_kat", "lm_kld", dk, f.k_eps, "      ")
    << "      const bool lm_kok = " << valid_cond(k, r, r - 2, "lm_key", r - 1) << ", lm_vok = " << valid_cond(v, r, r - 1, "lm_key", r - 2)
    << ";\n"
    << "      const long long lm_kb = lm_kok ? " << base_index(k, r, "lm_key", r - 1, r - 2) << " : 0, lm_vb = lm_vok ? "
    << base_index(v, r, "lm_key", r - 2, r - 1) << " : 0;\n"
    << "      #pragma unroll\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const long long lm_p = lm_lane * 4 + lm_e;\n"
    << "        if (lm_p >= " << dk << ") continue;\n"
    << "        if (lm_kok) { lm_kr[lm_u][lm_e] = lm_kn[lm_e]; ((float*)lm_out3)[lm_kb + lm_p * " << c(k.strides[r - 2]) << "] = lm_kn[lm_e]; }\n"
    << "        if (lm_vok) { lm_vr[lm_u][lm_e] = lm_vn[lm_e]; ((float*)lm_out4)[lm_vb + lm_p * " << c(v.strides[r - 1]) << "] = lm_vn[lm_e]; }\n"
    << "      }\n"
    << "    }\n";
  return s.str();
}

}  // namespace luminal::cuda::gen
