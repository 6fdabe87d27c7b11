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

// A lane's four elements (p = lane * 4 + e) of a normed rotary row of `len` values, in two
// steps so that the loads of several rows go out before any is waited on: the loads of x, the
// gain, cos and sin at the norm's flat index `at`(p) through loaders `ld`0..3, into arrays named
// with prefix `v` (and, where `len` is not a power of two, the rotary partners' x and gain);
// then the values into dst[0..3], 0 past the row or where `live` is false. The sum of squares
// crosses the warp by shuffles, and so do the partners' x and gain where `len` is a power of two
// (element p's partner p ± len / 2 is then lane ^ len / 8's, same e): every lane of the warp
// must run the second step. The arithmetic is RMSNormRotary's (cuda_codegen.cpp), in its order.
bool partners_by_shuffle(int64_t len) { return len >= 8 && len <= 128 && (len & (len - 1)) == 0; }

std::string normed_rotary_loads(const std::string& v, const std::string& live, const std::string& at, const std::string& ld, int64_t len,
                                const std::string& in) {
  const std::string L = std::to_string(len), H = std::to_string(len / 2);
  std::ostringstream s;
  s << in << "float " << v << "x[4], " << v << "g[4], " << v << "c[4], " << v << "s[4], " << v << "px[4], " << v << "pg[4];\n"
    << in << "#pragma unroll\n"
    << in << "for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << in << "  const long long lm_p = lm_lane * 4 + lm_e;\n"
    << in << "  const bool lm_nin = (" << live << ") && lm_p < " << L << ";\n"
    << in << "  const long long lm_z = lm_nin ? " << at << "(lm_p) : 0;\n"
    << in << "  " << v << "x[lm_e] = lm_nin ? " << ld << "0(lm_z) : 0.0f;\n"
    << in << "  " << v << "g[lm_e] = lm_nin ? " << ld << "1(lm_z) : 0.0f;\n"
    << in << "  " << v << "c[lm_e] = lm_nin ? " << ld << "2(lm_z) : 0.0f;\n"
    << in << "  " << v << "s[lm_e] = lm_nin ? " << ld << "3(lm_z) : 0.0f;\n";
  if (!partners_by_shuffle(len))
    s << in << "  const long long lm_pp = lm_p < " << L << " - " << H << " ? lm_p + " << H << " : lm_p - (" << L << " - " << H << ");\n"
      << in << "  const long long lm_zp = lm_nin ? " << at << "(lm_pp) : 0;\n"
      << in << "  " << v << "px[lm_e] = lm_nin ? " << ld << "0(lm_zp) : 0.0f;\n"
      << in << "  " << v << "pg[lm_e] = lm_nin ? " << ld << "1(lm_zp) : 0.0f;\n";
  s << in << "}\n";
  return s.str();
}

std::string normed_rotary_values(const std::string& dst, const std::string& v, const std::string& live, int64_t len, float eps,
                                 const std::string& in) {
  const std::string L = std::to_string(len), H = std::to_string(len / 2);
  std::ostringstream s;
  s << in << "{\n";
  if (partners_by_shuffle(len))
    s << in << "  #pragma unroll\n"
      << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
      << in << "    " << v << "px[lm_e] = __shfl_xor_sync(0xffffffffu, " << v << "x[lm_e], " << len / 8 << ");\n"
      << in << "    " << v << "pg[lm_e] = __shfl_xor_sync(0xffffffffu, " << v << "g[lm_e], " << len / 8 << ");\n"
      << in << "  }\n";
  s << in << "  float lm_ss = 0.0f;\n"
    << in << "  #pragma unroll\n"
    << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) lm_ss += " << v << "x[lm_e] * " << v << "x[lm_e];\n"
    << in << "  for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_ss += __shfl_xor_sync(0xffffffffu, lm_ss, lm_o);\n"
    << in << "  const float lm_scale = 1.0f / sqrtf(lm_ss * (1.0f / (float)" << L << ") + " << float_lit(eps) << ");\n"
    << in << "  #pragma unroll\n"
    << in << "  for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << in << "    const long long lm_p = lm_lane * 4 + lm_e;\n"
    << in << "    const float lm_pn = (" << v << "px[lm_e] * lm_scale) * " << v << "pg[lm_e];\n"
    << in << "    const float lm_rot = lm_p < " << L << " - " << H << " ? -lm_pn : lm_pn;\n"
    << in << "    const float lm_na = ((" << v << "x[lm_e] * lm_scale) * " << v << "g[lm_e]) * " << v << "c[lm_e], lm_nb = lm_rot * " << v
    << "s[lm_e];\n"
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

std::string folded_loads(const AttentionFoldCode& f, const Expr& q_row, int64_t dk) {
  std::ostringstream s;
  // Warp w's q row w (it norms the row for the block, below), read from the q projection.
  s << "  const bool lm_qin = lm_warp < lm_R && lm_warp < lm_live;\n"
    << "  const long long lm_qb = lm_qin ? [&] { const long long lm_q = lm_row0 + lm_warp; return (long long)(" << c(q_row) << "); }() : 0;\n"
    << "  auto lm_qat = [&](long long lm_p) { return lm_qb + lm_p; };\n"
    << normed_rotary_loads("lm_fq", "lm_qin", "lm_qat", "lm_qld", dk, "  ");
  // The new key (the first of the last S, and with one token a step the only one) and the warp
  // whose four keys hold it: its key row from the key projection and its value row from the
  // value projection.
  s << "  const long long lm_nk = lm_new0, lm_nu = lm_nk - (lm_k0 + lm_warp * 4);\n"
    << "  const bool lm_nkw = lm_S == 1 && lm_nk < lm_k1 && lm_nu >= 0 && lm_nu < 4;\n"
    << "  const long long lm_u0 = lm_b * " << dk << ";  // the updates' element (b, 0, 0)\n";
  if (f.rows_linear)
    s << "  const long long lm_kz0 = lm_nkw ? lm_kup(lm_u0) : 0, lm_vz0 = lm_nkw ? lm_vup(lm_u0) : 0;\n"
      << "  auto lm_kat = [&](long long lm_p) { return lm_kz0 + lm_p; };\n"
      << "  auto lm_vat = [&](long long lm_p) { return lm_vz0 + lm_p; };\n";
  else
    s << "  auto lm_kat = [&](long long lm_p) { return lm_kup(lm_u0 + lm_p); };\n"
      << "  auto lm_vat = [&](long long lm_p) { return lm_vup(lm_u0 + lm_p); };\n";
  s << normed_rotary_loads("lm_fk", "lm_nkw", "lm_kat", "lm_kld", dk, "  ")
    << "  float lm_vn[4];\n"
    << "  #pragma unroll\n"
    << "  for (int lm_e = 0; lm_e < 4; ++lm_e) lm_vn[lm_e] = lm_nkw && lm_lane * 4 + lm_e < " << dk
    << " ? lm_vval(lm_vat(lm_lane * 4 + lm_e)) : 0.0f;\n";
  return s.str();
}

std::string folded_rows(const AttentionFoldCode& f, const ViewLayer& k, const ViewLayer& v, size_t r, int64_t dk) {
  std::ostringstream s;
  // The new key's rows in place of the cache's (not yet written), then into the caches (every
  // row group's block holding the slice stores the same values).
  s << "  if (lm_nkw) {  // the same for every lane of the warp\n"
    << "    float lm_kn[4];\n"
    << normed_rotary_values("lm_kn", "lm_fk", "true", dk, f.k_eps, "    ")
    << "    const long long lm_key = lm_nk;\n"
    << "    const bool lm_kok = " << valid_cond(k, r, r - 2, "lm_key", r - 1) << ", lm_vok = " << valid_cond(v, r, r - 1, "lm_key", r - 2) << ";\n"
    << "    const long long lm_kb = lm_kok ? " << base_index(k, r, "lm_key", r - 1, r - 2) << " : 0, lm_vb = lm_vok ? "
    << base_index(v, r, "lm_key", r - 2, r - 1) << " : 0;\n"
    << "    #pragma unroll\n"
    << "    for (int lm_u = 0; lm_u < 4; ++lm_u)\n"
    << "      if (lm_u == lm_nu)\n"
    << "        #pragma unroll\n"
    << "        for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "          if (lm_kok) lm_kr[lm_u][lm_e] = lm_kn[lm_e];\n"
    << "          if (lm_vok) lm_vr[lm_u][lm_e] = lm_vn[lm_e];\n"
    << "        }\n"
    << "    #pragma unroll\n"
    << "    for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "      const long long lm_p = lm_lane * 4 + lm_e;\n"
    << "      if (lm_p >= " << dk << ") continue;\n"
    << "      if (lm_kok) ((float*)lm_out3)[lm_kb + lm_p * " << c(k.strides[r - 2]) << "] = lm_kn[lm_e];\n"
    << "      if (lm_vok) ((float*)lm_out4)[lm_vb + lm_p * " << c(v.strides[r - 1]) << "] = lm_vn[lm_e];\n"
    << "    }\n"
    << "  }\n";
  // Warp w norms and rotates the group's q row w into shared memory (the eight warps would each
  // need all four rows in registers: computed once, read back after a barrier).
  s << "  __shared__ __align__(16) float lm_qsh[lm_R][" << (dk + 3) / 4 * 4 << "];\n"
    << "  if (lm_warp < lm_R) {\n"
    << "    float lm_qn[4];\n"
    << normed_rotary_values("lm_qn", "lm_fq", "lm_qin", dk, f.q_eps, "    ")
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

}  // namespace luminal::cuda::gen
