// The streamed GEMVs: a decode's linear layers and an MoE's expert products with their weights
// brought into shared memory by Hopper's bulk copies (see streamed_linear in
// cuda_codegen_parts.h).
#include <algorithm>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"

namespace luminal::cuda::gen {

// The register GEMV (strided_linear_body) holds each thread's loads in registers until their
// products: a unit's few loads a thread go out, are waited for and used, and between units (the
// sums, the stores, a barrier) a warp has none in flight, so the bytes in flight per SM rise and
// fall with the units. On the H200 its schedules for the 8B's layers reached 3.0-4.0 TB/s where
// the LM head's reached 4.7. Here one thread of each block keeps `stages` chunks of the weight
// on their way into shared memory at all times, released stage by stage as the warps finish
// with them, so the memory system sees a steady queue however the warps are busy.
//
// Layout: a tile is `tile_rows` weight rows (8 per warp: warp w takes rows w, w + 8, ..); a work
// item is one chunk of each of the tile's rows (a run of k, or an expert's row). A block takes
// the tiles blockIdx.x, blockIdx.x + gridDim.x, .. and walks each tile's chunks in order, for
// each group of `rows` activation rows in turn (one for a decode).
namespace {

// What the three kinds of streamed kernel (a linear layer, an MoE's expert products, and their
// sum over the experts) put into the shared loop. Code strings see the loop's names: lm_t (the
// tile), lm_q (its row), lm_c (the chunk), lm_g (the group of rows), lm_r (a row of it), lm_row
// (that row's index), lm_p (a warp's row of the tile: tile row lm_warp + 8 lm_p).
struct StreamedParts {
  std::string decl;        // declares lm_m, lm_tiles (and what the rest needs); before the wait where `early`
  bool early = true;       // the first stages' copies before the wait (weights known without the kernel before's results)
  std::string listing;     // after the wait, every thread: what decides the chunks (the chosen experts)
  std::string chunks;      // chunks a tile
  std::string row_at;      // the body of a lambda (lm_t, lm_q, lm_c) -> element offset of the chunk in lm_B, or -1
  std::string chunk_k0;    // where chunk lm_c starts in its row of lm_kk values (it runs to the next or the row's end)
  std::string group_stage; // every thread, at a group's first item (the staged activations)
  std::string item;        // every thread, before an item's products (declares lm_xp(lm_r): its x at the chunk's start;
                           // lm_row_in(lm_r) is row lm_r's index, or 0 past the last row)
  std::string item_end;    // per (lm_p, lm_r) after the products, into lm_acc from lm_tmp; empty: they go to lm_acc
  std::string store;       // lane 0, per lm_r of a tile's last item, with lm_row < lm_m: lm_acc[..][lm_r] summed
  std::string weights = "lm_in1";  // the parameter holding the weights
};

std::optional<StreamedLinear> streamed_kernel(const StreamedParts& parts, const StreamedVariant& v, DType w_dtype, long long chunk,
                                              long long extra_shared) {
  const long long wb = dtype_size(w_dtype), per = 16 / wb, TR = v.tile_rows, P = TR / 8, R = v.rows;
  const long long stage_bytes = TR * chunk * wb, fixed = 128 + extra_shared;
  long long S = v.stages;
  while (S >= 2 && fixed + S * stage_bytes > kMaxStreamedSharedBytes) --S;
  if (S < 2) return std::nullopt;
  const bool bf16 = w_dtype == DType::BF16;
  const std::string wt = bf16 ? "uint16_t" : "float";
  const std::string acc = parts.item_end.empty() ? "lm_acc" : "lm_tmp";
  // Elements in chunk lm_c: `chunk` of them, fewer in a row's last.
  const std::string k0 = "(" + parts.chunk_k0 + ")", len = "(lm_kk - " + k0 + " < " + std::to_string(chunk) + " ? lm_kk - " + k0 + " : " +
                                                            std::to_string(chunk) + ")";
  StreamedLinear out;
  out.shared_bytes = fixed + S * stage_bytes;
  std::ostringstream pre, s;
  pre << "  extern __shared__ __align__(128) unsigned char lm_smem[];\n"
      << "  unsigned long long* lm_bar = (unsigned long long*)lm_smem;\n"
      << "  " << wt << "* lm_ws = (" << wt << "*)(lm_smem + 128);\n"
      << "  unsigned char* lm_extra = lm_smem + 128 + " << S * stage_bytes << ";  // the kernel's own shared bytes\n"
      << "  const " << wt << "* lm_B = (const " << wt << "*)" << parts.weights << ";\n"
      << "  if (threadIdx.x == 0)\n"
      << "    for (int lm_s = 0; lm_s < " << S << "; ++lm_s) lm_mbar_init(&lm_bar[lm_s], 1);\n"
      << "  __syncthreads();  // the barriers' initialisation, for every thread's waits\n";
  std::ostringstream items;  // the item count and the issue of item lm_i into stage lm_i % S
  items << "  const long long lm_mine = lm_m > 0 && blockIdx.x < lm_tiles ? (lm_tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;\n"
        << "  const long long lm_chunks = " << parts.chunks << ";\n"
        << "  const long long lm_items = (lm_m + " << R - 1 << ") / " << R << " * lm_mine * lm_chunks;\n"
        << "  auto lm_row_at = [&](long long lm_t, int lm_q, long long lm_c) -> long long {\n" << parts.row_at << "  };\n"
        << "  auto lm_issue = [&](long long lm_i) {\n"
        << "    const int lm_s = (int)(lm_i % " << S << ");\n"
        << "    const long long lm_c = lm_i % lm_chunks, lm_t = blockIdx.x + (lm_i / lm_chunks) % lm_mine * gridDim.x;\n"
        << "    const unsigned lm_len = (unsigned)(" << len << " * " << wb << ");\n"
        << "    unsigned lm_tx = 0;\n"
        << "    for (int lm_q = 0; lm_q < " << TR << "; ++lm_q) lm_tx += lm_row_at(lm_t, lm_q, lm_c) >= 0 ? lm_len : 0u;\n"
        << "    lm_mbar_expect(&lm_bar[lm_s], lm_tx);\n"
        << "    for (int lm_q = 0; lm_q < " << TR << "; ++lm_q) {\n"
        << "      const long long lm_at = lm_row_at(lm_t, lm_q, lm_c);\n"
        << "      if (lm_at >= 0) lm_bulk_copy(lm_ws + ((long long)lm_s * " << TR << " + lm_q) * " << chunk << ", lm_B + lm_at, lm_len, &lm_bar[lm_s]);\n"
        << "    }\n"
        << "  };\n";
  const std::string first_issues = "  if (threadIdx.x == 0)\n    for (long long lm_i = 0; lm_i < " + std::to_string(S) +
                                   " && lm_i < lm_items; ++lm_i) lm_issue(lm_i);\n";
  // Before the wait on the kernel before, where nothing read depends on it (a linear layer's
  // weights): the first stages' weights stream in while that kernel finishes.
  if (parts.early) pre << parts.decl << items.str() << first_issues;
  out.before_wait = pre.str();
  if (!parts.early) s << parts.decl << parts.listing << items.str() << first_issues;
  s << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5;\n"
    << "  float lm_acc[" << P << "][" << R << "] = {};\n"
    << "  for (long long lm_i = 0; lm_i < lm_items; ++lm_i) {\n"
    << "    const int lm_s = (int)(lm_i % " << S << ");\n"
    << "    const long long lm_c = lm_i % lm_chunks, lm_u = lm_i / lm_chunks, lm_t = blockIdx.x + lm_u % lm_mine * gridDim.x, lm_g = lm_u / lm_mine;\n";
  if (!parts.group_stage.empty())
    s << "    if (lm_c == 0 && lm_u % lm_mine == 0) {  // a group's first item: its rows staged\n"
      << "      __syncthreads();  // the group before is done with the stage\n"
      << parts.group_stage << "      __syncthreads();\n"
      << "    }\n";
  s << "    auto lm_row_in = [&](int lm_r) -> long long { return lm_g * " << R << " + lm_r < lm_m ? lm_g * " << R << " + lm_r : 0; };\n"
    << parts.item << "    lm_mbar_wait(&lm_bar[lm_s], (unsigned)(lm_i / " << S << ") & 1u);\n"
    << "    const int lm_len = (int)" << len << ";\n"
    << "    const " << wt << "* lm_st = lm_ws + (long long)lm_s * " << TR * chunk << " + lm_warp * " << chunk << ";\n";
  if (!parts.item_end.empty()) s << "    float lm_tmp[" << P << "][" << R << "] = {};\n";
  s << "    for (int lm_e = lm_lane * " << per << "; lm_e < lm_len; lm_e += " << 32 * per << ") {\n"
    << "      float lm_x[" << R << "][" << per << "];\n"
    << "      for (int lm_r = 0; lm_r < " << R << "; ++lm_r)\n"
    << "        for (int lm_f = 0; lm_f < " << per << "; lm_f += 4) {\n"
    << "          const float4 lm_v = *(const float4*)(lm_xp(lm_r) + lm_e + lm_f);\n"
    << "          lm_x[lm_r][lm_f] = lm_v.x; lm_x[lm_r][lm_f + 1] = lm_v.y; lm_x[lm_r][lm_f + 2] = lm_v.z; lm_x[lm_r][lm_f + 3] = lm_v.w;\n"
    << "        }\n"
    << "      for (int lm_p = 0; lm_p < " << P << "; ++lm_p) {\n"
    << "        float lm_w[" << per << "];\n";
  if (bf16)
    s << "        const uint4 lm_raw = *(const uint4*)(lm_st + lm_p * " << 8 * chunk << " + lm_e);\n"
      << "        lm_w[0] = __uint_as_float(lm_raw.x << 16); lm_w[1] = __uint_as_float(lm_raw.x & 0xffff0000u);\n"
      << "        lm_w[2] = __uint_as_float(lm_raw.y << 16); lm_w[3] = __uint_as_float(lm_raw.y & 0xffff0000u);\n"
      << "        lm_w[4] = __uint_as_float(lm_raw.z << 16); lm_w[5] = __uint_as_float(lm_raw.z & 0xffff0000u);\n"
      << "        lm_w[6] = __uint_as_float(lm_raw.w << 16); lm_w[7] = __uint_as_float(lm_raw.w & 0xffff0000u);\n";
  else
    s << "        const float4 lm_raw = *(const float4*)(lm_st + lm_p * " << 8 * chunk << " + lm_e);\n"
      << "        lm_w[0] = lm_raw.x; lm_w[1] = lm_raw.y; lm_w[2] = lm_raw.z; lm_w[3] = lm_raw.w;\n";
  s << "        for (int lm_r = 0; lm_r < " << R << "; ++lm_r)\n"
    << "          for (int lm_f = 0; lm_f < " << per << "; ++lm_f) " << acc << "[lm_p][lm_r] = __fmaf_rn(lm_x[lm_r][lm_f], lm_w[lm_f], " << acc
    << "[lm_p][lm_r]);\n"
    << "      }\n"
    << "    }\n";
  if (!parts.item_end.empty())
    s << "    for (int lm_p = 0; lm_p < " << P << "; ++lm_p)\n"
      << "      for (int lm_r = 0; lm_r < " << R << "; ++lm_r) {\n" << parts.item_end << "      }\n";
  s << "    if (lm_c == lm_chunks - 1) {  // the tile's last chunk: its sums, stored\n"
    << "      for (int lm_p = 0; lm_p < " << P << "; ++lm_p)\n"
    << "        for (int lm_r = 0; lm_r < " << R << "; ++lm_r)\n"
    << "          for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc[lm_p][lm_r] += __shfl_xor_sync(0xffffffffu, lm_acc[lm_p][lm_r], lm_o);\n"
    << "      if (lm_lane == 0)\n"
    << "        for (int lm_r = 0; lm_r < " << R << "; ++lm_r) {\n"
    << "          const long long lm_row = lm_g * " << R << " + lm_r;\n"
    << "          if (lm_row >= lm_m) break;\n"
    << parts.store << "        }\n"
    << "      for (int lm_p = 0; lm_p < " << P << "; ++lm_p)\n"
    << "        for (int lm_r = 0; lm_r < " << R << "; ++lm_r) lm_acc[lm_p][lm_r] = 0.0f;\n"
    << "    }\n"
    << "    __syncthreads();  // every warp is done with the stage\n"
    << "    if (threadIdx.x == 0 && lm_i + " << S << " < lm_items) {\n"
    << "      lm_fence_async_shared();\n"
    << "      lm_issue(lm_i + " << S << ");\n"
    << "    }\n"
    << "  }\n";
  out.body = s.str();
  return out;
}

bool variant_fits(const StreamedVariant& v, bool gated) {
  if (v.tile_rows < 8 || v.tile_rows % 8 != 0 || v.rows < 1 || v.stages < 2 || v.chunk_bytes < 16 || v.chunk_bytes % 16 != 0) return false;
  return !gated || v.tile_rows % 16 == 0;  // a warp holds a gate row and its up row
}

// A weight's rows as bulk copies need: k (a constant), the row stride, the offset and every
// batch stride (`batch`, the dims before the last two) multiples of 16 bytes.
std::optional<int64_t> copyable_k(const ViewLayer* a, const ViewLayer* b, long long wb, size_t batch_dims) {
  const size_t r = a->shape.size();
  const std::optional<int64_t> k = a->shape[r - 1].as_const();
  if (!k || *k <= 0 || (*k * wb) % 16 != 0 || !b->strides[r - 2].is_const(1)) return std::nullopt;
  auto aligned = [&](const Expr& e) {
    const std::optional<int64_t> v = e.as_const();
    return v && (*v * wb) % 16 == 0;
  };
  if (!aligned(b->strides[r - 1]) || !aligned(b->offset)) return std::nullopt;
  for (size_t d = 0; d < batch_dims; ++d)
    if (!aligned(b->strides[d])) return std::nullopt;
  return k;
}

// The chunk of each row a stage holds (elements), and how many make a row of k.
long long chunk_of(const StreamedVariant& v, long long wb, long long k) { return std::min<long long>(v.chunk_bytes / wb, k); }

// Every thread lists the experts whose scale is nonzero for some row (in order, as
// scaled_batches_prologue does) into lm_act[0, lm_nact), the ballots into lm_on_bits.
std::string list_experts(const ViewLayer* s, const std::string& scales) {
  std::ostringstream o;
  o << "  __shared__ int lm_act[" << kMaxListedExperts << "];\n"
    << "  __shared__ unsigned lm_on_bits[" << kMaxListedExperts / 32 << "];\n"
    << "  __shared__ int lm_wcnt[" << kBlockThreads / 32 << "];\n  __shared__ int lm_nact;\n"
    << "  if (threadIdx.x == 0) lm_nact = 0;\n  __syncthreads();\n"
    << "  for (long long lm_c0 = 0; lm_c0 < lm_E; lm_c0 += blockDim.x) {\n"
    << "    const long long lm_cb = lm_c0 + threadIdx.x;\n    bool lm_on = false;\n"
    << "    if (lm_cb < lm_E)\n"
    << "      for (long long lm_i = 0; lm_i < lm_m && !lm_on; ++lm_i)\n"
    << "        lm_on = ((const float*)" << scales << ")[" << c(s->offset) << " + lm_cb * " << c(s->strides[0]) << " + lm_i * " << c(s->strides[1])
    << "] != 0.0f;\n"
    << append_listed("    ", "lm_cb", "lm_E", "lm_on_bits", "lm_act", "lm_nact") << "  }\n";
  return o.str();
}

}  // namespace

std::optional<StreamedLinear> streamed_linear(const ViewLayer* a, const ViewLayer* b, const std::vector<DType>& dt,
                                              const std::function<std::string(const std::string&, DType)>& out_store,
                                              const StreamedVariant& v, const NormPrologue* norm, const GatedEpilogue* gated) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r || dt.size() < 2 || dt[0] != DType::F32 || (dt[1] != DType::F32 && dt[1] != DType::BF16))
    return std::nullopt;
  for (size_t d = 0; d + 2 < r; ++d)
    if (!a->shape[d].is_const(1)) return std::nullopt;  // one batch: a linear layer
  if (norm && norm->gain && norm->gain_dtype != DType::F32 && norm->gain_dtype != DType::BF16) return std::nullopt;
  if (!variant_fits(v, gated != nullptr)) return std::nullopt;
  const long long wb = dtype_size(dt[1]);
  const std::optional<int64_t> kconst = copyable_k(a, b, wb, 0);
  if (!kconst) return std::nullopt;
  const long long K = *kconst, TR = v.tile_rows, P = TR / 8, R = v.rows, KC = chunk_of(v, wb, K), NC = (K + KC - 1) / KC;
  const bool gain = norm && norm->gain, gain_bf16 = gain && norm->gain_dtype == DType::BF16;
  const std::string NT = gated ? "lm_h" : "lm_n";
  const long long CW = gated ? TR / 2 : TR;  // output columns a tile gives
  StreamedParts parts;
  std::ostringstream decl;
  // The staged activations (times the norm's gain, with each row's sum of squares): R rows of K.
  decl << "  float* lm_xs = (float*)lm_extra;\n  float* lm_ssq = lm_xs + " << R * K << ";\n"
       << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_n = " << c(b->shape[r - 1]) << ", lm_kk = " << K << ";\n"
       << (gated ? "  const long long lm_h = " + c(gated->half) + ";\n" : std::string())
       << "  const long long lm_tiles = lm_n > 0 ? (" << NT << " + " << CW - 1 << ") / " << CW << " : 0;\n";
  parts.decl = decl.str();
  parts.chunks = std::to_string(NC);
  const std::string start = "lm_c * " + std::to_string(KC) + " + " + c(b->offset);
  if (gated)  // tile rows [0, CW) are gate's columns, [CW, TR) the same columns of up
    parts.row_at = "    const long long lm_j = lm_t * " + std::to_string(CW) + " + lm_q % " + std::to_string(CW) + ";\n" +
                   "    return lm_j < lm_h ? (lm_q < " + std::to_string(CW) + " ? lm_j : lm_h + lm_j) * " + c(b->strides[r - 1]) + " + " + start +
                   " : -1;\n";
  else
    parts.row_at = "    const long long lm_j = lm_t * " + std::to_string(TR) + " + lm_q;\n    return lm_j < lm_n ? lm_j * " + c(b->strides[r - 1]) +
                   " + " + start + " : -1;\n";
  parts.chunk_k0 = "lm_c * " + std::to_string(KC);
  std::ostringstream stage;
  const std::string gt = gain_bf16 ? "uint16_t" : "float";
  stage << "      const float* lm_X = (const float*)lm_in0 + " << c(a->offset) << ";\n"
        << (gain ? "      const " + gt + "* lm_G = (const " + gt + "*)lm_gain + " + c(norm->gain_offset) + ";\n" : std::string())
        << "      for (int lm_r = 0; lm_r < " << R << "; ++lm_r) {\n"
        << "        const long long lm_row = lm_g * " << R << " + lm_r;\n"
        << "        float lm_q = 0.0f;\n"
        << "        for (long long lm_p = threadIdx.x; lm_p < " << K << "; lm_p += blockDim.x) {\n"
        << "          float lm_x = lm_row < lm_m ? lm_X[lm_row * " << c(a->strides[r - 2]) << " + lm_p] : 0.0f;\n";
  if (norm) stage << "          lm_q = __fmaf_rn(lm_x, lm_x, lm_q);\n";
  if (gain) stage << "          lm_x *= " << (gain_bf16 ? "lm_bf16_f32(lm_G[lm_p])" : "lm_G[lm_p]") << ";\n";
  stage << "          lm_xs[lm_r * " << K << " + lm_p] = lm_x;\n        }\n";
  if (norm)
    stage << "        lm_q = lm_block_reduce(lm_q, [](float a, float b) { return a + b; });\n"
          << "        if (threadIdx.x == 0) lm_ssq[lm_r] = lm_q;\n";
  stage << "      }\n";
  parts.group_stage = stage.str();
  parts.item = "    auto lm_xp = [&](int lm_r) { return lm_xs + lm_r * " + std::to_string(K) + " + lm_c * " + std::to_string(KC) + "; };\n";
  // 1 / sqrt(mean(x²) + eps) on each sum, as the norm kernel computes it.
  const std::string f = norm ? "1.0f / sqrtf(lm_ssq[lm_r] * (1.0f / (float)lm_kk) + " + float_lit(norm->eps) + ")" : "";
  std::ostringstream st;
  st << "          for (int lm_p = 0; lm_p < " << (gated ? P / 2 : P) << "; ++lm_p) {\n"
     << "            const long long lm_j = lm_t * " << CW << " + lm_warp + 8 * lm_p;\n"
     << "            if (lm_j >= " << NT << ") break;\n"
     << "            float lm_v = lm_acc[lm_p][lm_r];\n"
     << (gated ? "            float lm_u = lm_acc[lm_p + " + std::to_string(P / 2) + "][lm_r];\n" : std::string())
     << (norm ? "            lm_v *= " + f + ";\n" : std::string()) << (norm && gated ? "            lm_u *= " + f + ";\n" : std::string())
     << "            const long long lm_z = lm_row * " << NT << " + lm_j; "
     << (gated ? gated->store("lm_z", "lm_v", "lm_u") : out_store("lm_z", DType::F32)) << "          }\n";
  parts.store = st.str();
  auto out = streamed_kernel(parts, v, dt[1], KC, R * K * 4 + 16 * ((R * 4 + 15) / 16));
  if (out) out->tiles = ceil_div(gated ? gated->half : b->shape[r - 1], Expr(static_cast<int64_t>(CW)));
  return out;
}

std::optional<StreamedLinear> streamed_scaled(const ViewLayer* a, const ViewLayer* b, const ViewLayer* s, const std::vector<DType>& dt,
                                              const std::function<std::string(const std::string&, DType)>& out_store,
                                              const StreamedVariant& v) {
  if (!a || !b || !s || a->shape.size() != 3 || b->shape.size() != 3 || s->shape.size() != 3 || dt.size() < 3 || dt[0] != DType::F32 ||
      (dt[1] != DType::F32 && dt[1] != DType::BF16) || dt[2] != DType::F32)
    return std::nullopt;
  if (!a->shape[0].is_const() || a->shape[0].value() > kMaxListedExperts || !a->strides[2].is_const(1) || !s->strides[2].is_const(0) ||
      !variant_fits(v, false))
    return std::nullopt;
  const long long wb = dtype_size(dt[1]);
  const std::optional<int64_t> kconst = copyable_k(a, b, wb, 1);
  if (!kconst) return std::nullopt;
  const long long K = *kconst, TR = v.tile_rows, P = TR / 8, KC = chunk_of(v, wb, K), NC = (K + KC - 1) / KC;
  StreamedParts parts;
  parts.early = false;  // the experts read are known from the router's scales only
  parts.decl = "  const long long lm_E = " + c(a->shape[0]) + ", lm_m = " + c(a->shape[1]) + ", lm_n = " + c(b->shape[2]) +
               ", lm_kk = " + std::to_string(K) + ";\n  const long long lm_nt = (lm_n + " + std::to_string(TR - 1) + ") / " + std::to_string(TR) + ";\n";
  parts.listing = list_experts(s, "lm_in2") + "  const long long lm_tiles = lm_n > 0 ? (long long)lm_nact * lm_nt : 0;\n";
  parts.chunks = std::to_string(NC);
  // Tile t: rows (t % nt) * TR .. of listed expert t / nt.
  parts.row_at = "    const long long lm_j = lm_t % lm_nt * " + std::to_string(TR) + " + lm_q;\n    return lm_j < lm_n ? (long long)lm_act[lm_t / lm_nt] * " +
                 c(b->strides[0]) + " + lm_j * " + c(b->strides[2]) + " + lm_c * " + std::to_string(KC) + " + " + c(b->offset) + " : -1;\n";
  parts.chunk_k0 = "lm_c * " + std::to_string(KC);
  // The activations straight from memory (an expert's few rows: L1 serves the tile's warps).
  parts.item = "    const long long lm_ex = lm_act[lm_t / lm_nt];\n"
               "    auto lm_xp = [&](int lm_r) {\n"
               "      return (const float*)lm_in0 + " + c(a->offset) + " + lm_ex * " + c(a->strides[0]) + " + lm_row_in(lm_r) * " + c(a->strides[1]) +
               " + lm_c * " + std::to_string(KC) + ";\n    };\n";
  std::ostringstream st;
  st << "          const float lm_sc = ((const float*)lm_in2)[" << c(s->offset) << " + lm_ex * " << c(s->strides[0]) << " + lm_row * "
     << c(s->strides[1]) << "];\n"
     << "          for (int lm_p = 0; lm_p < " << P << "; ++lm_p) {\n"
     << "            const long long lm_j = lm_t % lm_nt * " << TR << " + lm_warp + 8 * lm_p;\n"
     << "            if (lm_j >= lm_n) break;\n"
     << "            const float lm_v = lm_sc * lm_acc[lm_p][lm_r];\n"
     << "            const long long lm_z = (lm_ex * lm_m + lm_row) * lm_n + lm_j; " << out_store("lm_z", DType::F32) << "          }\n";
  parts.store = st.str();
  auto out = streamed_kernel(parts, v, dt[1], KC, 0);
  if (!out) return std::nullopt;
  // Then the outputs of the experts no row chose: zeros.
  out->body += "  for (long long lm_z = (long long)blockIdx.x * blockDim.x + threadIdx.x; lm_z < lm_E * lm_m * lm_n; lm_z += (long long)gridDim.x * blockDim.x)\n"
               "    if (!(lm_on_bits[lm_z / (lm_m * lm_n) >> 5] >> (lm_z / (lm_m * lm_n) & 31) & 1u)) { const float lm_v = 0.0f; " +
               out_store("lm_z", DType::F32) + " }\n";
  // As many tiles as every expert's rows give (the listed ones are known on the device only).
  out->tiles = a->shape[0] * ceil_div(b->shape[2], Expr(static_cast<int64_t>(TR)));
  return out;
}

std::optional<StreamedLinear> streamed_expert_sum(const ViewLayer* a, const ViewLayer* b, const ViewLayer* s, DType w_dtype,
                                                  const std::function<std::string(const std::string&, const std::string&)>& store,
                                                  const StreamedVariant& v) {
  if (!a || !b || !s || a->shape.size() != 3 || b->shape.size() != 3 || s->shape.size() != 3) return std::nullopt;
  if (!a->strides[2].is_const(1) || !s->strides[2].is_const(0) || !a->shape[0].is_const() || a->shape[0].value() > kMaxListedExperts) return std::nullopt;
  if ((w_dtype != DType::F32 && w_dtype != DType::BF16) || !variant_fits(v, false)) return std::nullopt;
  const long long wb = dtype_size(w_dtype);
  const std::optional<int64_t> kconst = copyable_k(a, b, wb, 1);
  if (!kconst) return std::nullopt;
  const long long K = *kconst, TR = v.tile_rows, P = TR / 8, KC = chunk_of(v, wb, K), NC = (K + KC - 1) / KC;
  const std::string kc = std::to_string(KC), nc = std::to_string(NC);
  StreamedParts parts;
  parts.early = false;  // the experts read are known from the router's scales only
  parts.weights = "lm_xb";
  parts.decl = "  const long long lm_E = " + c(a->shape[0]) + ", lm_m = " + c(a->shape[1]) + ", lm_n = " + c(b->shape[2]) + ", lm_kk = " +
               std::to_string(K) + ";\n";
  parts.listing = list_experts(s, "lm_xs") + "  const long long lm_tiles = lm_n > 0 && lm_nact > 0 ? (lm_n + " + std::to_string(TR - 1) + ") / " +
                  std::to_string(TR) + " : 0;\n";
  // A tile's chunks: every listed expert's rows, chunk by chunk (c = expert * NC + chunk).
  parts.chunks = "(long long)lm_nact * " + nc;
  parts.row_at = "    const long long lm_j = lm_t * " + std::to_string(TR) + " + lm_q;\n    return lm_j < lm_n ? (long long)lm_act[lm_c / " + nc + "] * " +
                 c(b->strides[0]) + " + lm_j * " + c(b->strides[2]) + " + lm_c % " + nc + " * " + kc + " + " + c(b->offset) + " : -1;\n";
  parts.chunk_k0 = "lm_c % " + nc + " * " + kc;
  parts.item = "    const long long lm_ex = lm_act[lm_c / " + nc + "];\n"
               "    auto lm_xp = [&](int lm_r) {\n"
               "      return (const float*)lm_xa + " + c(a->offset) + " + lm_ex * " + c(a->strides[0]) + " + lm_row_in(lm_r) * " + c(a->strides[1]) +
               " + lm_c % " + nc + " * " + kc + ";\n    };\n";
  // Each expert's products times its scale for the row, into the tile's sums.
  parts.item_end = "        lm_acc[lm_p][lm_r] = __fmaf_rn(((const float*)lm_xs)[" + c(s->offset) + " + lm_ex * " + c(s->strides[0]) + " + lm_row_in(lm_r) * " +
                   c(s->strides[1]) + "], lm_tmp[lm_p][lm_r], lm_acc[lm_p][lm_r]);\n";
  std::ostringstream st;
  st << "          for (int lm_p = 0; lm_p < " << P << "; ++lm_p) {\n"
     << "            const long long lm_j = lm_t * " << TR << " + lm_warp + 8 * lm_p;\n"
     << "            if (lm_j >= lm_n) break;\n"
     << "            const float lm_v = lm_acc[lm_p][lm_r];\n"
     << "            const long long lm_z = lm_row * lm_n + lm_j;\n"
     << "            " << store("lm_z", "lm_v") << "          }\n";
  parts.store = st.str();
  auto out = streamed_kernel(parts, v, w_dtype, KC, 0);
  if (out) out->tiles = ceil_div(b->shape[2], Expr(static_cast<int64_t>(TR)));
  return out;
}

}  // namespace luminal::cuda::gen
