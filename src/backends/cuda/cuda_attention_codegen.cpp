// Attention over a strided KV cache, split over slices of keys (see strided_attention below).
#include <algorithm>
#include <sstream>

#include "backends/cuda/cuda_attention_parts.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cpu/fused_codegen.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

namespace {

// Whether a layer reads its logical shape in row-major order with no offset or mask (a plain
// reshape of the layer below).
bool row_major(const ViewLayer& l) {
  if (!l.offset.is_const(0) || l.masked()) return false;
  Expr stride = 1;
  for (size_t d = l.shape.size(); d-- > 0;) {
    if (!l.shape[d].is_const(1) && !provably_equal(l.strides[d], stride)) return false;
    stride = stride * l.shape[d];
  }
  return true;
}

// The mask's stride along the keys when its element for (row, key) sits at
// index(row * keys) + key * stride: its bottom layer ends with the keys' dim, unmasked, and any
// layer above it is a plain reshape. Then the mask's index expression is evaluated once per
// row instead of once per key (a causal mask behind a broadcast over the heads has two layers,
// and its general expression divides by three dims).
std::optional<Expr> mask_key_stride(const View& mask, const Expr& keys) {
  const std::vector<ViewLayer>& layers = mask.layers();
  if (layers.empty() || layers.size() > 2 || !mask.flat_index().valid.is_const(1)) return std::nullopt;
  const ViewLayer& bottom = layers.front();
  if (bottom.shape.empty() || bottom.masked() || !provably_equal(bottom.shape.back(), keys)) return std::nullopt;
  if (layers.size() == 2 && !row_major(layers.back())) return std::nullopt;
  return bottom.strides.back();
}

}  // namespace

// The condition that element (batch coords lm_bc, key) of a layer passes its mask (dims other
// than `skip`; the key's coordinate is `key_coord` on `key_dim`).
std::string valid_cond(const ViewLayer& l, size_t r, size_t skip, const std::string& key_coord, size_t key_dim) {
  std::string cond = "true";
  for (size_t d = 0; d < r; ++d) {
    if (d == skip || !l.dim_masked(d)) continue;
    std::string x = d == key_dim ? key_coord : "lm_bc[" + std::to_string(d) + "]";
    cond += " && " + x + " >= " + c(l.mask_lo[d]) + " && " + x + " < " + c(l.mask_hi[d]);
  }
  return cond;
}

// The index of element (batch coords lm_bc, key, 0 along `skip`) of a strided layer.
std::string base_index(const ViewLayer& l, size_t r, const std::string& key_coord, size_t key_dim, size_t skip) {
  std::string b = c(l.offset);
  for (size_t d = 0; d < r; ++d) {
    if (d == skip) continue;
    std::string x = d == key_dim ? key_coord : "lm_bc[" + std::to_string(d) + "]";
    b += " + " + x + " * " + c(l.strides[d]);
  }
  return b;
}

// lm_shape_of(d): the batch dims' sizes, for splitting the batch index into coordinates lm_bc.
std::string batch_shape_fn(const ViewLayer& k, size_t r) {
  std::string f = "  auto lm_shape_of = [&](int lm_d) -> long long {\n    switch (lm_d) {\n";
  for (size_t d = 0; d + 2 < r; ++d) f += "      case " + std::to_string(d) + ": return " + c(k.shape[d]) + ";\n";
  return f + "      default: return 1;\n    }\n  };\n";
}

// The mask (input 3) at (query row, key): lm_mask_row(row) gives a row's base once, then
// lm_mask_at(base, key) reads one element, through one index per row where the mask's layout
// allows (else through its general loader, the row's flat index as the base).
std::string mask_reader(const Node& n, DType mask_dtype, const Expr& keys) {
  if (auto stride = mask_key_stride(n.inputs[3].view, keys)) {
    const IndexExprs mix = n.inputs[3].view.flat_index();
    const std::string ms = storage_type(mask_dtype);
    // Simplified for element (row, 0): a causal mask's row then costs one division, not three.
    const Expr row = mix.index.substitute_index(Expr::index() * keys).simplify();
    return "  auto lm_mask_row = [&](long long lm_q) -> long long { return " + c(row) + "; };\n  const long long lm_ms = " +
           c(*stride) + ";\n"
           "  auto lm_mask_at = [&](long long lm_base, long long lm_key) { return " +
           load(mask_dtype, "((const " + ms + "*)lm_in3)[lm_base + lm_key * lm_ms]") + "; };\n";
  }
  return "  auto lm_mask_row = [&](long long lm_r) -> long long { return lm_r * " + c(keys) + "; };\n"
         "  auto lm_mask_at = [&](long long lm_base, long long lm_key) { return lm_ld3(lm_base + lm_key); };\n";
}


std::string tile_key(const ViewLayer& l, size_t r, size_t key_dim, size_t head_dim, const std::string& kk, const std::string& in) {
  return in + "const long long lm_key = lm_k0 + " + kk + ";\n" + in + "const bool lm_here = lm_key < lm_keys, lm_ok = lm_here && " +
         valid_cond(l, r, head_dim, "lm_key", key_dim) + ";\n" + in + "const long long lm_rb = lm_ok ? " +
         base_index(l, r, "lm_key", key_dim, head_dim) + " : 0;\n";
}

std::string tile_element(const std::string& ptr, DType t, const std::string& at, const std::string& head_stride, const std::string& pad) {
  return "(!lm_here ? 0.0f : lm_ok ? (float)" + load(t, ptr + "[lm_rb + (" + at + ") * " + head_stride + "]") + " : (float)" + pad + ")";
}

namespace {

// Loads a tile of kTiledKeys key (or value) rows into lm_kv ([BN][lm_W]): a warp per row, its
// address computed once, each lane four consecutive head-dim elements (one 16-byte load when the
// cache is f32 with unit stride and the row is aligned). Rows past the keys are zeros; rows the
// view masks hold its pad value.
std::string tile_rows_to_shared(const std::string& ptr, DType t, const ViewLayer& l, size_t r, size_t key_dim, size_t head_dim,
                                const std::string& head_stride, const std::string& len, const std::string& pad) {
  const bool vec = t == DType::F32 && l.strides[head_dim].is_const(1);
  std::ostringstream s;
  s << "    for (int lm_kk = threadIdx.x >> 5; lm_kk < lm_BN; lm_kk += blockDim.x >> 5) {\n"
    << tile_key(l, r, key_dim, head_dim, "lm_kk", "      ")
    << "      float* lm_dst = lm_kv + lm_kk * lm_W;\n"
    << "      for (int lm_p = (threadIdx.x & 31) * 4; lm_p < " << len << "; lm_p += 128) {\n";
  if (vec)
    s << "        if (lm_ok && lm_p + 4 <= " << len << " && ((lm_rb + lm_p) & 3) == 0) {\n"
      << "          const float4 lm_x = *(const float4*)((const float*)" << ptr << " + lm_rb + lm_p);\n"
      << "          lm_dst[lm_p] = lm_x.x; lm_dst[lm_p + 1] = lm_x.y; lm_dst[lm_p + 2] = lm_x.z; lm_dst[lm_p + 3] = lm_x.w;\n"
      << "          continue;\n        }\n";
  s << "        for (int lm_e = lm_p; lm_e < lm_p + 4 && lm_e < " << len << "; ++lm_e)\n"
    << "          lm_dst[lm_e] = " << tile_element(ptr, t, "lm_e", head_stride, pad) << ";\n      }\n    }\n";
  return s.str();
}

}  // namespace

std::string tiled_rows_setup(const std::vector<DType>& dt, const StridedKv& kv, const std::string& rows, const std::string& row_of) {
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  const size_t r = kv.r;
  return "  const " + ks + "* lm_K = (const " + ks + "*)lm_in1;\n  const " + vs + "* lm_V = (const " + vs + "*)lm_in2;\n" +
         "  const long long lm_ksp = " + c(kv.k->strides[r - 2]) + ", lm_vsj = " + c(kv.v->strides[r - 1]) + ";\n" +
         "  long long lm_mrow[" + rows + "];\n  bool lm_live[" + rows + "];\n" +
         "  for (int lm_a = 0; lm_a < " + rows + "; ++lm_a) {\n" +
         "    const long long lm_row = lm_r0 + " + row_of + ";\n" +
         "    lm_live[lm_a] = lm_row < lm_seq;\n    lm_mrow[lm_a] = lm_live[lm_a] ? lm_mask_row(lm_b * lm_seq + lm_row) : 0;\n  }\n" +
         "  const float lm_ninf = __int_as_float((int)0xff800000u), lm_log2e = " + float_lit(1.4426950408889634f) + ";\n";
}

std::optional<StridedKv> strided_kv(const Node& n, const std::vector<DType>& dt) {
  const ViewLayer* k = plain_layer(n.inputs[1].view);
  const ViewLayer* v = plain_layer(n.inputs[2].view);
  const size_t r = n.inputs[0].view.rank();
  if (!k || !v || r < 2 || k->shape.size() != r || v->shape.size() != r) return std::nullopt;
  if (k->dim_masked(r - 2) || v->dim_masked(r - 1)) return std::nullopt;
  if (is_int(dt[0]) || is_int(dt[1]) || is_int(dt[2])) return std::nullopt;
  return StridedKv{k, v, r};
}

// lm_bc: the batch coordinates of batch index lm_b (through lm_shape_of).
std::string batch_coords(size_t r) {
  return "  long long lm_bc[" + std::to_string(r) + "] = {};\n  { long long lm_rem = lm_b;\n    for (int lm_d = " +
         std::to_string(static_cast<long>(r) - 3) +
         "; lm_d >= 0; --lm_d) { const long long lm_sz = lm_shape_of(lm_d); lm_bc[lm_d] = lm_rem % lm_sz; lm_rem /= lm_sz; } }\n";
}

std::string split_block_coords(size_t r) {
  // 32-bit divisions: the grid and these counts are far below 2^31, and a 64-bit division is a
  // call of about a hundred instructions ahead of every load.
  return "  const long long lm_splits = (lm_keys + lm_CH - 1) / lm_CH, lm_gpb = (lm_seq + lm_R - 1) / lm_R;\n"
         "  const unsigned lm_grp32 = blockIdx.x / (unsigned)lm_splits, lm_b32 = lm_grp32 / (unsigned)lm_gpb;\n"
         "  const long long lm_grp = lm_grp32, lm_split = blockIdx.x - lm_grp * lm_splits;\n"
         "  const long long lm_b = lm_b32, lm_i0 = (lm_grp - lm_b * lm_gpb) * lm_R, lm_row0 = lm_b * lm_seq + lm_i0;\n"
         "  const int lm_live = (int)(lm_seq - lm_i0 < lm_R ? lm_seq - lm_i0 : lm_R);\n"
         "  const long long lm_k0 = lm_split * lm_CH, lm_k1 = lm_k0 + lm_CH < lm_keys ? lm_k0 + lm_CH : lm_keys;\n" +
         batch_coords(r);
}

// Attention whose keys and values are one strided layer each (the KV cache sliced to the cached
// length; a mask may limit the key and batch dims, never the head dim). One block per group of
// kAttentionRows query rows of one batch entry and slice of kAttentionChunk keys
// (flash-decoding). A grouped-query decode has its group's query heads as the rows of one batch
// entry (one KV head), so the block reads each key and value row once for all of them, not once
// per query head. The rows' q go to shared memory once (through q's loader: grouped-query views
// merge dims that one stride cannot express); each warp takes four keys at a time, its lanes over
// the head dim, every key's row read in consecutive runs; a warp per row then takes the slice's
// softmax statistics; the warps split the slice's keys for the values, four output columns per
// lane. Addresses come from the strides, computed once per key. The combine launch merges the
// slices.
std::optional<AttentionKernels> strided_attention(const Node& n, const std::vector<DType>& dt, DType out_dtype) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const DType t = dt[0];
  auto valid = [&](const ViewLayer& l, size_t skip, const std::string& key_coord, size_t key_dim) {
    return valid_cond(l, r, skip, key_coord, key_dim);
  };
  auto base = [&](const ViewLayer& l, const std::string& key_coord, size_t key_dim, size_t skip) {
    return base_index(l, r, key_coord, key_dim, skip);
  };
  static_assert(kBlockThreads / 32 >= kAttentionRows, "a warp per row takes the softmax statistics");
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  const std::string ninf = "__int_as_float((int)0xff800000u)";
  // Where one pass of the warps covers the slice (four keys a warp) and a lane's four columns
  // cover a value row, each warp loads its keys' value columns together with the keys: the
  // value pass then waits on no memory, and the block on one round trip fewer.
  const Expr dv_expr = v->shape[r - 1];
  const bool preload_v = kAttentionChunk <= 4 * (kBlockThreads / 32) && dv_expr.is_const() && dv_expr.value() <= 128;
  const std::string v_pad = value_lit(n.inputs[2].view.pad_value(), dt[2]);
  auto v_loads = [&](const std::string& dst, const std::string& ok_extra, const std::string& indent) {
    std::ostringstream o;
    o << indent << "{\n" << indent << "  const bool lm_vok = " << ok_extra << valid(*v, r - 1, "lm_key", r - 2) << ";\n"
      << indent << "  const long long lm_vb = lm_vok ? " << base(*v, "lm_key", r - 2, r - 1) << " : 0;\n"
      << indent << "  #pragma unroll\n"
      << indent << "  for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
      << indent << "    const long long lm_j = lm_j0 + lm_lane * 4 + lm_e;\n"
      << indent << "    " << dst << "[lm_e] = lm_vok && lm_j < lm_dv ? " << load(dt[2], "lm_V[lm_vb + lm_j * lm_vsj]") << " : " << v_pad << ";\n"
      << indent << "  }\n" << indent << "}\n";
    return o.str();
  };
  const std::string preload_v_code =
      preload_v ? "      { const long long lm_j0 = 0;\n" + v_loads("lm_vpre[lm_u]", "lm_key < lm_k1 && ", "        ") + "      }\n" : "";
  // Shared by both key passes: whether row lm_rr weighs key lm_key (u-th of the warp's four),
  // and the products of the rows' q elements lm_p with the four keys' (`key_at`: key lm_u's).
  const std::string use_line = "        lm_use[lm_u][lm_rr] = lm_rr < lm_live && lm_key < lm_k1 && lm_mask_at(lm_mb[lm_rr], lm_key) != 0;\n";
  auto qk_products = [&](const std::string& key_at) {
    return "      #pragma unroll\n"
           "      for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
           "        const float lm_qp = " + convert("lm_q[lm_rr * lm_dk + lm_p]", DType::F32, t) + ";\n"
           "        #pragma unroll\n"
           "        for (int lm_u = 0; lm_u < 4; ++lm_u) lm_acc[lm_u][lm_rr] = __fmaf_rn(lm_qp, " + key_at + ", lm_acc[lm_u][lm_rr]);\n"
           "      }\n    }\n";
  };
  // Single pass (one round of four keys a warp, head dims of at most 128): the warp's key rows
  // and value columns are loaded into registers before the q rows are staged, so the block waits
  // on memory once before its scores.
  const Expr dk_expr = k->shape[r - 2];
  const bool single_pass = preload_v && dk_expr.is_const() && dk_expr.value() <= 128;
  const std::string q_staging =
      "  for (long long lm_p = threadIdx.x; lm_p < lm_R * lm_dk; lm_p += blockDim.x) {\n"
      "    const long long lm_rr = lm_p / lm_dk;\n"
      "    lm_q[lm_p] = lm_rr < lm_live ? (float)lm_ld0((lm_row0 + lm_rr) * lm_dk + (lm_p - lm_rr * lm_dk)) : 0.0f;\n  }\n"
      "  __syncthreads();\n";
  std::string single_pass_keys;
  if (single_pass) {
    std::ostringstream o;
    const std::string kpad = value_lit(n.inputs[1].view.pad_value(), dt[1]);
    o << "  constexpr int lm_KT = " << (dk_expr.value() + 31) / 32 << ";\n"
      << "  float lm_kreg[4][lm_KT], lm_vpre[4][4];\n  bool lm_use[4][lm_R];\n"
      << "  {\n    const long long lm_key0 = lm_k0 + lm_warp;\n"
      << "    #pragma unroll\n"
      << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
      << "      const long long lm_key = lm_key0 + lm_u * lm_warps;\n"
      << "      #pragma unroll\n"
      << "      for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr)\n"
      << use_line
      << "      const bool lm_ok = lm_key < lm_k1 && " << valid(*k, r - 2, "lm_key", r - 1) << ";\n"
      << "      const long long lm_kb = lm_ok ? " << base(*k, "lm_key", r - 1, r - 2) << " : 0;\n"
      << "      #pragma unroll\n"
      << "      for (int lm_t = 0; lm_t < lm_KT; ++lm_t) {\n"
      << "        const long long lm_p = lm_lane + 32 * lm_t;\n"
      << "        lm_kreg[lm_u][lm_t] = lm_ok && lm_p < lm_dk ? " << load(dt[1], "lm_K[lm_kb + lm_p * lm_ksp]") << " : " << kpad << ";\n"
      << "      }\n" << preload_v_code << "    }\n  }\n"
      << q_staging
      << "  if (lm_k0 + lm_warp < lm_k1) {\n"
      << "    const long long lm_key0 = lm_k0 + lm_warp;\n"
      << "    float lm_acc[4][lm_R];\n"
      << "    #pragma unroll\n"
      << "    for (int lm_u = 0; lm_u < 4; ++lm_u)\n"
      << "      for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) lm_acc[lm_u][lm_rr] = 0.0f;\n"
      << "    #pragma unroll\n"
      << "    for (int lm_t = 0; lm_t < lm_KT; ++lm_t) {\n"
      << "      const long long lm_p = lm_lane + 32 * lm_t;\n"
      << "      if (lm_p >= lm_dk) break;\n"
      << qk_products("lm_kreg[lm_u][lm_t]");
    single_pass_keys = o.str();
  }
  const std::string value_pass_loads =
      preload_v ? "        for (int lm_e = 0; lm_e < 4; ++lm_e) lm_vv[lm_u][lm_e] = lm_vpre[lm_u][lm_e];\n"
                : v_loads("lm_vv[lm_u]", "lm_any && ", "        ");
  std::ostringstream s;
  s << "  extern __shared__ float lm_sh[];\n"
    << "  constexpr int lm_R = " << kAttentionRows << ", lm_CH = " << kAttentionChunk << ";\n"
    << "  const long long lm_seq = " << c(n.inputs[0].view.shape()[r - 2]) << ", lm_dk = " << c(n.inputs[0].view.shape()[r - 1])
    << ", lm_keys = " << c(k->shape[r - 1]) << ", lm_dv = " << c(v->shape[r - 1]) << ";\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_warps = blockDim.x >> 5;\n"
    << "  float* lm_q = lm_sh;                      // [R][dk]\n"
    << "  float* lm_sc = lm_q + lm_R * lm_dk;       // [R][CH] scores, then probabilities\n"
    << "  float* lm_part = lm_sc + lm_R * lm_CH;    // [warps][R][dv] each warp's partial rows\n"
    << "  __shared__ float lm_stat[lm_R][2];         // each row's slice max and sum\n"
    // This block's rows [lm_i0, lm_i0 + lm_live) of batch entry lm_b, and its slice of the
    // keys, [lm_k0, lm_k1).
    << split_block_coords(r)
    << "  const long long lm_nk = lm_k1 - lm_k0;\n"
    << (single_pass ? "" : q_staging)
    << "  const " << ks << "* lm_K = (const " << ks << "*)lm_in1;\n  const " << vs << "* lm_V = (const " << vs << "*)lm_in2;\n"
    << "  const long long lm_ksp = " << c(k->strides[r - 2]) << ", lm_vsj = " << c(v->strides[r - 1]) << ";\n"
    // The mask at (row, key): through one index per row where its layout allows.
    << mask_reader(n, dt[3], k->shape[r - 1])
    << "  long long lm_mb[lm_R];\n"
    << "  #pragma unroll\n"
    << "  for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) lm_mb[lm_rr] = lm_rr < lm_live ? lm_mask_row(lm_row0 + lm_rr) : 0;\n"
    // A key the mask hides from a row scores -inf there. Keys are loaded whether the mask hides
    // them or not, so that the loads do not wait for the mask's: a causal prefill through this
    // kernel (under kTiledMinRows rows) reads the hidden half too. Each warp takes four keys at
    // a time, their loads in flight together.
    ;
  if (single_pass) {
    s << single_pass_keys;
  } else {
    s << (preload_v ? "  float lm_vpre[4][4];  // this warp's keys' value columns, loaded with the keys\n" : "")
    << "  for (long long lm_key0 = lm_k0 + lm_warp; lm_key0 < lm_k1; lm_key0 += 4 * lm_warps) {\n"
    << "    bool lm_use[4][lm_R], lm_ok[4];\n    long long lm_kb[4];\n    float lm_acc[4][lm_R];\n"
    << "    #pragma unroll\n"
    << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
    << "      const long long lm_key = lm_key0 + lm_u * lm_warps;\n"
    << "      #pragma unroll\n"
    << "      for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
    << use_line
    << "        lm_acc[lm_u][lm_rr] = 0.0f;\n      }\n"
    << "      lm_ok[lm_u] = lm_key < lm_k1 && " << valid(*k, r - 2, "lm_key", r - 1) << ";\n"
    << "      lm_kb[lm_u] = lm_ok[lm_u] ? " << base(*k, "lm_key", r - 1, r - 2) << " : 0;\n"
    << preload_v_code << "    }\n"
    << "    for (long long lm_p = lm_lane; lm_p < lm_dk; lm_p += 32) {\n"
    << "      float lm_kv[4];\n"
    << "      #pragma unroll\n"
    << "      for (int lm_u = 0; lm_u < 4; ++lm_u)\n"
    << "        lm_kv[lm_u] = lm_ok[lm_u] ? " << load(dt[1], "lm_K[lm_kb[lm_u] + lm_p * lm_ksp]") << " : "
    << value_lit(n.inputs[1].view.pad_value(), dt[1]) << ";\n"
    << qk_products("lm_kv[lm_u]");
  }
  // The scores of the warp's four keys, each a shuffle tree over the lanes.
  s << "    #pragma unroll\n"
    << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
    << "      const long long lm_key = lm_key0 + lm_u * lm_warps;\n"
    << "      #pragma unroll\n"
    << "      for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
    << "        float lm_v = lm_acc[lm_u][lm_rr];\n"
    << "        for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_v += __shfl_xor_sync(0xffffffffu, lm_v, lm_o);\n"
    << "        if (lm_lane == 0 && lm_key < lm_k1)\n"
    << "          lm_sc[lm_rr * lm_CH + (lm_key - lm_k0)] = lm_use[lm_u][lm_rr] ? " << convert("lm_v", DType::F32, t) << " * "
    << float_lit(n.constant) << " : " << ninf << ";\n      }\n    }\n  }\n"
    << "  __syncthreads();\n"
    // Each row's slice statistics, a warp per row: its max, and exponentials relative to it (a
    // slice whose keys are all masked for the row has max -inf and contributes nothing).
    << "  if (lm_warp < lm_R) {\n"
    << "    float* lm_row_sc = lm_sc + lm_warp * lm_CH;\n"
    << "    float lm_mx = " << ninf << ";\n"
    << "    for (long long lm_i = lm_lane; lm_i < lm_nk; lm_i += 32) lm_mx = lm_fmax_nan(lm_mx, lm_row_sc[lm_i]);\n"
    << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_mx = lm_fmax_nan(lm_mx, __shfl_xor_sync(0xffffffffu, lm_mx, lm_o));\n"
    << "    const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
    << "    const bool lm_none = lm_mx == " << ninf << ";\n"
    << "    float lm_sum = 0.0f;\n"
    << "    for (long long lm_i = lm_lane; lm_i < lm_nk; lm_i += 32) {\n"
    << "      const float lm_e = lm_none ? 0.0f : exp2f((lm_row_sc[lm_i] + lm_mx * -1.0f) * lm_log2e);\n"
    << "      lm_row_sc[lm_i] = lm_e;\n      lm_sum += lm_e;\n    }\n"
    << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_sum += __shfl_xor_sync(0xffffffffu, lm_sum, lm_o);\n"
    << "    if (lm_lane == 0) { lm_stat[lm_warp][0] = lm_mx; lm_stat[lm_warp][1] = lm_sum; }\n  }\n"
    << "  __syncthreads();\n"
    // Values: each warp takes every warps-th key (four at a time) and its lanes four consecutive
    // output columns each (a warp reads a value row's 128 columns in one run), for every row of
    // the group; a row adds nothing for a key of probability 0 whatever its (pad) values, and
    // where the values were not loaded with the keys, keys no row weighs are not read. The
    // warps' partial rows meet in shared memory.
    << "  for (long long lm_j0 = 0; lm_j0 < lm_dv; lm_j0 += 128) {\n"
    << "    float lm_a[lm_R][4];\n"
    << "    #pragma unroll\n"
    << "    for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) lm_a[lm_rr][0] = lm_a[lm_rr][1] = lm_a[lm_rr][2] = lm_a[lm_rr][3] = 0.0f;\n"
    << "    for (long long lm_key0 = lm_k0 + lm_warp; lm_key0 < lm_k1; lm_key0 += 4 * lm_warps) {\n"
    << "      float lm_vv[4][4], lm_pr[4][lm_R];\n"
    << "      #pragma unroll\n"
    << "      for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
    << "        const long long lm_key = lm_key0 + lm_u * lm_warps;\n"
    << "        bool lm_any = false;\n"
    << "        #pragma unroll\n"
    << "        for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr) {\n"
    << "          lm_pr[lm_u][lm_rr] = lm_key < lm_k1 ? lm_sc[lm_rr * lm_CH + (lm_key - lm_k0)] : 0.0f;\n"
    << "          lm_any = lm_any || lm_pr[lm_u][lm_rr] != 0.0f;\n        }\n"
    << (preload_v ? "        (void)lm_any;  // the values came with the keys\n" : "")
    << value_pass_loads << "      }\n"
    << "      #pragma unroll\n"
    << "      for (int lm_u = 0; lm_u < 4; ++lm_u)\n"
    << "        #pragma unroll\n"
    << "        for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr)\n"
    << "          if (lm_pr[lm_u][lm_rr] != 0.0f)\n"
    << "            for (int lm_e = 0; lm_e < 4; ++lm_e) lm_a[lm_rr][lm_e] = __fmaf_rn(lm_pr[lm_u][lm_rr], lm_vv[lm_u][lm_e], lm_a[lm_rr][lm_e]);\n"
    << "    }\n"
    << "    #pragma unroll\n"
    << "    for (int lm_rr = 0; lm_rr < lm_R; ++lm_rr)\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const long long lm_j = lm_j0 + lm_lane * 4 + lm_e;\n"
    << "        if (lm_j < lm_dv) lm_part[(lm_warp * lm_R + lm_rr) * lm_dv + lm_j] = lm_a[lm_rr][lm_e];\n      }\n  }\n"
    << "  __syncthreads();\n"
    // Each live row's partial result for the combine step, [max, sum, unnormalised row], at
    // (row, slice) of the scratch.
    << "  for (int lm_rr = 0; lm_rr < lm_live; ++lm_rr) {\n"
    << "    float* lm_res = (float*)lm_out + ((lm_row0 + lm_rr) * lm_splits + lm_split) * (lm_dv + 2);\n"
    << "    if (threadIdx.x == 0) { lm_res[0] = lm_stat[lm_rr][0]; lm_res[1] = lm_stat[lm_rr][1]; }\n"
    << "    for (long long lm_j = threadIdx.x; lm_j < lm_dv; lm_j += blockDim.x) {\n"
    << "      float lm_acc = 0.0f;\n      for (int lm_w = 0; lm_w < lm_warps; ++lm_w) lm_acc += lm_part[(lm_w * lm_R + lm_rr) * lm_dv + lm_j];\n"
    << "      lm_res[2 + lm_j] = lm_acc;\n    }\n  }\n";
  // Combine: a warp per output element, its lanes over the slices. Each lane merges its slices'
  // [max, sum, value] online (all its loads independent, so they are in flight together), then
  // a shuffle tree merges the lanes: the block waits on memory once, not once per slice.
  std::ostringstream cb;
  cb << "  const long long lm_keys = " << c(k->shape[r - 1]) << ", lm_dv = " << c(v->shape[r - 1]) << ";\n"
     << "  const long long lm_splits = (lm_keys + " << kAttentionChunk << " - 1) / " << kAttentionChunk << ";\n"
     << "  const long long lm_count = " << c(product_of(n.inputs[0].view.shape(), 0, r - 1)) << " * lm_dv;\n"
     << "  const float lm_log2e = " << float_lit(1.4426950408889634f) << ", lm_ninf = __int_as_float((int)0xff800000u);\n"
     << "  const int lm_lane = threadIdx.x & 31;\n"
     // Merges (m2, l2, o2) into (m, l, o): both rescaled to the larger max; an empty side
     // (max -inf) weighs 0.
     << "  auto lm_merge = [&](float& lm_m, float& lm_l, float& lm_o, float lm_m2, float lm_l2, float lm_o2) {\n"
     << "    const float lm_mn = lm_fmax_nan(lm_m, lm_m2);\n"
     << "    const float lm_a = lm_m == lm_ninf ? 0.0f : exp2f((lm_m + lm_mn * -1.0f) * lm_log2e);\n"
     << "    const float lm_b = lm_m2 == lm_ninf ? 0.0f : exp2f((lm_m2 + lm_mn * -1.0f) * lm_log2e);\n"
     << "    lm_l = __fmaf_rn(lm_l2, lm_b, lm_l * lm_a);\n    lm_o = __fmaf_rn(lm_o2, lm_b, lm_o * lm_a);\n    lm_m = lm_mn;\n  };\n"
     << "  for (long long lm_z = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; lm_z < lm_count;"
        " lm_z += ((long long)gridDim.x * blockDim.x) >> 5) {\n"
     << "    const long long lm_row = lm_z / lm_dv, lm_j = lm_z - lm_row * lm_dv;\n"
     << "    const float* lm_p = (const float*)lm_in0 + lm_row * lm_splits * (lm_dv + 2);\n"
     << "    float lm_m = lm_ninf, lm_l = 0.0f, lm_o = 0.0f;\n"
     << "    #pragma unroll 2\n"
     << "    for (long long lm_s = lm_lane; lm_s < lm_splits; lm_s += 32) {\n"
     << "      const float* lm_q = lm_p + lm_s * (lm_dv + 2);\n"
     << "      lm_merge(lm_m, lm_l, lm_o, lm_q[0], lm_q[1], lm_q[2 + lm_j]);\n    }\n"
     << "    for (int lm_x = 16; lm_x > 0; lm_x >>= 1) {\n"
     << "      const float lm_m2 = __shfl_xor_sync(0xffffffffu, lm_m, lm_x), lm_l2 = __shfl_xor_sync(0xffffffffu, lm_l, lm_x),"
        " lm_o2 = __shfl_xor_sync(0xffffffffu, lm_o, lm_x);\n"
     << "      lm_merge(lm_m, lm_l, lm_o, lm_m2, lm_l2, lm_o2);\n    }\n"
     << "    if (lm_lane == 0) ((" << storage_type(out_dtype) << "*)lm_out)[lm_z] = "
     << store(out_dtype, convert("lm_o * (1.0f / lm_l)", DType::F32, out_dtype)) << ";\n  }\n";
  return AttentionKernels{batch_shape_fn(*k, r) + s.str(), cb.str()};
}

// Prefill attention, flash-style: one block per (batch entry, tile of kTiledRows query rows),
// walking the keys in tiles of kTiledKeys. The q tile, one key (then value) tile and the tile's
// probabilities live in shared memory (rows padded by one float, so the threads' columns fall in
// different banks); each thread owns kTiledRows / 16 query rows and four keys of a tile (a 4x4
// block of scores at 64 rows: each q value it loads serves four keys and each key value four
// rows) and a sixteenth of the output columns of its rows, with an online softmax (running max
// and sum per row, rescaled per tile). A key tile that the mask hides from every row of the
// block is skipped (half the tiles of a causal prefill). Head dims are constants up to 256.
std::optional<std::string> tiled_attention(const Node& n, const std::vector<DType>& dt, DType out_dtype) {
  const std::optional<StridedKv> kv = strided_kv(n, dt);
  if (!kv) return std::nullopt;
  const ViewLayer *k = kv->k, *v = kv->v;
  const size_t r = kv->r;
  const std::optional<int64_t> dk = n.inputs[0].view.shape()[r - 1].as_const(), dv = v->shape[r - 1].as_const();
  if (!dk || !dv || *dk < 1 || *dv < 1 || *dk > kTiledMaxHeadDim || *dv > kTiledMaxHeadDim) return std::nullopt;
  static_assert(kBlockThreads == 256 && kTiledRows % 16 == 0 && kTiledKeys == 64, "the thread layout below assumes these");
  const int64_t wide = std::max(*dk, *dv) + 1, cols = (*dv + 15) / 16;
  const DType t = dt[0];
  std::ostringstream s;
  s << batch_shape_fn(*k, r) << mask_reader(n, dt[3], k->shape[r - 1])
    << "  extern __shared__ float lm_sh[];\n"
    << "  constexpr int lm_DK = " << *dk << ", lm_DV = " << *dv << ", lm_W = " << wide << ", lm_C = " << cols << ";\n"
    << "  constexpr int lm_BM = " << kTiledRows << ", lm_BN = " << kTiledKeys << ", lm_RT = lm_BM / 16;\n"
    << "  float* lm_qs = lm_sh;                      // [BM][DK + 1]\n"
    << "  float* lm_kv = lm_qs + lm_BM * (lm_DK + 1);  // [BN][W]: a key tile, then a value tile\n"
    << "  float* lm_ps = lm_kv + lm_BN * lm_W;         // [BM][BN] probabilities\n"
    << "  const long long lm_seq = " << c(n.inputs[0].view.shape()[r - 2]) << ", lm_keys = " << c(k->shape[r - 1]) << ";\n"
    << "  const long long lm_tiles = (lm_seq + lm_BM - 1) / lm_BM;\n"
    << "  const long long lm_b = blockIdx.x / lm_tiles, lm_r0 = (blockIdx.x - lm_b * lm_tiles) * lm_BM;\n"
    << batch_coords(r)
    << "  for (int lm_i = threadIdx.x; lm_i < lm_BM * lm_DK; lm_i += blockDim.x) {\n"
    << "    const int lm_row = lm_i / lm_DK, lm_p = lm_i - lm_row * lm_DK;\n"
    << "    lm_qs[lm_row * (lm_DK + 1) + lm_p] = lm_r0 + lm_row < lm_seq ? (float)lm_ld0((lm_b * lm_seq + lm_r0 + lm_row) * lm_DK + lm_p) : 0.0f;\n  }\n"
    << "  const int lm_rg = threadIdx.x >> 4, lm_kg = threadIdx.x & 15;  // rows RT rg + a (a < RT); keys kg + 16i\n"
    << tiled_rows_setup(dt, *kv, "lm_RT", "lm_RT * lm_rg + lm_a")
    << "  float lm_m[lm_RT], lm_l[lm_RT], lm_o[lm_RT][lm_C];\n"
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < lm_RT; ++lm_a) {\n"
    << "    lm_m[lm_a] = lm_ninf; lm_l[lm_a] = 0.0f;\n"
    << "    #pragma unroll\n    for (int lm_c = 0; lm_c < lm_C; ++lm_c) lm_o[lm_a][lm_c] = 0.0f;\n  }\n"
    << "  for (long long lm_k0 = 0; lm_k0 < lm_keys; lm_k0 += lm_BN) {\n"
    << "    bool lm_vis[lm_RT][4];\n    int lm_any = 0;\n"
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < lm_RT; ++lm_a)\n"
    << "      for (int lm_i = 0; lm_i < 4; ++lm_i) {\n"
    << "        const long long lm_key = lm_k0 + lm_kg + 16 * lm_i;\n"
    << "        lm_vis[lm_a][lm_i] = lm_live[lm_a] && lm_key < lm_keys && lm_mask_at(lm_mrow[lm_a], lm_key) != 0;\n"
    << "        lm_any |= lm_vis[lm_a][lm_i];\n      }\n"
    // Also the barrier that lets this tile overwrite the last one's shared memory.
    << "    if (!__syncthreads_or(lm_any)) continue;\n"
    << tile_rows_to_shared("lm_K", dt[1], *k, r, r - 1, r - 2, "lm_ksp", "lm_DK", value_lit(n.inputs[1].view.pad_value(), dt[1]))
    << "    __syncthreads();\n"
    << "    float lm_s[lm_RT][4];\n"
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < lm_RT; ++lm_a) lm_s[lm_a][0] = lm_s[lm_a][1] = lm_s[lm_a][2] = lm_s[lm_a][3] = 0.0f;\n"
    << "    const float* lm_q0 = lm_qs + (lm_RT * lm_rg) * (lm_DK + 1);\n"
    << "    #pragma unroll 4\n"
    << "    for (int lm_p = 0; lm_p < lm_DK; ++lm_p) {\n"
    << "      float lm_qa[lm_RT], lm_kx[4];\n"
    << "      #pragma unroll\n      for (int lm_a = 0; lm_a < lm_RT; ++lm_a) lm_qa[lm_a] = " << convert("lm_q0[lm_a * (lm_DK + 1) + lm_p]", DType::F32, t) << ";\n"
    << "      #pragma unroll\n      for (int lm_i = 0; lm_i < 4; ++lm_i) lm_kx[lm_i] = lm_kv[(lm_kg + 16 * lm_i) * lm_W + lm_p];\n"
    << "      #pragma unroll\n      for (int lm_a = 0; lm_a < lm_RT; ++lm_a)\n"
    << "        #pragma unroll\n        for (int lm_i = 0; lm_i < 4; ++lm_i) lm_s[lm_a][lm_i] = __fmaf_rn(lm_qa[lm_a], lm_kx[lm_i], lm_s[lm_a][lm_i]);\n"
    << "    }\n"
    // Online softmax: each row's 16 threads (half a warp) share its max and sum by shuffles.
    << "    #pragma unroll\n    for (int lm_a = 0; lm_a < lm_RT; ++lm_a) {\n"
    << "      float lm_tmax = lm_ninf;\n"
    << "      for (int lm_i = 0; lm_i < 4; ++lm_i) {\n"
    << "        lm_s[lm_a][lm_i] = lm_vis[lm_a][lm_i] ? " << convert("lm_s[lm_a][lm_i]", DType::F32, t) << " * " << float_lit(n.constant)
    << " : lm_ninf;\n"
    << "        lm_tmax = lm_fmax_nan(lm_tmax, lm_s[lm_a][lm_i]);\n      }\n"
    << "      for (int lm_x = 8; lm_x > 0; lm_x >>= 1) lm_tmax = lm_fmax_nan(lm_tmax, __shfl_xor_sync(0xffffffffu, lm_tmax, lm_x));\n"
    << "      const float lm_mn = lm_fmax_nan(lm_m[lm_a], lm_tmax);\n"
    << "      const float lm_alpha = lm_m[lm_a] == lm_ninf ? 0.0f : exp2f((lm_m[lm_a] + lm_mn * -1.0f) * lm_log2e);\n"
    << "      float lm_sum = 0.0f;\n"
    << "      for (int lm_i = 0; lm_i < 4; ++lm_i) {\n"
    << "        const float lm_e = lm_s[lm_a][lm_i] == lm_ninf ? 0.0f : exp2f((lm_s[lm_a][lm_i] + lm_mn * -1.0f) * lm_log2e);\n"
    << "        lm_ps[(lm_RT * lm_rg + lm_a) * lm_BN + lm_kg + 16 * lm_i] = lm_e;\n        lm_sum += lm_e;\n      }\n"
    << "      for (int lm_x = 8; lm_x > 0; lm_x >>= 1) lm_sum += __shfl_xor_sync(0xffffffffu, lm_sum, lm_x);\n"
    << "      lm_l[lm_a] = __fmaf_rn(lm_l[lm_a], lm_alpha, lm_sum);\n      lm_m[lm_a] = lm_mn;\n"
    << "      for (int lm_c = 0; lm_c < lm_C; ++lm_c) lm_o[lm_a][lm_c] *= lm_alpha;\n    }\n"
    << "    __syncthreads();\n"
    << tile_rows_to_shared("lm_V", dt[2], *v, r, r - 2, r - 1, "lm_vsj", "lm_DV", value_lit(n.inputs[2].view.pad_value(), dt[2]))
    << "    __syncthreads();\n"
    << "    const float* lm_p0 = lm_ps + (lm_RT * lm_rg) * lm_BN;\n"
    << "    for (int lm_kk = 0; lm_kk < lm_BN; ++lm_kk) {\n"
    << "      float lm_e[lm_RT];\n      bool lm_nz = false;\n"
    << "      #pragma unroll\n      for (int lm_a = 0; lm_a < lm_RT; ++lm_a) { lm_e[lm_a] = lm_p0[lm_a * lm_BN + lm_kk]; lm_nz = lm_nz || lm_e[lm_a] != 0.0f; }\n"
    << "      if (!lm_nz) continue;\n"
    << "      const float* lm_vr = lm_kv + lm_kk * lm_W + lm_kg;\n"
    << "      #pragma unroll\n"
    << "      for (int lm_c = 0; lm_c < lm_C; ++lm_c) {\n"
    << "        if (lm_kg + 16 * lm_c >= lm_DV) break;\n"
    << "        const float lm_vx = lm_vr[16 * lm_c];\n"
    << "        #pragma unroll\n        for (int lm_a = 0; lm_a < lm_RT; ++lm_a) lm_o[lm_a][lm_c] = __fmaf_rn(lm_e[lm_a], lm_vx, lm_o[lm_a][lm_c]);\n"
    << "      }\n    }\n  }\n"
    << "  #pragma unroll\n  for (int lm_a = 0; lm_a < lm_RT; ++lm_a) {\n"
    << "    if (!lm_live[lm_a]) continue;\n"
    << "    const long long lm_row = lm_b * lm_seq + lm_r0 + lm_RT * lm_rg + lm_a;\n"
    << "    const float lm_inv = 1.0f / lm_l[lm_a];\n"
    << "    #pragma unroll\n"
    << "    for (int lm_c = 0; lm_c < lm_C; ++lm_c) {\n"
    << "      const int lm_j = lm_kg + 16 * lm_c;\n"
    << "      if (lm_j < lm_DV) ((" << storage_type(out_dtype) << "*)lm_out)[lm_row * lm_DV + lm_j] = "
    << store(out_dtype, convert("lm_o[lm_a][lm_c] * lm_inv", DType::F32, out_dtype)) << ";\n"
    << "    }\n  }\n";
  return s.str();
}

Expr tiled_attention_shared_bytes(const Node& n) {
  const size_t r = n.inputs[0].view.rank();
  const int64_t dk = *n.inputs[0].view.shape()[r - 1].as_const(), dv = *n.inputs[2].view.shape()[r - 1].as_const();
  return Expr((kTiledRows * (dk + 1) + kTiledKeys * (std::max(dk, dv) + 1) + kTiledRows * kTiledKeys) * 4);
}

}  // namespace luminal::cuda::gen
