// Small nodes of one token computed by one block in one launch (see small_groups).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/cpu/fused_codegen.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cuda/cuda_top_ranks.h"
#include "core/cache_paths.h"
#include "core/error.h"

namespace luminal::cuda {

namespace {

using namespace luminal::cpu::codegen;
using cpu::emit_program;
using namespace gen;

// The product of a shape's dims after the first, where they are all constants.
std::optional<int64_t> per_token(const std::vector<Expr>& shape) {
  int64_t p = 1;
  for (size_t d = 1; d < shape.size(); ++d) {
    const std::optional<int64_t> v = shape[d].as_const();
    if (!v) return std::nullopt;
    p *= *v;
  }
  return p;
}

// A block's share of a split member's work (values evaluated, 4 a thread).
constexpr int64_t kSmallGroupBlockWork = 1024;

bool is_reduction(const Node& n) {
  return n.op == OpKind::SumReduce || n.op == OpKind::MaxReduce || (n.op == OpKind::Kernel && (n.kernel == "FusedSum" || n.kernel == "FusedMax"));
}

// A linear layer a group may hold (an MoE's router, whose logits only the routing reads):
// Matmul [m, k] · [k, n] of f32 activations with unit stride along k, or the whole value of an
// RMS norm it folds in as the normed GEMVs do (gen::norm_prologue_of), and f32 or bf16 weights
// with unit stride along k in 16-byte aligned rows; n and k constants, x for one token fits a
// block's shared memory. The blocks share its n rows, a warp a row.
constexpr int64_t kSmallGroupMaxLinearK = 8192;
struct GroupLinear {
  ViewLayer a, b;
  std::optional<FoldedNorm> norm;
  NodeId a_src = 0, gain_src = 0, b_src = 0;
  int64_t n = 0, k = 0;
  DType b_dtype = DType::F32;
  // The values the member reads from outside (the norm's x and gain where folded, not the norm).
  std::vector<NodeId> reads() const {
    std::vector<NodeId> r{a_src};
    if (norm && norm->prologue.gain) r.push_back(gain_src);
    r.push_back(b_src);
    return r;
  }
};

std::optional<GroupLinear> group_linear(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op != OpKind::Kernel || n.kernel != "Matmul" || n.dtype != DType::F32 || n.shape.size() != 2 || n.inputs.size() != 2) return std::nullopt;
  GroupLinear l;
  if ((l.norm = norm_prologue_of(g, n))) {
    l.a = l.norm->x;
    l.a_src = g.node(n.inputs[0].src).inputs[0].src;
    if (l.norm->prologue.gain) l.gain_src = g.node(n.inputs[0].src).inputs[1].src;
  } else {
    const ViewLayer* a = plain_strided(n.inputs[0].view);
    if (!a || g.node(n.inputs[0].src).dtype != DType::F32) return std::nullopt;
    l.a = *a;
    l.a_src = n.inputs[0].src;
  }
  const ViewLayer* b = plain_strided(n.inputs[1].view);
  if (!b || b->shape.size() != 2 || l.a.shape.size() != 2 || !l.a.strides[1].is_const(1) || !b->strides[0].is_const(1)) return std::nullopt;
  l.b = *b;
  l.b_src = n.inputs[1].src;
  l.b_dtype = g.node(l.b_src).dtype;
  const std::optional<int64_t> k = l.a.shape[1].as_const(), nn = b->shape[1].as_const();
  if (!k || !nn || !(b->shape[0] == l.a.shape[1]) || *k < 1 || *k > kSmallGroupMaxLinearK || *nn < 1 || *nn > kSmallGroupMaxValues) return std::nullopt;
  const int per = l.b_dtype == DType::BF16 ? 8 : 4;  // weight values a 16-byte load
  if ((l.b_dtype != DType::BF16 && l.b_dtype != DType::F32) || *k % per != 0 || !multiple_of(b->offset, per) ||
      !multiple_of(b->strides[1], per))
    return std::nullopt;
  l.n = *nn;
  l.k = *k;
  return l;
}

// Whether node `id` may be a member: f32, an elementwise fused program, a reduction over the
// last axis of its input, a softmax over its last axis (with few values a token), or, with
// `linear_members` (CodegenOptions::router_in_group), a linear layer as above (small_groups keeps
// it where a member softmax is its one reader).
bool small_member(const Graph& g, NodeId id, bool linear_members) {
  const Node& n = g.node(id);
  if (n.dtype != DType::F32 || n.shape.empty() || n.inputs.empty()) return false;
  if (linear_members && group_linear(g, id)) return true;
  const bool fused = n.op == OpKind::Kernel && n.kernel == "Fused";
  const bool softmax = n.op == OpKind::Kernel && n.kernel == "Softmax" && n.axis == n.shape.size() - 1;
  const bool reduction = is_reduction(n) && n.axis + 1 == n.inputs[0].view.shape().size();
  if (!fused && !softmax && !reduction) return false;
  const std::optional<int64_t> values = per_token(n.shape);
  if (!values || *values > kSmallGroupMaxValues || *values < 1) return false;
  if (reduction) {
    const std::optional<int64_t> in = per_token(n.inputs[0].view.shape());
    if (!in || *in > kSmallGroupMaxInputs || n.inputs[0].view.shape().size() < 2) return false;
  }
  return true;
}

// Leaves a group must not read: kinds whose values the executor may leave unmade (a norm its
// GEMVs fold in, expert products their sum computes, a softmax its reader computes).
bool deferrable(const Node& n) {
  return n.op == OpKind::Kernel && (n.kernel == "RMSNorm" || n.kernel == "RMSNormMul" || n.kernel == "ScaledMatmul" || n.kernel == "Softmax");
}

// Values a member computes from their index instead of loading them from a buffer: an Iota, a
// constant, and integer-cheap elementwise nodes over such values through unmasked views, a few
// deep. The routing's tie-break mask (e' < e, two Iotas compared) is one: loaded, it put a trip
// to L2 inside the ranks' loop. CodegenOptions::index_values_in_groups.
constexpr int kIndexValueDepth = 4;
bool index_value(const Graph& g, NodeId id, int depth = 0) {
  const Node& n = g.node(id);
  if (n.op == OpKind::Iota || n.op == OpKind::Constant) return true;
  const bool cheap = n.op == OpKind::Cast || n.op == OpKind::Add || n.op == OpKind::Mul || n.op == OpKind::Mod || n.op == OpKind::LessThan;
  if (!cheap || depth >= kIndexValueDepth || n.inputs.empty()) return false;
  return std::all_of(n.inputs.begin(), n.inputs.end(),
                     [&](const Edge& e) { return e.view.flat_index().valid.is_const(1) && index_value(g, e.src, depth + 1); });
}

// The dims an index value's expressions name (its nodes' and their views').
void index_value_dims(const Graph& g, NodeId id, std::set<std::string>& dims) {
  const Node& n = g.node(id);
  for (const std::string& d : node_dims(n)) dims.insert(d);
  for (const Edge& e : n.inputs) index_value_dims(g, e.src, dims);
}

// The values a member evaluates for one token: its outputs, a reduction's inputs, a softmax's
// three passes.
int64_t work_of(const Node& n) {
  if (n.kernel == "Matmul") return *per_token(n.shape) * *n.inputs[1].view.shape()[0].as_const();
  if (is_reduction(n)) return *per_token(n.inputs[0].view.shape());
  return *per_token(n.shape) * (n.kernel == "Softmax" ? 3 : 1);
}

// A member's rows for one token: the values it stores, or a reduction's (its outputs).
int64_t rows_of_member(const Node& n) {
  return n.kernel == "Softmax" ? *per_token(n.shape) / n.shape.back().as_const().value_or(1) : *per_token(n.shape);
}

// LUMINAL_CUDA_SMALL_GROUP_RELEASE=0: the split member's blocks counted with a fence in every
// thread, as before session 36 (last_block_count).
bool count_by_release() {
  static const bool release = gen::env_switch_on("LUMINAL_CUDA_SMALL_GROUP_RELEASE");
  return release;
}

class GroupWriter {
 public:
  // `split`: the members whose rows the blocks share, in order (none: one block).
  // `top_ranks`: counts recognised as top-k ranks (cuda_top_ranks.h) run as k rounds in a warp.
  GroupWriter(const Graph& g, const SmallGroup& grp, std::vector<size_t> split, bool top_ranks)
      : g_(g), grp_(grp), split_(std::move(split)), top_ranks_(top_ranks) {
    for (size_t j = 0; j < grp.nodes.size(); ++j) member_[grp.nodes[j]] = j;
    for (size_t l = 0; l < grp.leaves.size(); ++l) leaf_[grp.leaves[l]] = l;
  }

  // Members before the first split one run in every block (block 0 stores them); a split one's
  // rows are shared out; after each split member but the last the blocks meet at a grid barrier
  // (they are few and all resident: the group releases its dependents only once every block
  // has started) and read its values back from its buffer, and the members up to the next split
  // one run in every block again; after the last, the last block to finish (a counter, left
  // zero) reads its values back and runs the rest alone. Counters: lm_cnt[0] the last block's,
  // lm_cnt[1..2] the barrier's.
  std::optional<std::string> body() {
    std::ostringstream s;
    for (size_t j = 0; j < grp_.nodes.size(); ++j) {
      std::optional<std::string> m = member(j);
      if (!m) return std::nullopt;
      s << "  {  // " << node_label(grp_.nodes[j]) << "\n" << *m << "  }\n  __syncthreads();\n";
      if (!is_split(j)) continue;
      const std::string J = std::to_string(j);
      s << "  {\n";
      if (j == split_.back())
        s << "    __shared__ int lm_last;\n" << last_block_count("(unsigned*)lm_cnt", "gridDim.x - 1", count_by_release());
      else
        s << grid_barrier("((unsigned*)lm_cnt + 1)");
      s << "    const long long lm_n = " << c(product_of(g_.node(grp_.nodes[j]).shape, 0, g_.node(grp_.nodes[j]).shape.size())) << ";\n"
        << "    for (long long lm_z = threadIdx.x; lm_z < lm_n; lm_z += blockDim.x) lm_s" << J << "[lm_z] = __ldcg((const float*)lm_o" << J
        << " + lm_z);\n  }\n  __syncthreads();\n";
    }
    return s.str();
  }

 private:
  const Graph& g_;
  const SmallGroup& grp_;
  std::vector<size_t> split_;
  bool top_ranks_;
  std::map<NodeId, size_t> member_, leaf_;

  bool is_split(size_t j) const { return std::find(split_.begin(), split_.end(), j) != split_.end(); }
  // Whether every block runs member j (then block 0 alone stores it): before the last split one.
  bool every_block(size_t j) const { return !is_split(j) && (split_.empty() || j < split_.back()); }

  // (No node id: identical layers' groups then have one text, one function to compile.)
  std::string node_label(NodeId id) const {
    const Node& n = g_.node(id);
    return n.kernel.empty() ? std::string(op_name(n.op)) : n.kernel;
  }

  // lm_ld<i>(flat index of the input's view): a member's value from shared memory, a leaf's from
  // its buffer, the view's pad value where its mask hides the element.
  std::string loaders(const Node& n) const {
    std::ostringstream s;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const View& v = n.inputs[i].view;
      const IndexExprs ix = v.flat_index();
      const NodeId src = n.inputs[i].src;
      const DType t = g_.node(src).dtype;
      s << "    auto lm_ld" << i << " = [&](long long lm_q) -> " << value_type(t) << " {\n";
      if (!ix.valid.is_const(1)) s << "      if (!" << c(ix.valid) << ") return " << value_lit(v.pad_value(), t) << ";\n";
      if (auto m = member_.find(src); m != member_.end())
        s << "      return lm_s" << m->second << "[" << c(ix.index) << "];\n    };\n";
      else if (leaf_.count(src))
        s << "      return " << load(t, "((const " + std::string(storage_type(t)) + "*)lm_l" + std::to_string(leaf_.at(src)) + ")[" + c(ix.index) + "]")
          << ";\n    };\n";
      else  // an index value (index_value): no buffer
        s << "      return lm_iv" << src << "(" << c(ix.index) << ");\n    };\n";
    }
    return s.str();
  }

  // lm_iv<id>(flat index): index value `id` computed (index_value), after the lambdas of its
  // inputs; `done`: the ones already written in this scope. False where the emitter has no form
  // for an op.
  bool index_value_lambdas(NodeId id, std::set<NodeId>& done, std::ostream& s) const {
    if (!done.insert(id).second) return true;
    const Node& n = g_.node(id);
    for (const Edge& e : n.inputs)
      if (!index_value_lambdas(e.src, done, s)) return false;
    s << "    auto lm_iv" << id << " = [&](long long lm_q) -> " << value_type(n.dtype) << " {\n";
    if (n.op == OpKind::Iota) {
      s << "      return (int32_t)(" << n.iota_expr.to_c("lm_q") << ");\n";
    } else if (n.op == OpKind::Constant) {
      s << "      return " << float_lit(n.constant) << ";\n";
    } else {
      std::vector<DType> dt;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        dt.push_back(g_.node(n.inputs[i].src).dtype);
        s << "      const " << value_type(dt.back()) << " x" << i << " = lm_iv" << n.inputs[i].src << "(" << c(n.inputs[i].view.flat_index().index)
          << ");\n";
      }
      const FusedProgram p = single(n.op, n.dtype, dt[0], static_cast<int>(n.inputs.size()));
      if (!emit_program(s, p, [](int k) { return "x" + std::to_string(k); }, dt, "v", "      ")) return false;
      s << "      return v0;\n";
    }
    s << "    };\n";
    return true;
  }

  // Stores value `v` (of dtype `from`) of member j at flat index `at`: to shared memory and to
  // its buffer (from block 0 alone where every block computes it).
  std::string put(size_t j, const std::string& at, const std::string& v, DType from) const {
    const std::string J = std::to_string(j);
    return "{ const float lm_v = " + convert(v, from, DType::F32) + "; lm_s" + J + "[" + at + "] = lm_v; " + (every_block(j) ? "if (blockIdx.x == 0) " : "") +
           "((float*)lm_o" + J + ")[" + at + "] = lm_v; }\n";
  }

  // Rows of `len` values, `lm_tpr` adjacent lanes a row (as many as the block's threads allow
  // up to a warp), the block's share of them where member j is split: the loop over rows is the
  // same for every thread of a block, so the shuffles are too.
  std::string row_loop_opening(size_t j, const Expr& rows, const Expr& len) const {
    std::ostringstream s;
    s << "    const long long lm_rows = " << c(rows) << ", lm_len = " << c(len) << ";\n";
    if (is_split(j))
      s << "    const long long lm_share = (lm_rows + gridDim.x - 1) / gridDim.x, lm_first = blockIdx.x * lm_share,"
        << " lm_end = lm_first + lm_share < lm_rows ? lm_first + lm_share : lm_rows;\n";
    else
      s << "    const long long lm_share = lm_rows, lm_first = 0, lm_end = lm_rows;\n";
    s << "    int lm_tpr = 32;\n"
      << "    while (lm_tpr > 1 && (long long)(blockDim.x / lm_tpr) < lm_share) lm_tpr >>= 1;\n"
      << "    for (long long lm_r0 = lm_first; lm_r0 < lm_end; lm_r0 += blockDim.x / lm_tpr) {\n"
      << "      const long long lm_row = lm_r0 + threadIdx.x / lm_tpr;\n"
      << "      const bool lm_live = lm_row < lm_end;\n";
    return s.str();
  }
  // A member's rows for one token, known when it is not split: the executor runs a group only
  // where every member's first dim is 1 (runs_small_group), so with `token` (that dim) bound to
  // 1, `rows` and `len` are constants. Then `lm_tpr` is too (chosen for blocks of kBlockThreads,
  // right for any block of whole warps), and a lane's values of a row are `trips` at most, in
  // loops that unroll: their loads in flight together where the runtime bounds loaded one value
  // a trip (the routing group's softmax took 1580 cycles against 790, its four members 2.6 us
  // against 2.0; benchmarks/cuda/routing_group_bench.cu, H100).
  struct OneTokenRows {
    int64_t rows = 0, len = 0, tpr = 32, trips = 0;
  };
  static constexpr int64_t kMaxUnrolledTrips = 16;
  std::optional<OneTokenRows> one_token_rows(size_t j, const Expr& token, const Expr& rows, const Expr& len) const {
    if (is_split(j) || !gen::one_token_groups()) return std::nullopt;
    DimMap dims;
    if (token.kind() == ExprKind::Var) dims[token.name()] = 1;
    else if (!token.is_const(1)) return std::nullopt;
    OneTokenRows r;
    try {
      r.rows = rows.eval(dims);
      r.len = len.eval(dims);
    } catch (const Error&) {  // another dim: not known here
      return std::nullopt;
    }
    if (r.rows < 1 || r.len < 1) return std::nullopt;
    while (r.tpr > 1 && kBlockThreads / r.tpr < r.rows) r.tpr >>= 1;
    r.trips = (r.len + r.tpr - 1) / r.tpr;
    if (r.trips > kMaxUnrolledTrips) return std::nullopt;
    return r;
  }
  static std::string one_token_opening(const OneTokenRows& r) {
    std::ostringstream s;
    s << "    const long long lm_rows = " << r.rows << ", lm_len = " << r.len << ";  // one token\n"
      << "    constexpr int lm_tpr = " << r.tpr << ";\n"
      << "    for (long long lm_r0 = 0; lm_r0 < lm_rows; lm_r0 += blockDim.x / lm_tpr) {\n"
      << "      const long long lm_row = lm_r0 + threadIdx.x / lm_tpr;\n"
      << "      const bool lm_live = lm_row < lm_rows;\n";
    return s.str();
  }
  // A loop over a lane's values of its row (lm_i, lm_k), unrolled; `body` runs where lm_k is in
  // the row (always, where the lanes cover it exactly).
  static std::string one_token_values(const OneTokenRows& r, const std::string& indent, const std::string& body) {
    const bool exact = r.len % r.tpr == 0;
    return indent + "#pragma unroll\n" + indent + "for (int lm_i = 0; lm_i < " + std::to_string(r.trips) + "; ++lm_i) {\n" + indent +
           "  const long long lm_k = threadIdx.x % lm_tpr + lm_i * lm_tpr;\n" + indent + "  " + (exact ? "" : "if (lm_k < lm_len) ") + "{\n" + body +
           indent + "  }\n" + indent + "}\n";
  }
  static std::string lanes_combine(const std::string& var, const std::string& combine) {
    return "      for (int lm_x = lm_tpr >> 1; lm_x > 0; lm_x >>= 1) " + var + " = (" + combine + ")(" + var + ", __shfl_xor_sync(0xffffffffu, " +
           var + ", lm_x));\n";
  }

  // A linear member (GroupLinear): every block stages x (normed, times the gain, where the norm
  // is folded) in shared memory, then each warp takes a row of its block's share (all of them
  // where not split), its lanes' 16-byte weight loads all in flight, and sums by shuffles.
  std::string linear_member(size_t j, const GroupLinear& l) const {
    const Node& n = g_.node(grp_.nodes[j]);
    const std::string J = std::to_string(j), K = std::to_string(l.k), X = "lm_x" + J;
    const bool bf16 = l.b_dtype == DType::BF16, gain = l.norm && l.norm->prologue.gain;
    const int per = bf16 ? 8 : 4;
    const int64_t chunks = (l.k + 32 * per - 1) / (32 * per);
    const bool whole = l.k % (32 * per) == 0;
    std::ostringstream s;
    s << "    __shared__ __align__(16) float " << X << "[" << l.k << "];\n"
      << "    if (" << c(n.shape[0]) << " != 1) __trap();  // the executor runs groups for one token\n"
      << "    const long long lm_rows = " << l.n << ";\n";
    if (is_split(j))
      s << "    const long long lm_share = (lm_rows + gridDim.x - 1) / gridDim.x, lm_first = blockIdx.x * lm_share,"
        << " lm_end = lm_first + lm_share < lm_rows ? lm_first + lm_share : lm_rows;\n";
    else
      s << "    const long long lm_first = 0, lm_end = lm_rows;\n";
    // x (and the gain) a thread's values at once, all loads in flight: one trip to L2, not one
    // a value. Groups run blocks of kBlockThreads.
    const int64_t xs = (l.k + kBlockThreads - 1) / kBlockThreads;
    const std::string XS = std::to_string(xs), BT = std::to_string(kBlockThreads);
    s << "    float lm_q = 0.0f, lm_xr[" << XS << "], lm_gr[" << XS << "];\n"
      << "    #pragma unroll\n"
      << "    for (int lm_i = 0; lm_i < " << XS << "; ++lm_i) {\n"
      << "      const int lm_k = threadIdx.x + lm_i * " << BT << ";\n"
      << "      lm_xr[lm_i] = lm_k < " << K << " ? ((const float*)lm_l" << leaf_.at(l.a_src) << ")[" << c(l.a.offset) << " + lm_k] : 0.0f;\n";
    if (gain) {
      const std::string gp = "lm_l" + std::to_string(leaf_.at(l.gain_src)), at = c(l.norm->prologue.gain_offset) + " + lm_k";
      s << "      lm_gr[lm_i] = lm_k < " << K << " ? "
        << (l.norm->prologue.gain_dtype == DType::BF16 ? "lm_bf16_f32(((const uint16_t*)" + gp + ")[" + at + "])" : "((const float*)" + gp + ")[" + at + "]")
        << " : 0.0f;\n";
    }
    s << "    }\n"
      << "    #pragma unroll\n"
      << "    for (int lm_i = 0; lm_i < " << XS << "; ++lm_i) {\n"
      << "      const int lm_k = threadIdx.x + lm_i * " << BT << ";\n"
      << "      if (lm_k < " << K << ") {\n";
    if (l.norm) s << "        lm_q = __fmaf_rn(lm_xr[lm_i], lm_xr[lm_i], lm_q);\n";
    s << "        " << X << "[lm_k] = lm_xr[lm_i]" << (gain ? " * lm_gr[lm_i]" : "") << ";\n      }\n    }\n";
    // As the normed GEMVs: the sums times 1 / sqrt(mean(x²) + eps).
    if (l.norm)
      s << "    lm_q = lm_block_reduce(lm_q, [](float a, float b) { return a + b; });\n"
        << "    const float lm_f = 1.0f / sqrtf(lm_q * (1.0f / (float)" << K << ") + " << float_lit(l.norm->prologue.eps) << ");\n";
    s << "    __syncthreads();\n"
      << "    const int lm_lane = threadIdx.x & 31;\n"
      << "    for (long long lm_row = lm_first + (threadIdx.x >> 5); lm_row < lm_end; lm_row += blockDim.x >> 5) {\n"
      << "      const " << (bf16 ? "uint16_t" : "float") << "* lm_W = (const " << (bf16 ? "uint16_t" : "float") << "*)lm_l"
      << leaf_.at(l.b_src) << " + " << c(l.b.offset) << " + lm_row * " << c(l.b.strides[1]) << ";\n"
      << "      uint4 lm_wv[" << chunks << "];\n"
      << "      #pragma unroll\n"
      << "      for (int lm_c = 0; lm_c < " << chunks << "; ++lm_c) {\n"
      << "        const int lm_k = lm_lane * " << per << " + lm_c * " << 32 * per << ";\n";
    // Unguarded where the lanes cover k exactly: NVRTC then issues every load before the first
    // product (guarded, it spread them over the products, a round trip to memory each).
    if (whole)
      s << "        lm_wv[lm_c] = __ldg((const uint4*)(lm_W + lm_k));\n";
    else
      s << "        lm_wv[lm_c] = lm_k < " << K << " ? __ldg((const uint4*)(lm_W + lm_k)) : make_uint4(0, 0, 0, 0);\n";
    s << "      }\n"
      << "      float lm_acc = 0.0f;\n"
      << "      #pragma unroll\n"
      << "      for (int lm_c = 0; lm_c < " << chunks << "; ++lm_c) {\n"
      << "        const int lm_k = lm_lane * " << per << " + lm_c * " << 32 * per << ";\n"
      << "        if (" << (whole ? "true" : "lm_k < " + K) << ") {\n";
    if (bf16)
      s << "          lm_acc = lm_dot8(lm_wv[lm_c], *(const float4*)(" << X << " + lm_k), *(const float4*)(" << X << " + lm_k + 4), lm_acc);\n";
    else
      s << "          const float4 lm_a = *(const float4*)(" << X << " + lm_k);\n"
        << "          lm_acc = __fmaf_rn(lm_a.x, __uint_as_float(lm_wv[lm_c].x), lm_acc);\n"
        << "          lm_acc = __fmaf_rn(lm_a.y, __uint_as_float(lm_wv[lm_c].y), lm_acc);\n"
        << "          lm_acc = __fmaf_rn(lm_a.z, __uint_as_float(lm_wv[lm_c].z), lm_acc);\n"
        << "          lm_acc = __fmaf_rn(lm_a.w, __uint_as_float(lm_wv[lm_c].w), lm_acc);\n";
    s << "        }\n      }\n"
      << "      for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
      << "      if (lm_lane == 0) " << put(j, "lm_row", l.norm ? "lm_acc * lm_f" : "lm_acc", DType::F32) << "    }\n";
    return s.str();
  }

  // Top-k ranks (cuda_top_ranks.h) after the loaders in `head`: warp 0 holds the values, lane l
  // those at l + 32 i, as order-preserving keys (-0 as +0, so that the two tie; 0 for none).
  // Each of k rounds takes the first value left in top-k order, the largest key (redux.sync)
  // at its lowest index (a second), whose rank is the round: two reductions a round where
  // butterfly shuffles of (value, index) pairs took ten dependent steps (on the H100 that group
  // added 5.3 us a layer against the 16-block count's 4.4). A NaN is never taken and ranks 0
  // (nothing comes before it); the rest rank k, which the epilogue maps as every count from k on.
  std::optional<std::string> top_ranks_member(size_t j, const Node& n, const TopRanks& tr, const std::string& head) const {
    size_t pos = 0;
    const DType t = FusedProgram::decode(n.code, pos).instrs.back().dtype;
    const FusedProgram epi = FusedProgram::decode(n.code, pos);
    const std::string E = std::to_string(tr.values), P = std::to_string((tr.values + 31) / 32), K = std::to_string(tr.rounds),
                      vt = value_type(t);
    std::ostringstream s;
    s << head << "    if (" << c(n.shape[0]) << " != 1) __trap();  // the executor runs groups for one token\n"
      << "    if (threadIdx.x < 32) {  // top-k ranks: " << K << " rounds\n"
      << "      const int lm_lane = threadIdx.x;\n"
      << "      unsigned lm_key[" << P << "];\n      int lm_tr[" << P << "];\n"
      << "      #pragma unroll\n"
      << "      for (int lm_i = 0; lm_i < " << P << "; ++lm_i) {\n"
      << "        const int lm_e = lm_lane + 32 * lm_i;\n"
      << "        const float lm_f = lm_e < " << E << " ? (float)lm_ld" << tr.mine << "((long long)lm_e * " << E << ") : 0.0f;\n"
      << "        const unsigned lm_b = __float_as_uint(lm_f == 0.0f ? 0.0f : lm_f);\n"
      << "        const bool lm_nan = lm_f != lm_f;\n"
      << "        lm_key[lm_i] = lm_e >= " << E << " || lm_nan ? 0u : (lm_b & 0x80000000u) ? ~lm_b : (lm_b | 0x80000000u);\n"
      << "        lm_tr[lm_i] = lm_nan ? 0 : " << K << ";\n"
      << "      }\n"
      << "      for (int lm_r = 0; lm_r < " << K << "; ++lm_r) {\n"
      << "        unsigned lm_bk = 0u;\n"
      << "        int lm_be = 0x7fffffff;\n"
      << "        #pragma unroll\n"
      << "        for (int lm_i = 0; lm_i < " << P << "; ++lm_i)\n"
      << "          if (lm_key[lm_i] > lm_bk) { lm_bk = lm_key[lm_i]; lm_be = lm_lane + 32 * lm_i; }\n"
      << "        const unsigned lm_mk = __reduce_max_sync(0xffffffffu, lm_bk);\n"
      << "        if (lm_mk == 0u) break;  // nothing left, in every lane alike\n"
      << "        const int lm_me = __reduce_min_sync(0xffffffffu, lm_bk == lm_mk ? lm_be : 0x7fffffff);\n"
      << "        #pragma unroll\n"
      << "        for (int lm_i = 0; lm_i < " << P << "; ++lm_i)\n"
      << "          if (lm_lane + 32 * lm_i == lm_me) { lm_key[lm_i] = 0u; lm_tr[lm_i] = lm_r; }\n"
      << "      }\n"
      << "      #pragma unroll\n"
      << "      for (int lm_i = 0; lm_i < " << P << "; ++lm_i) {\n"
      << "        const int lm_e = lm_lane + 32 * lm_i;\n"
      << "        if (lm_e < " << E << ") {\n"
      << "          const " << vt << " lm_r = (" << vt << ")lm_tr[lm_i];\n";
    if (!emit_program(s, epi, [](int) { return std::string("lm_r"); }, {t}, "e", "          ")) return std::nullopt;
    s << "          " << put(j, "lm_e", "e" + std::to_string(epi.instrs.size() - 1), epi.instrs.back().dtype) << "        }\n      }\n    }\n";
    return s.str();
  }

  std::optional<std::string> member(size_t j) const {
    const Node& n = g_.node(grp_.nodes[j]);
    if (const std::optional<GroupLinear> l = group_linear(g_, grp_.nodes[j])) return linear_member(j, *l);
    std::vector<DType> in_dt;
    for (const Edge& e : n.inputs) in_dt.push_back(g_.node(e.src).dtype);
    std::ostringstream s;
    std::set<NodeId> done;
    for (const Edge& e : n.inputs)
      if (!member_.count(e.src) && !leaf_.count(e.src) && !index_value_lambdas(e.src, done, s)) return std::nullopt;
    s << loaders(n);
    if (top_ranks_)
      if (const std::optional<TopRanks> tr = top_ranks_of(g_, grp_.nodes[j])) return top_ranks_member(j, n, *tr, s.str());
    auto inputs_at = [&](int count, const std::string& at, const std::string& indent) {
      std::string out;
      for (int i = 0; i < count; ++i)
        out += indent + "const " + value_type(in_dt[i]) + " x" + std::to_string(i) + " = lm_ld" + std::to_string(i) + "(" + at + ");\n";
      return out;
    };
    if (n.op == OpKind::Kernel && n.kernel == "Fused") {
      const FusedProgram p = FusedProgram::decode(n.code);
      s << "    const long long lm_n = " << c(product_of(n.shape, 0, n.shape.size())) << ";\n"
        << (is_split(j) ? "    for (long long lm_z = blockIdx.x * (long long)blockDim.x + threadIdx.x; lm_z < lm_n; lm_z += (long long)gridDim.x * blockDim.x) {\n"
                        : "    for (long long lm_z = threadIdx.x; lm_z < lm_n; lm_z += blockDim.x) {\n")
        << inputs_at(p.n_inputs, "lm_z", "      ");
      if (!emit_program(s, p, [](int k) { return "x" + std::to_string(k); }, in_dt, "v", "      ")) return std::nullopt;
      s << "      " << put(j, "lm_z", "v" + std::to_string(p.instrs.size() - 1), p.instrs.back().dtype) << "    }\n";
      return s.str();
    }
    if (n.op == OpKind::Kernel && n.kernel == "Softmax") {
      const float log2e = 1.4426950408889634f;
      if (const std::optional<OneTokenRows> r = one_token_rows(j, n.shape[0], product_of(n.shape, 0, n.shape.size() - 1), n.shape.back())) {
        // A lane's values and their exponentials held in registers across the three passes.
        const std::string T = std::to_string(r->trips), L2E = float_lit(log2e);
        s << one_token_opening(*r) << "      float lm_sv[" << T << "] = {}, lm_ex[" << T << "] = {};\n"
          << "      float lm_m = __int_as_float((int)0xff800000u);\n"
          << "      if (lm_live) {\n"
          << one_token_values(*r, "        ", "          lm_sv[lm_i] = (float)lm_ld0(lm_row * lm_len + lm_k);\n          lm_m = lm_fmax_nan(lm_m, lm_sv[lm_i]);\n")
          << "      }\n"
          << lanes_combine("lm_m", "lm_fmax_nan") << "      float lm_sum = 0.0f;\n"
          << "      if (lm_live) {\n"
          << one_token_values(*r, "        ", "          lm_ex[lm_i] = exp2f((lm_sv[lm_i] + lm_m * -1.0f) * " + L2E + ");\n          lm_sum += lm_ex[lm_i];\n")
          << "      }\n"
          << lanes_combine("lm_sum", "[](float a, float b) { return a + b; }") << "      const float lm_rcp = 1.0f / lm_sum;\n"
          << "      if (lm_live) {\n"
          << one_token_values(*r, "        ", "          " + put(j, "lm_row * lm_len + lm_k", "lm_ex[lm_i] * lm_rcp", DType::F32))
          << "      }\n    }\n";
        return s.str();
      }
      const std::string x = "(float)lm_ld0(lm_row * lm_len + lm_k)", e = "exp2f((" + x + " + lm_m * -1.0f) * " + float_lit(log2e) + ")";
      s << row_loop_opening(j, product_of(n.shape, 0, n.shape.size() - 1), n.shape.back())
        << "      float lm_m = __int_as_float((int)0xff800000u);\n"
        << "      if (lm_live) for (long long lm_k = threadIdx.x % lm_tpr; lm_k < lm_len; lm_k += lm_tpr) lm_m = lm_fmax_nan(lm_m, " << x << ");\n"
        << lanes_combine("lm_m", "lm_fmax_nan") << "      float lm_sum = 0.0f;\n"
        << "      if (lm_live) for (long long lm_k = threadIdx.x % lm_tpr; lm_k < lm_len; lm_k += lm_tpr) lm_sum += " << e << ";\n"
        << lanes_combine("lm_sum", "[](float a, float b) { return a + b; }") << "      const float lm_rcp = 1.0f / lm_sum;\n"
        << "      if (lm_live)\n"
        << "        for (long long lm_k = threadIdx.x % lm_tpr; lm_k < lm_len; lm_k += lm_tpr) "
        << put(j, "lm_row * lm_len + lm_k", e + " * lm_rcp", DType::F32) << "    }\n";
      return s.str();
    }
    // A reduction over the last axis, with its prologue and epilogue programs where fused.
    const bool sum = n.op == OpKind::SumReduce || n.kernel == "FusedSum";
    std::optional<FusedProgram> pro, epi;
    DType t = n.dtype;
    if (n.op == OpKind::Kernel) {
      size_t pos = 0;
      pro = FusedProgram::decode(n.code, pos);
      if (pos < n.code.size()) epi = FusedProgram::decode(n.code, pos);
      t = pro->instrs.back().dtype;
    }
    const Acc acc = accumulator(sum, t);
    const std::vector<Expr>& in_shape = n.inputs[0].view.shape();
    const Expr rows = product_of(in_shape, 0, in_shape.size() - 1);
    std::ostringstream step;  // one value into the accumulator
    step << "          const long long lm_at = lm_row * lm_len + lm_k;\n";
    if (pro) {
      step << inputs_at(pro->n_inputs, "lm_at", "          ");
      if (!emit_program(step, *pro, [](int k) { return "x" + std::to_string(k); }, in_dt, "v", "          ")) return std::nullopt;
      step << "          lm_acc = (" << acc.combine << ")(lm_acc, (" << acc.type << ")(v" << pro->instrs.size() - 1 << "));\n";
    } else {
      step << "          lm_acc = (" << acc.combine << ")(lm_acc, (" << acc.type << ")(" << convert("lm_ld0(lm_at)", in_dt[0], t) << "));\n";
    }
    if (const std::optional<OneTokenRows> r = one_token_rows(j, in_shape[0], rows, in_shape.back()))
      s << one_token_opening(*r) << "      " << acc.type << " lm_acc = " << acc.init << ";\n"
        << "      if (lm_live) {\n" << one_token_values(*r, "        ", step.str()) << "      }\n";
    else
      s << row_loop_opening(j, rows, in_shape.back()) << "      " << acc.type << " lm_acc = " << acc.init << ";\n"
        << "      if (lm_live)\n"
        << "        for (long long lm_k = threadIdx.x % lm_tpr; lm_k < lm_len; lm_k += lm_tpr) {\n"
        << step.str() << "        }\n";
    s << lanes_combine("lm_acc", acc.combine) << "      if (lm_live && threadIdx.x % lm_tpr == 0) {\n"
      << "        const " << value_type(t) << " lm_r = " << acc.result(t) << ";\n";
    if (epi) {
      const int pn = pro ? pro->n_inputs : 1;
      std::vector<DType> dt{t};
      for (int i = 1; i < epi->n_inputs; ++i) dt.push_back(in_dt[static_cast<size_t>(pn + i - 1)]);
      auto input = [&](int k) { return k == 0 ? std::string("lm_r") : "lm_ld" + std::to_string(pn + k - 1) + "(lm_row)"; };
      if (!emit_program(s, *epi, input, dt, "e", "        ")) return std::nullopt;
      s << "        " << put(j, "lm_row", "e" + std::to_string(epi->instrs.size() - 1), epi->instrs.back().dtype);
    } else {
      s << "        " << put(j, "lm_row", "lm_r", t);
    }
    s << "      }\n    }\n";
    return s.str();
  }
};

// Whether `leaf` depends on any of `members` (then the group cannot run before it).
bool depends_on(const Graph& g, NodeId leaf, const std::set<NodeId>& members) {
  std::vector<NodeId> todo{leaf};
  std::set<NodeId> seen;
  while (!todo.empty()) {
    const NodeId id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    if (members.count(id)) return true;
    for (const Edge& e : g.node(id).inputs) todo.push_back(e.src);
  }
  return false;
}

}  // namespace

std::vector<SmallGroup> small_groups(const Graph& plan, const std::vector<std::string>& graph_dims, FunctionSet& functions,
                                     const CodegenOptions& options) {
  const std::vector<NodeId> order = plan.topo_order();
  std::set<NodeId> candidates;
  for (NodeId id : order)
    if (plan.node(id).op != OpKind::Input && small_member(plan, id, options.router_in_group)) candidates.insert(id);
  // A linear member only as the head of a routing: its activations from outside the group, its
  // one reader a member softmax over the logits.
  std::map<NodeId, std::vector<NodeId>> readers;
  for (NodeId id : order)
    for (const Edge& e : plan.node(id).inputs) readers[e.src].push_back(id);
  for (auto it = candidates.begin(); it != candidates.end();) {
    const Node& n = plan.node(*it);
    const std::vector<NodeId>& rs = readers[*it];
    const bool linear = n.op == OpKind::Kernel && n.kernel == "Matmul";
    const bool routed = !rs.empty() && std::all_of(rs.begin(), rs.end(), [&](NodeId r) {
      return candidates.count(r) && plan.node(r).kernel == "Softmax";
    });
    it = linear && (candidates.count(n.inputs[0].src) || !routed) ? candidates.erase(it) : std::next(it);
  }
  // Connected components over the edges between candidates, each in the plan's order.
  std::map<NodeId, NodeId> root;
  std::function<NodeId(NodeId)> find = [&](NodeId x) { return root[x] == x ? x : root[x] = find(root[x]); };
  for (NodeId id : candidates) root[id] = id;
  for (NodeId id : candidates)
    for (const Edge& e : plan.node(id).inputs)
      if (candidates.count(e.src)) root[find(id)] = find(e.src);
  std::map<NodeId, std::vector<NodeId>> components;
  for (NodeId id : order)
    if (candidates.count(id)) components[find(id)].push_back(id);
  std::vector<SmallGroup> out;
  for (auto& [r, nodes] : components) {
    if (nodes.size() < 2) continue;
    const std::set<NodeId> members(nodes.begin(), nodes.end());
    SmallGroup grp;
    grp.nodes = nodes;
    bool ok = true;
    std::set<std::string> dims;
    for (NodeId id : nodes) {
      grp.capacity.push_back(*per_token(plan.node(id).shape));
      for (const std::string& d : node_dims(plan.node(id))) dims.insert(d);
      std::vector<NodeId> reads;
      if (const std::optional<GroupLinear> l = group_linear(plan, id)) {
        reads = l->reads();
        if (l->norm) dims.insert(l->norm->dims.begin(), l->norm->dims.end());
      } else {
        for (const Edge& e : plan.node(id).inputs) {
          if (!members.count(e.src) && options.index_values_in_groups && index_value(plan, e.src))
            index_value_dims(plan, e.src, dims);  // computed where read, not a leaf
          else
            reads.push_back(e.src);
        }
      }
      for (NodeId src : reads)
        if (!members.count(src) && std::find(grp.leaves.begin(), grp.leaves.end(), src) == grp.leaves.end()) {
          ok = ok && !deferrable(plan.node(src)) && !depends_on(plan, src, members);
          grp.leaves.push_back(src);
        }
    }
    if (!ok) continue;
    // Members with much work are shared out over blocks (the router's 128 rows of 2048 weights,
    // the ranks of 128 experts: 16384 comparisons, 1.6-3 us for one block); the members between
    // them are cheap, so every block runs them.
    std::vector<size_t> split;
    // (Top-k ranks need no sharing: a warp's k rounds.)
    for (size_t j = 0; j < nodes.size(); ++j)
      if (work_of(plan.node(nodes[j])) > kSmallGroupBlockWork && !(options.top_ranks_in_groups && top_ranks_of(plan, nodes[j])))
        split.push_back(j);
    // Blocks share rows: no more blocks than a split member has rows (a softmax's or reduction's
    // rows, an elementwise member's values, a linear member's outputs), about 1024 values of
    // work a block, a warp a linear member's row.
    int64_t blocks = 1;
    if (!split.empty()) {
      int64_t rows = 64, want = 1;
      for (size_t j : split) {
        const Node& n = plan.node(nodes[j]);
        rows = std::min(rows, rows_of_member(n));
        want = std::max(want, n.kernel == "Matmul" ? (rows_of_member(n) + kBlockThreads / 32 - 1) / (kBlockThreads / 32)
                                                   : (work_of(n) + kSmallGroupBlockWork - 1) / kSmallGroupBlockWork);
      }
      blocks = std::min(rows, want);
    }
    if (blocks == 1) split.clear();
    const std::optional<std::string> body = GroupWriter(plan, grp, split, options.top_ranks_in_groups).body();
    if (!body) continue;
    std::ostringstream text;
    text << "(char* __restrict__ lm_o0";
    for (size_t j = 1; j < nodes.size(); ++j) text << ", char* __restrict__ lm_o" << j;
    for (size_t l = 0; l < grp.leaves.size(); ++l) text << ", const char* __restrict__ lm_l" << l;
    if (blocks > 1) text << ", char* __restrict__ lm_cnt";
    if (options.group_prefetch) text << ", const char* __restrict__ lm_pf, const unsigned long long lm_pfn";
    text << ", const long long* __restrict__ lm_dims) {\n";
    for (const std::string& d : dims) {
      const auto it = std::find(graph_dims.begin(), graph_dims.end(), d);
      if (it == graph_dims.end()) throw Error("CUDA backend: dim " + d + " is missing from the graph's dims");
      text << "  const long long " << d << " = lm_dims[" << (it - graph_dims.begin()) << "];\n";
    }
    for (size_t j = 0; j < nodes.size(); ++j) text << "  __shared__ float lm_s" << j << "[" << grp.capacity[j] << "];\n";
    text << "  lm_grid_release();\n";
    // Weights are never written by kernels: asked for before the wait, 64 KB a request, a warp's
    // lanes taking turns (lm_pfn a multiple of 16 from an aligned start; the executor sees to it).
    if (options.group_prefetch)
      text << "  if (lm_pf && threadIdx.x < 32)\n"
           << "    for (unsigned long long lm_c = threadIdx.x * 65536ull; lm_c < lm_pfn; lm_c += 32ull * 65536ull)\n"
           << "      lm_prefetch_l2_bulk(lm_pf + lm_c, (unsigned)(lm_pfn - lm_c < 65536ull ? lm_pfn - lm_c : 65536ull));\n";
    text << "  lm_grid_wait();\n" << *body << "}\n";
    // With a linear member, one block an SM at least: ptxas otherwise holds registers down for
    // more blocks and issues a warp's weight loads a few at a time between the products (a
    // trip to memory each), where they should all be in flight at once.
    const bool linear = std::any_of(nodes.begin(), nodes.end(), [&](NodeId id) { return group_linear(plan, id).has_value(); });
    const std::string bounds = "__launch_bounds__(" + std::to_string(kBlockThreads) + (linear ? ", 1" : "") + ") ";
    const std::string name = "lm_SmallGroup_" + hash_key(bounds + text.str());
    if (!functions.find(name)) functions.add(name, "extern \"C\" __global__ void " + bounds + name + text.str() + "\n");
    grp.launch = Launch{name, Launch::Grid::Rows, Expr(blocks)};
    if (options.warp_groups && blocks == 1 && !linear) grp.launch.row_length = Expr(1);  // a warp (CudaExecutor::launch_shape)
    grp.counter = blocks > 1;
    grp.prefetch = options.group_prefetch;
    grp.body = *body;
    grp.dims.assign(dims.begin(), dims.end());
    out.push_back(std::move(grp));
  }
  return out;
}

}  // namespace luminal::cuda
