// An MoE router computed beside the o projection (fold_routers_through_o, cuda_codegen.h).
//
// A decode's router reads rms_norm(h) · g with h = x + W_o · attn. Its logits are
// s · (W_r ⊙ g) · h with s = 1 / sqrt(mean(h²) + eps), so, with A = W_r ⊙ g and M = A · W_o
// (made once from the weights), s · (M · attn + A · x): everything but the scalar s comes
// from what the o projection reads. The o projection's launch takes the unscaled logits in
// blocks of its own, and the routing group, which read the logits anyway, first sums h's
// squares for s. The router's launch and its wait on o are gone.
#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "core/cache_paths.h"

namespace luminal::cuda {

namespace {

// A linear layer's weight read as a row-major [n, k] bf16 input, whole: n and k.
std::optional<std::pair<int64_t, int64_t>> bf16_rows(const Graph& g, const Edge& e) {
  const Node& w = g.node(e.src);
  const ViewLayer* l = gen::plain_strided(e.view);
  if (w.op != OpKind::Input || w.dtype != DType::BF16 || !l || l->shape.size() != 2 || !l->offset.is_const(0)) return std::nullopt;
  const auto k = l->shape[0].as_const(), n = l->shape[1].as_const();
  if (!k || !n || !l->strides[0].is_const(1) || !l->strides[1].is_const(*k) || w.shape.size() != 2) return std::nullopt;
  return std::make_pair(*n, *k);
}

bool whole_in_order(const Graph& g, const Edge& e) {
  return e.view.is_contiguous() && e.view.shape() == g.node(e.src).shape;
}

constexpr int kRowsPerBlock = 2;  // logits a block of the o projection's launch takes

// The end of a logits block: each row's sum over the warps (its lm_t shuffled, then lm_rpart
// in warp order) stored to lm_rl, then the block returns.
std::string logits_sum_and_store(int64_t E) {
  const std::string R = std::to_string(kRowsPerBlock);
  return "      for (int lm_h = 16; lm_h > 0; lm_h >>= 1) lm_t += __shfl_xor_sync(0xffffffffu, lm_t, lm_h);\n"
         "      if ((threadIdx.x & 31) == 0) lm_rpart[threadIdx.x >> 5][lm_r] = lm_t;\n"
         "    }\n    __syncthreads();\n"
         "    if (threadIdx.x < " + R + ") {\n"
         "      const int lm_e = blockIdx.x * " + R + " + threadIdx.x;\n"
         "      float lm_v = 0.0f;\n"
         "      for (int lm_y = 0; lm_y < " + std::to_string(kBlockThreads / 32) + "; ++lm_y) lm_v += lm_rpart[lm_y][threadIdx.x];\n"
         "      if (lm_e < " + std::to_string(E) + ") ((float*)lm_rl)[lm_e] = lm_v;\n"
         "    }\n    return;\n  }\n";
}

// Where a residual GEMV's text (not yet a twin) takes the logits' parameters (before the dims)
// and its one wait begins.
std::optional<std::pair<size_t, size_t>> gemv_points(const std::string& text) {
  if (text.find("lm_res") == std::string::npos || text.find("lm_rl") != std::string::npos) return std::nullopt;
  return dims_and_wait(text);
}

// A row of n f32 values as float4s over a block: how many each thread takes.
int64_t float4s_a_thread(int64_t n) { return (n / 4 + kBlockThreads - 1) / kBlockThreads; }

// A logits block's activations: this thread's float4s of attn (lm_va) and of x (lm_vx).
std::string logits_inputs(int64_t K, int64_t N) {
  const int64_t K4 = float4s_a_thread(K), N4 = float4s_a_thread(N);
  const std::string T = std::to_string(kBlockThreads);
  return "    const float4* lm_ya = (const float4*)lm_in0;\n    const float4* lm_yx = (const float4*)lm_res;\n"
         "    float4 lm_va[" + std::to_string(K4) + "], lm_vx[" + std::to_string(N4) + "];\n"
         "    #pragma unroll\n    for (int lm_u = 0; lm_u < " + std::to_string(K4) + "; ++lm_u) {\n"
         "      const int lm_q = threadIdx.x + lm_u * " + T + ";\n"
         "      lm_va[lm_u] = lm_q < " + std::to_string(K / 4) + " ? lm_ya[lm_q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n    }\n"
         "    #pragma unroll\n    for (int lm_u = 0; lm_u < " + std::to_string(N4) + "; ++lm_u) {\n"
         "      const int lm_q = threadIdx.x + lm_u * " + T + ";\n"
         "      lm_vx[lm_u] = lm_q < " + std::to_string(N / 4) + " ? lm_yx[lm_q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n    }\n";
}

// lm_t plus the products of lm_w's four values and activation float4 `v`, as two lines after `in`.
std::string dot4(const std::string& v, const std::string& in, const std::string& end = "") {
  return in + "lm_t = __fmaf_rn(lm_w.x, " + v + ".x, lm_t); lm_t = __fmaf_rn(lm_w.y, " + v + ".y, lm_t);\n" + in + "lm_t = __fmaf_rn(lm_w.z, " + v +
         ".z, lm_t); lm_t = __fmaf_rn(lm_w.w, " + v + ".w, lm_t);" + end + "\n";
}

// `text` with `branch` (the logits' blocks, `blocks` of them) inserted at `at`, the GEMV's own
// code after it seeing the rest of the grid, and M, A and the logits as parameters before the
// dims (at `params`).
std::string with_branch(const std::string& text, size_t params, size_t at, int64_t blocks, const std::string& branch) {
  const std::string B = std::to_string(blocks);
  // The code before the wait too (a weight preload takes the GEMV's first unit; in the logits'
  // blocks the unsigned index wraps past every unit, so they take none).
  auto renamed = [&](std::string t) {
    t = std::regex_replace(t, std::regex(R"(\bblockIdx\.x\b)"), "(blockIdx.x - " + B + ")");
    return std::regex_replace(t, std::regex(R"(\bgridDim\.x\b)"), "(gridDim.x - " + B + ")");
  };
  std::string out = renamed(text.substr(0, at)) + branch + renamed(text.substr(at));
  out.insert(params, "const char* __restrict__ lm_rm, const char* __restrict__ lm_ra, char* __restrict__ lm_rl, ");
  return out;
}

// `text` (a schedule of the o projection's residual GEMV) with kRowsPerBlock logits a block in
// `blocks` blocks before its own: parameters lm_rm (M, f32 [E, K]), lm_ra (A, f32 [E, N]) and
// lm_rl (the logits, f32 [E]) before the dims; the GEMV's blocks see the rest of the grid.
std::optional<std::string> with_logits_blocks(const std::string& text, const RouterThroughO& f, int64_t blocks) {
  const auto at = gemv_points(text);
  if (!at) return std::nullopt;
  const auto [p, w] = *at;
  const int64_t K = f.attention_width, N = f.hidden, E = f.experts;
  const int64_t K4 = float4s_a_thread(K), N4 = float4s_a_thread(N);
  const std::string B = std::to_string(blocks);
  std::ostringstream s;
  s << "  if (blockIdx.x < " << B << ") {  // the router's logits, unscaled: M · attn + A · x, " << kRowsPerBlock << " a block\n"
    << "    __shared__ float lm_rpart[" << kBlockThreads / 32 << "][" << kRowsPerBlock << "];\n"
    << logits_inputs(K, N)
    << "    #pragma unroll\n    for (int lm_r = 0; lm_r < " << kRowsPerBlock << "; ++lm_r) {\n"
    << "      const int lm_e = blockIdx.x * " << kRowsPerBlock << " + lm_r;\n"
    << "      float lm_t = 0.0f;\n"
    << "      if (lm_e < " << E << ") {\n"
    << "        const float4* lm_wm = (const float4*)lm_rm + (long long)lm_e * " << K / 4 << ";\n"
    << "        const float4* lm_wa = (const float4*)lm_ra + (long long)lm_e * " << N / 4 << ";\n"
    << "        #pragma unroll\n        for (int lm_u = 0; lm_u < " << K4 << "; ++lm_u) {\n"
    << "          const int lm_q = threadIdx.x + lm_u * " << kBlockThreads << ";\n"
    << "          if (lm_q < " << K / 4 << ") { const float4 lm_w = __ldcs(lm_wm + lm_q);\n"
    << dot4("lm_va[lm_u]", "            ", " }") << "        }\n"
    << "        #pragma unroll\n        for (int lm_u = 0; lm_u < " << N4 << "; ++lm_u) {\n"
    << "          const int lm_q = threadIdx.x + lm_u * " << kBlockThreads << ";\n"
    << "          if (lm_q < " << N / 4 << ") { const float4 lm_w = __ldcs(lm_wa + lm_q);\n"
    << dot4("lm_vx[lm_u]", "            ", " }") << "        }\n"
    << "      }\n"
    << logits_sum_and_store(E);
  return with_branch(text, p, w + std::string("  lm_grid_wait();\n").size(), blocks, s.str());  // after the GEMV's wait
}

// with_logits_blocks' form whose logits' blocks load their rows of M and A into registers before
// the wait (weights: no kernel writes them), so that they stream while attention runs (opt-in,
// to measure: LUMINAL_CUDA_ROUTER_EARLY_LOADS=1).
std::optional<std::string> with_early_logits_blocks(const std::string& text, const RouterThroughO& f, int64_t blocks) {
  const auto at = gemv_points(text);
  if (!at) return std::nullopt;
  const auto [p, w] = *at;
  const int64_t K = f.attention_width, N = f.hidden, E = f.experts;
  const int64_t K4 = float4s_a_thread(K), N4 = float4s_a_thread(N);
  const std::string B = std::to_string(blocks), R = std::to_string(kRowsPerBlock);
  const std::string zero = "make_float4(0.0f, 0.0f, 0.0f, 0.0f)";
  // Row r's weights, thread's float4 u: of M (over attn) and of A (over x).
  auto weight = [&](const std::string& of, int64_t n4, const std::string& r, const std::string& u) {
    const std::string q = "(threadIdx.x + " + u + " * " + std::to_string(kBlockThreads) + ")", e = "(blockIdx.x * " + R + " + " + r + ")";
    return "(" + e + " < " + std::to_string(E) + " && " + q + " < " + std::to_string(n4) + " ? __ldcs((const float4*)" + of + " + (long long)" + e +
           " * " + std::to_string(n4) + " + " + q + ") : " + zero + ")";
  };
  std::ostringstream s;
  s << "  if (blockIdx.x < " << B << ") {  // the router's logits, unscaled: M · attn + A · x, " << R << " a block\n"
    << "    __shared__ float lm_rpart[" << kBlockThreads / 32 << "][" << R << "];\n"
    << "    float4 lm_wm[" << R << "][" << K4 << "], lm_wa[" << R << "][" << N4 << "];\n"
    << "    #pragma unroll\n    for (int lm_r = 0; lm_r < " << R << "; ++lm_r) {\n"
    << "      #pragma unroll\n      for (int lm_u = 0; lm_u < " << K4 << "; ++lm_u) lm_wm[lm_r][lm_u] = " << weight("lm_rm", K / 4, "lm_r", "lm_u") << ";\n"
    << "      #pragma unroll\n      for (int lm_u = 0; lm_u < " << N4 << "; ++lm_u) lm_wa[lm_r][lm_u] = " << weight("lm_ra", N / 4, "lm_r", "lm_u") << ";\n"
    << "    }\n"
    << "    lm_grid_wait();\n"
    << logits_inputs(K, N)
    << "    #pragma unroll\n    for (int lm_r = 0; lm_r < " << R << "; ++lm_r) {\n"
    << "      float lm_t = 0.0f;\n"
    << "      #pragma unroll\n      for (int lm_u = 0; lm_u < " << K4 << "; ++lm_u) {\n"
    << "        const float4 lm_w = lm_wm[lm_r][lm_u];\n"
    << dot4("lm_va[lm_u]", "        ") << "      }\n"
    << "      #pragma unroll\n      for (int lm_u = 0; lm_u < " << N4 << "; ++lm_u) {\n"
    << "        const float4 lm_w = lm_wa[lm_r][lm_u];\n"
    << dot4("lm_vx[lm_u]", "        ") << "      }\n"
    << logits_sum_and_store(E);
  return with_branch(text, p, w, blocks, s.str());  // before the GEMV's wait, which they do not reach
}

}  // namespace

std::string router_scaled_logits_code(const RouterThroughO& f, const std::string& logits, const std::string& h, bool through_l2) {
  const int64_t N = f.hidden, E = f.experts;
  const int64_t per = (E + 31) / 32;  // logits a thread holds, for blocks of 32 threads or more
  auto load = [&](const std::string& base, const std::string& at) { return through_l2 ? "__ldcg(" + base + " + " + at + ")" : base + "[" + at + "]"; };
  const int64_t trips = (N / 4 + kBlockThreads - 1) / kBlockThreads;
  const bool exact = (N / 4) % kBlockThreads == 0;
  auto squares = [](const std::string& in) {  // lm_x's squares into lm_q
    return in + "lm_q = __fmaf_rn(lm_x.x, lm_x.x, lm_q); lm_q = __fmaf_rn(lm_x.y, lm_x.y, lm_q);\n" + in +
           "lm_q = __fmaf_rn(lm_x.z, lm_x.z, lm_q); lm_q = __fmaf_rn(lm_x.w, lm_x.w, lm_q);\n";
  };
  std::ostringstream s;
  // The logits are loaded first, so that their trip to L2 overlaps h's (a load does not move
  // past the sum's barriers).
  s << "  __shared__ float lm_rsl[" << E << "];\n"
    << "  {  // the router's logits came unscaled with the o projection: times its norm's 1 / sqrt(mean(h²) + eps)\n"
    << "    float lm_raw[" << per << "];\n"
    << "    #pragma unroll\n    for (int lm_i = 0; lm_i < " << per << "; ++lm_i) {\n"
    << "      const int lm_e = threadIdx.x + lm_i * blockDim.x;\n"
    << "      lm_raw[lm_i] = lm_e < " << E << " ? " << load(logits, "lm_e") << " : 0.0f;\n    }\n"
    << "    const float4* lm_hh = (const float4*)" << h << ";\n"
    << "    float lm_q = 0.0f;\n";
  // In blocks of kBlockThreads, a thread's loads of h in a loop of known trips, all in flight
  // (the loop of runtime bounds issued them a trip at a time: the routing group's scale took
  // 1570 cycles against 1270; benchmarks/cuda/routing_group_bench.cu, H100); the same sums.
  if (gen::one_token_groups())
    s << "    if (blockDim.x == " << kBlockThreads << ") {\n"
      << "      float4 lm_hx[" << trips << "];\n"
      << "      #pragma unroll\n      for (int lm_i = 0; lm_i < " << trips << "; ++lm_i) {\n"
      << "        const int lm_p = threadIdx.x + lm_i * " << kBlockThreads << ";\n"
      << "        lm_hx[lm_i] = " << (exact ? "" : "lm_p >= " + std::to_string(N / 4) + " ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : ") << load("lm_hh", "lm_p")
      << ";\n      }\n"
      << "      #pragma unroll\n      for (int lm_i = 0; lm_i < " << trips << "; ++lm_i) {\n"
      << (exact ? "" : "        if (threadIdx.x + lm_i * " + std::to_string(kBlockThreads) + " >= " + std::to_string(N / 4) + ") break;\n")
      << "        const float4 lm_x = lm_hx[lm_i];\n" << squares("        ") << "      }\n"
      << "    } else {\n";
  s << "    #pragma unroll 4\n"
    << "    for (int lm_p = threadIdx.x; lm_p < " << N / 4 << "; lm_p += blockDim.x) {\n"
    << "      const float4 lm_x = " << load("lm_hh", "lm_p") << ";\n" << squares("      ") << "    }\n"
    << (gen::one_token_groups() ? "    }\n" : "")
    << "    lm_q = lm_block_reduce(lm_q, [](float a, float b) { return a + b; });\n"
    << "    const float lm_sc = 1.0f / sqrtf(lm_q * (1.0f / (float)" << N << ") + " << gen::float_lit(f.eps) << ");\n"
    << "    #pragma unroll\n    for (int lm_i = 0; lm_i < " << per << "; ++lm_i) {\n"
    << "      const int lm_e = threadIdx.x + lm_i * blockDim.x;\n"
    << "      if (lm_e < " << E << ") lm_rsl[lm_e] = lm_raw[lm_i] * lm_sc;\n    }\n"
    << "    __syncthreads();\n  }\n";
  return s.str();
}

namespace {

// `text` (the routing group's function) taking h (lm_rh) before the dims and reading its leaf
// `leaf`, the unscaled logits, times s from shared memory.
std::optional<std::string> with_scaled_logits(const std::string& text, const RouterThroughO& f, size_t leaf) {
  const auto at = dims_and_wait(text);
  if (!at || text.find("lm_rh") != std::string::npos) return std::nullopt;
  const auto [p, w] = *at;
  const std::string wait = "  lm_grid_wait();\n";
  const std::string L = "lm_l" + std::to_string(leaf);
  const std::string code = router_scaled_logits_code(f, "((const float*)" + L + ")", "lm_rh", false) + "  const char* const " + L + "_scaled = (const char*)lm_rsl;\n";
  std::string rest = std::regex_replace(text.substr(w + wait.size()), std::regex("\\b" + L + "\\b"), L + "_scaled");
  std::string out = text.substr(0, w + wait.size()) + code + rest;
  out.insert(p, "const char* __restrict__ lm_rh, ");
  return out;
}

// `text` (a RouterO twin: the o projection's GEMV with the logits' blocks) with the routing
// group `grp` in its last block: every block's work after the wait runs as a lambda, so that
// each of its returns leads to a count of finished blocks, and the last block then reads the
// logits (lm_rl) and h (lm_out, the GEMV's residual sum) through L2 and runs the group, storing
// each member. Parameters before the dims: the members' outputs (lm_go<j>), the group's leaves
// but the logits (lm_gl<l>) and a zeroed counter (lm_gcnt, left zero). nullopt where the text
// or the group is not of the expected form.
std::optional<std::string> with_group_in_last_block(const std::string& text, const SmallGroup& grp, size_t leaf, const RouterThroughO& f,
                                                    const std::vector<std::string>& graph_dims) {
  const auto at = dims_and_wait(text);
  const size_t end = text.rfind('}');
  const std::string wait = "  lm_grid_wait();\n";
  if (!at || end == std::string::npos || end < at->second || text.find("lm_gcnt") != std::string::npos || text.find("lm_rl") == std::string::npos)
    return std::nullopt;
  const auto [p, w] = *at;
  const std::optional<LastBlockGroup> g =
      last_block_group(grp, leaf, "lm_rsx", graph_dims, "the routing group, in the launch's last block",
                       router_scaled_logits_code(f, "(const float*)lm_rl", "lm_out", true) + "  const char* const lm_rsx = (const char*)lm_rsl;\n");
  if (!g) return std::nullopt;
  const size_t from = w + wait.size();
  std::string out = text.substr(0, from) + "  [&]() {  // every block's work: each return leads to the count below\n" + text.substr(from, end - from) +
                    "  }();\n" + g->code + text.substr(end);
  out.insert(p, g->params);
  return out;
}

// M = A · W_o and A = W_r ⊙ g, f32, M's E·K values then A's E·N. A thread takes one column k
// of M for 16 experts: each W_o value is loaded once for the 16 sums, and a warp's threads read
// the same W_r and gain values (one load for all). Each sum runs over j in order.
std::string prep_text(const std::string& name, const RouterThroughO& f) {
  const int64_t K = f.attention_width, N = f.hidden, E = f.experts, C = 16, chunks = (E + C - 1) / C;
  const std::string gain = f.gain_bf16 ? "lm_bf16_f32(((const uint16_t*)lm_in1)[lm_j])" : "((const float*)lm_in1)[lm_j]";
  std::ostringstream s;
  s << "\nextern \"C\" __global__ void __launch_bounds__(" << kBlockThreads << ") " << name
    << "(char* __restrict__ lm_out, const char* __restrict__ lm_in0, const char* __restrict__ lm_in1, const char* __restrict__ lm_in2, "
       "const long long* __restrict__ lm_dims) {\n"
    << "  const uint16_t* lm_wr = (const uint16_t*)lm_in0;  // W_r [E, N]\n"
    << "  const uint16_t* lm_wo = (const uint16_t*)lm_in2;  // W_o [N, K]\n"
    << "  float* lm_o = (float*)lm_out;\n"
    << "  for (long long lm_z = (long long)blockIdx.x * blockDim.x + threadIdx.x; lm_z < " << chunks * K + E * N
    << "LL; lm_z += (long long)gridDim.x * blockDim.x) {\n"
    << "    if (lm_z < " << chunks * K << "LL) {\n"
    << "      const long long lm_e0 = lm_z / " << K << " * " << C << ", lm_k = lm_z % " << K << ";\n"
    << "      float lm_t[" << C << "] = {};\n"
    << "      for (long long lm_j = 0; lm_j < " << N << "; ++lm_j) {\n"
    << "        const float lm_w = lm_bf16_f32(lm_wo[lm_j * " << K << " + lm_k]), lm_g = " << gain << ";\n"
    << "        #pragma unroll\n"
    << "        for (int lm_c = 0; lm_c < " << C << "; ++lm_c)\n"
    << "          if (lm_e0 + lm_c < " << E << ") lm_t[lm_c] = __fmaf_rn(lm_bf16_f32(lm_wr[(lm_e0 + lm_c) * " << N << " + lm_j]) * lm_g, lm_w, lm_t[lm_c]);\n"
    << "      }\n"
    << "      #pragma unroll\n"
    << "      for (int lm_c = 0; lm_c < " << C << "; ++lm_c)\n"
    << "        if (lm_e0 + lm_c < " << E << ") lm_o[(lm_e0 + lm_c) * " << K << " + lm_k] = lm_t[lm_c];\n"
    << "    } else {\n"
    << "      const long long lm_a = lm_z - " << chunks * K << "LL, lm_e = lm_a / " << N << ", lm_j = lm_a % " << N << ";\n"
    << "      lm_o[" << E * K << "LL + lm_a] = lm_bf16_f32(lm_wr[lm_e * " << N << " + lm_j]) * " << gain << ";\n"
    << "    }\n  }\n}\n";
  return s.str();
}

}  // namespace

void fold_routers_through_o(const Graph& plan, std::vector<SmallGroup>& groups, std::vector<std::optional<NodeKernels>>& per_node,
                            FunctionSet& functions, const std::vector<std::string>& graph_dims, bool group_in_last_block) {
  std::vector<std::vector<NodeId>> readers(plan.size());
  for (NodeId id = 0; id < plan.size(); ++id)
    for (const Edge& e : plan.node(id).inputs) readers[e.src].push_back(id);
  for (SmallGroup& grp : groups) {
    if (grp.counter || grp.body.empty() || grp.fold_reader || grp.tail_producer) continue;
    const std::optional<size_t> leaf = only_computed_leaf(plan, grp);  // the router
    if (!leaf) continue;
    const std::set<NodeId> members(grp.nodes.begin(), grp.nodes.end());
    RouterThroughO f;
    f.router = grp.leaves[*leaf];
    const Node& r = plan.node(f.router);
    if (r.op != OpKind::Kernel || r.kernel != "Matmul" || r.dtype != DType::F32 || r.inputs.size() != 2 || r.shape.size() != 2) continue;
    if (std::any_of(readers[f.router].begin(), readers[f.router].end(), [&](NodeId m) { return !members.count(m); })) continue;
    const auto wr = bf16_rows(plan, r.inputs[1]);
    // The norm: RMSNormMul over h's last axis, read whole, with a gain broadcast over the rows.
    f.norm = r.inputs[0].src;
    const Node& nn = plan.node(f.norm);
    const std::optional<gen::FoldedNorm> norm = gen::norm_prologue_of(plan, r);
    if (!wr || !norm || nn.kernel != "RMSNormMul" || !norm->prologue.gain || !norm->prologue.gain_offset.is_const(0) ||
        (norm->prologue.gain_dtype != DType::BF16 && norm->prologue.gain_dtype != DType::F32) || !whole_in_order(plan, nn.inputs[0]))
      continue;
    f.experts = wr->first;
    f.hidden = wr->second;
    f.eps = norm->prologue.eps;
    f.gain_bf16 = norm->prologue.gain_dtype == DType::BF16;
    f.gain = nn.inputs[1].src;
    if (plan.node(f.gain).op != OpKind::Input || !(plan.node(f.gain).shape == std::vector<Expr>{Expr(f.hidden)})) continue;
    // h = x + o, both read whole, o a linear layer on a bf16 [N, K] weight with a residual GEMV.
    f.sum = nn.inputs[0].src;
    const Node& h = plan.node(f.sum);
    if (h.op != OpKind::Add || h.dtype != DType::F32 || h.shape.size() != 2 || !h.shape[1].is_const(f.hidden)) continue;
    if (!whole_in_order(plan, h.inputs[0]) || !whole_in_order(plan, h.inputs[1])) continue;
    std::optional<NodeId> o;
    for (const Edge& e : h.inputs) {
      const Node& m = plan.node(e.src);
      if (m.op == OpKind::Kernel && m.kernel == "Matmul" && readers[e.src].size() == 1 && per_node[e.src] && per_node[e.src]->linear) o = e.src;
    }
    if (!o || h.inputs[0].src == h.inputs[1].src) continue;
    f.o = *o;
    const Node& on = plan.node(f.o);
    const auto wo = bf16_rows(plan, on.inputs[1]);
    if (!wo || wo->first != f.hidden || wo->second % 4 != 0 || f.hidden % 4 != 0) continue;
    f.attention_width = wo->second;
    f.router_weight = r.inputs[1].src;
    f.o_weight = on.inputs[1].src;
    NodeKernels& ok_ = *per_node[f.o];
    if (ok_.launches.empty() || !ok_.launches.back().residual_in) continue;
    // The twin: the GEMV's last launch and its alternatives, each with the logits' blocks.
    const int64_t blocks = (f.experts + kRowsPerBlock - 1) / kRowsPerBlock;
    // LUMINAL_CUDA_ROUTER_EARLY_LOADS=1: the logits' weights loaded before the wait (to measure).
    static const bool early = gen::env_switch_set("LUMINAL_CUDA_ROUTER_EARLY_LOADS");
    // Every function is made before any is added: a fold that fails leaves none to compile.
    // With `tail`, each also runs the routing group in its last block (the group's own function
    // stays, for the runs that launch it); where any text does not take it, none does.
    std::vector<std::pair<std::string, std::string>> made;
    std::shared_ptr<NodeKernels> twin;
    auto twins = [&](bool tail) {
      made.clear();
      twin = std::make_shared<NodeKernels>();
      twin->linear = ok_.linear;
      auto make = [&](const Launch& l) -> std::optional<Launch> {
        const std::string* text = functions.find(l.function);
        if (!text || !l.residual_in) return std::nullopt;
        std::optional<std::string> t = early ? with_early_logits_blocks(*text, f, blocks) : with_logits_blocks(*text, f, blocks);
        if (t && tail) t = with_group_in_last_block(*t, grp, *leaf, f, graph_dims);
        const auto named = renamed_twin(l.function, t, tail ? "lm_RouterOGroup_" : "lm_RouterO_");
        if (!named) return std::nullopt;
        made.push_back(*named);
        Launch twin_launch = l;
        twin_launch.function = named->first;
        twin_launch.extra_blocks = blocks;
        return twin_launch;
      };
      bool all = true;
      if (const auto t = make(ok_.launches.back())) twin->launches.push_back(*t); else all = false;
      for (const Launch& l : ok_.alternatives)
        if (const auto t = make(l)) twin->alternatives.push_back(*t); else all = false;
      return all;
    };
    f.group_in_last_block = group_in_last_block && twins(true);
    const bool all = f.group_in_last_block || twins(false);
    const std::string* group_text = functions.find(grp.launch.function);
    const auto group_twin = group_text ? renamed_twin(grp.launch.function, with_scaled_logits(*group_text, f, *leaf), "lm_RoutedGroup_") : std::nullopt;
    if (!all || !group_twin) continue;
    made.push_back(*group_twin);
    f.group_function = group_twin->first;
    f.prep_function = "lm_RouterOPrep_" + hash_key(prep_text("lm_RouterOPrep_", f));
    made.emplace_back(f.prep_function, prep_text(f.prep_function, f));
    for (const auto& [name, text] : made) functions.add(name, text);
    ok_.router_logits = twin;
    grp.router_through_o = f;
  }
}

}  // namespace luminal::cuda
