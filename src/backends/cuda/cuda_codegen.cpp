#include "backends/cuda/cuda_attention_fold.h"
#include "backends/cuda/cuda_codegen.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <set>
#include <sstream>

#include "backends/cpu/fused_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "core/cache_paths.h"
#include "core/error.h"
#include "graph/fused_program.h"
#include "runtime/buffer.h"

namespace luminal::cuda {

namespace {

using namespace luminal::cpu::codegen;
using cpu::emit_program;

using namespace gen;

class KernelWriter {
 public:
  KernelWriter(const Graph& g, NodeId id, const std::vector<std::string>& graph_dims)
      : g_(g), n_(g.node(id)), dims_(node_dims(g.node(id))), graph_dims_(graph_dims) {
    for (const std::string& d : dims_) {
      auto it = std::find(graph_dims.begin(), graph_dims.end(), d);
      LM_ASSERT(it != graph_dims.end(), "dim " + d + " is missing from the graph's dims");
      dim_slots_.push_back(static_cast<size_t>(it - graph_dims.begin()));
    }
    for (const Edge& e : n_.inputs) in_dtypes_.push_back(g.node(e.src).dtype);
  }

  const std::vector<std::string>& dims() const { return dims_; }
  // Output pointers after the inputs (lm_out1, ..): a grouped linear layer's other outputs.
  void set_extra_outputs(size_t n) { extra_outputs_ = n; }
  // Pointer parameters right after the inputs, by name (an expert sum's operands).
  void set_named_params(std::vector<std::string> names) { named_params_ = std::move(names); }
  // A pointer parameter after those, lm_res (Launch::residual_in).
  void set_residual_param(bool on) { residual_param_ = on; }
  // A pointer parameter after those, lm_gain (Launch::gain_in).
  void set_gain_param(bool on) { gain_param_ = on; }
  // Dims the body uses beyond the node's own (a folded norm's input view), declared as locals too.
  void set_extra_dims(const std::vector<std::string>& dims) {
    extra_dims_.clear();
    for (const std::string& d : dims)
      if (std::find(dims_.begin(), dims_.end(), d) == dims_.end() && std::find(extra_dims_.begin(), extra_dims_.end(), d) == extra_dims_.end())
        extra_dims_.push_back(d);
  }
  // Inputs that read Softmax node `softmax` compute its value instead (NodeKernels::softmax_fold):
  // their pointers hold the softmax's input, each block computes row 0's max and sum after the
  // wait, block 0 stores row 0's values to lm_smout. nullopt: none.
  void set_softmax_fold(std::optional<NodeId> softmax) {
    softmax_ = softmax;
    set_extra_dims(softmax ? node_dims(g_.node(*softmax)) : std::vector<std::string>{});
  }
  // Stores that go to Scatter `scatter`'s destination where the parameter lm_sdst is not null
  // (NodeKernels::scatter_store): element z to lm_sdst[lm_sidx[z]], skipped out of range as the
  // Scatter skips it. nullopt: none.
  void set_scatter_store(std::optional<NodeId> scatter) {
    scatter_ = scatter;
    set_extra_dims(scatter ? node_dims(g_.node(*scatter)) : std::vector<std::string>{});
  }
  // Inputs read as bf16 words where the node's dtype says f32 (NodeKernels::words_narrow).
  void set_narrow_inputs(std::vector<bool> narrow) { narrow_ = std::move(narrow); }
  // Stores as the bf16 words a library GEMM reads (NodeKernels::words): the f32 value's bf16 to
  // lm_out and, where lm_out1 is not null, the bf16 of what it leaves to lm_out1, exactly as
  // kRowsToBf16 would split the stored f32 value.
  void set_words(bool on) {
    words_ = on;
    extra_outputs_ = on ? 1 : 0;
  }
  DType in_dtype(size_t i) const { return in_dtypes_[i]; }
  const std::vector<Expr>& in_shape(size_t i) const { return n_.inputs[i].view.shape(); }

  // The function's opening: dims as locals, one loader lambda per input (lm_ld<i>(flat index)
  // gives the value through the view, the pad value where the view's mask says so).
  std::string preamble() const {
    std::ostringstream s;
    for (size_t i = 0; i < dims_.size(); ++i) s << "  const long long " << dims_[i] << " = lm_dims[" << dim_slots_[i] << "];\n";
    for (const std::string& d : extra_dims_) {
      auto it = std::find(graph_dims_.begin(), graph_dims_.end(), d);
      LM_ASSERT(it != graph_dims_.end(), "dim " + d + " is missing from the graph's dims");
      s << "  const long long " << d << " = lm_dims[" << (it - graph_dims_.begin()) << "];\n";
    }
    if (softmax_) s << softmax_loaders();
    for (size_t i = 0; i < n_.inputs.size(); ++i) {
      const View& v = n_.inputs[i].view;
      IndexExprs ix = v.flat_index();
      DType t = in_dtypes_[i];
      s << "  auto lm_ld" << i << " = [&](long long lm_q) -> " << value_type(t) << " {\n";
      if (!ix.valid.is_const(1)) s << "    if (!" << c(ix.valid) << ") return " << value_lit(v.pad_value(), t) << ";\n";
      if (softmax_ && n_.inputs[i].src == *softmax_)  // the softmax's value at that index (row 0's stats)
        s << "    return lm_se(" << c(ix.index) << ") * lm_srcp;\n  };\n";
      else if (i < narrow_.size() && narrow_[i])  // an f32 value stored as bf16 by its producer (NodeKernels::words_narrow)
        s << "    return lm_bf16_f32(((const uint16_t*)lm_in" << i << ")[" << c(ix.index) << "]);\n  };\n";
      else
        s << "    return " << load(t, "((const " + std::string(storage_type(t)) + "*)lm_in" + std::to_string(i) + ")[" + c(ix.index) + "]")
          << ";\n  };\n";
    }
    return s.str();
  }

  // The whole function around `body`, named by a hash of its text; added to the set once.
  // Every function lets the next kernel launch at once (launched as a programmatic dependent
  // launch, it only fills SMs this one leaves free) and waits for the kernel before it to finish
  // before `body`: so every write of a kernel follows all earlier kernels' completion, and a
  // kernel's launch and `before_wait` (reads of weights) overlap the previous one's tail.
  // `min_blocks` > 0 asks the compiler for registers that let that many blocks share an SM.
  // Without `release_at_start` the body calls lm_grid_release() itself (a kernel whose blocks
  // must all be resident first). With `dims_first`, the dims are loaded before the wait
  // (gen::dims_before_wait).
  std::string finish(const std::string& body, FunctionSet& functions, const std::string& before_wait = "",
                     int max_threads = kBlockThreads, int min_blocks = 0, bool release_at_start = true, bool dims_first = false) const {
    std::ostringstream params;
    params << "(char* __restrict__ lm_out";
    for (size_t i = 0; i < n_.inputs.size(); ++i) params << ", const char* __restrict__ lm_in" << i;
    for (const std::string& p : named_params_) params << ", const char* __restrict__ " << p;
    for (size_t i = 1; i <= extra_outputs_; ++i) params << ", char* __restrict__ lm_out" << i;
    if (residual_param_) params << ", const char* __restrict__ lm_res";
    if (gain_param_) params << ", const char* __restrict__ lm_gain";
    if (softmax_) params << ", char* __restrict__ lm_smout";
    if (scatter_) params << ", char* __restrict__ lm_sdst, const char* __restrict__ lm_sidx";
    params << ", const long long* __restrict__ lm_dims)";
    std::string pin;
    if (dims_first) {
      std::vector<std::string> dims(dims_.begin(), dims_.end());
      dims.insert(dims.end(), extra_dims_.begin(), extra_dims_.end());
      pin = gen::dims_before_wait(dims);
    }
    std::string text = params.str() + " {\n" + preamble() + (release_at_start ? "  lm_grid_release();\n" : "") + before_wait + pin +
                       "  lm_grid_wait();\n" +
                       (softmax_ ? softmax_stats() : std::string()) + body + "}\n";
    // The node's kind in the name, so profilers' kernel lists say what each function is.
    std::string kind;
    for (char ch : n_.kernel.empty() ? std::string(op_name(n_.op)) : n_.kernel) kind += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    const std::string bounds =
        "__launch_bounds__(" + std::to_string(max_threads) + (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "") + ") ";
    std::string name = "lm_" + kind + "_" + hash_key(bounds + text);
    if (!functions.find(name)) functions.add(name, "extern \"C\" __global__ void " + bounds + name + text + "\n");
    return name;
  }

  // With a scatter store, the destination index of element `at`, as a load (else empty): a
  // kernel may load it early, with its inputs, and give it to out_store.
  std::string scatter_index(const std::string& at) const {
    if (!scatter_) return "";
    const DType it = g_.node(g_.node(*scatter_).inputs[1].src).dtype;
    return "(long long)((const " + std::string(storage_type(it)) + "*)lm_sidx)[" + at + "]";
  }

  // `index`: element `at`'s scatter index already loaded (scatter_index), else loaded here.
  std::string out_store(const std::string& at, const std::string& value, DType from, const std::string& index = "") const {
    if (words_)
      return "{ const float lm_wv = " + convert(value, from, DType::F32) + "; const uint16_t lm_wh = lm_f32_bf16(lm_wv); ((uint16_t*)lm_out)[" + at +
             "] = lm_wh; if (lm_out1) ((uint16_t*)lm_out1)[" + at + "] = lm_f32_bf16(lm_wv - lm_bf16_f32(lm_wh)); }\n";
    const std::string plain = "((" + std::string(storage_type(n_.dtype)) + "*)lm_out)[" + at + "] = " + store(n_.dtype, convert(value, from, n_.dtype)) + ";";
    if (!scatter_) return plain + "\n";
    const Node& sc = g_.node(*scatter_);
    return "{ if (lm_sdst) { const long long lm_sk = " + (index.empty() ? scatter_index(at) : index) + "; if (lm_sk >= 0 && lm_sk < " +
           c(product_of(sc.shape, 0, sc.shape.size())) + ") ((" + storage_type(sc.dtype) + "*)lm_sdst)[lm_sk] = " +
           store(sc.dtype, convert(value, from, sc.dtype)) + "; } else " + plain + " }\n";
  }

  // `x<i> = lm_ld<i>(at)` for every input, then the program, then the store at `at`.
  std::string program_at(const FusedProgram& p, const std::string& at, const std::string& indent) const {
    std::ostringstream s;
    std::vector<DType> dt(in_dtypes_.begin(), in_dtypes_.begin() + p.n_inputs);
    for (int i = 0; i < p.n_inputs; ++i) s << indent << "const " << value_type(dt[i]) << " x" << i << " = lm_ld" << i << "(" << at << ");\n";
    if (!emit_program(s, p, [](int k) { return "x" + std::to_string(k); }, dt, "v", indent))
      throw Error("CUDA backend: cannot generate code for a fused program of node kind " + n_.kernel);
    s << indent << out_store(at, "v" + std::to_string(p.instrs.size() - 1), p.instrs.back().dtype);
    return s.str();
  }

 private:
  const Graph& g_;
  const Node& n_;
  std::vector<std::string> dims_, extra_dims_, graph_dims_, named_params_;
  std::vector<size_t> dim_slots_;  // each dim's place in the graph's dims (the device array)
  std::vector<DType> in_dtypes_;
  size_t extra_outputs_ = 0;
  bool words_ = false, residual_param_ = false, gain_param_ = false;
  std::vector<bool> narrow_;
  std::optional<NodeId> softmax_, scatter_;

  // set_softmax_fold: lm_sx(q) is the softmax's input at its flat index q (through its view, read
  // from the first input that reads the softmax), lm_se(q) the exponential the Softmax kernel
  // takes of it, lm_smx and lm_srcp row 0's max and 1 / sum (set by softmax_stats).
  std::string softmax_loaders() const {
    const Node& sm = g_.node(*softmax_);
    size_t first = 0;
    while (n_.inputs[first].src != *softmax_) ++first;
    const View& v = sm.inputs[0].view;
    const IndexExprs ix = v.flat_index();
    const DType t = g_.node(sm.inputs[0].src).dtype;
    std::ostringstream s;
    s << "  float lm_smx = 0.0f, lm_srcp = 0.0f;\n"
      << "  auto lm_sx = [&](long long lm_q) -> float {\n";
    if (!ix.valid.is_const(1)) s << "    if (!" << c(ix.valid) << ") return (float)" << value_lit(v.pad_value(), t) << ";\n";
    s << "    return (float)" << load(t, "((const " + std::string(storage_type(t)) + "*)lm_in" + std::to_string(first) + ")[" + c(ix.index) + "]")
      << ";\n  };\n"
      << "  auto lm_se = [&](long long lm_q) { return exp2f((lm_sx(lm_q) + lm_smx * -1.0f) * " << float_lit(1.4426950408889634f) << "); };\n";
    return s.str();
  }
  // Row 0 of the softmax, as its kernel computes it (the same max, exponentials and sum, the sum
  // in the block's order): every block takes the stats, block 0 also stores the values.
  std::string softmax_stats() const {
    const Node& sm = g_.node(*softmax_);
    const char* loop = "  #pragma unroll 4\n  for (long long lm_k = threadIdx.x; lm_k < lm_sl; lm_k += blockDim.x)";
    std::ostringstream s;
    s << "  {\n  const long long lm_sl = " << c(sm.shape.back()) << ";\n"
      << "  float lm_m = __int_as_float((int)0xff800000u);\n"
      << loop << " lm_m = lm_fmax_nan(lm_m, lm_sx(lm_k));\n"
      << "  lm_smx = lm_block_reduce(lm_m, lm_fmax_nan);\n"
      << "  float lm_s = 0.0f;\n"
      << loop << " lm_s += lm_se(lm_k);\n"
      << "  lm_srcp = 1.0f / lm_block_reduce(lm_s, [](float a, float b) { return a + b; });\n"
      << "  if (blockIdx.x == 0) {\n  " << loop << " ((float*)lm_smout)[lm_k] = lm_se(lm_k) * lm_srcp;\n"
      << "  }\n  }\n";
    return s.str();
  }
};

// A row kernel's RMS scale: the sum of squares of `x` (an expression of lm_k) over the row by
// `loop`, the block's sum, then lm_scale = 1 / sqrt(mean + eps) (lm_inv_n declared before).
std::string rms_scale(const char* loop, const std::string& x, double eps) {
  return std::string("  float lm_ss = 0.0f;\n") + loop + "    const float lm_v = " + x + ";\n    lm_ss += lm_v * lm_v;\n  }\n" +
         "  lm_ss = lm_block_reduce(lm_ss, [](float a, float b) { return a + b; });\n" +
         "  const float lm_scale = 1.0f / sqrtf(lm_ss * lm_inv_n + " + float_lit(eps) + ");\n";
}

// The opening of a row kernel's path for rows of at most four values a thread: the threads
// that hold the row (lm_nt; value lm_u of thread t is element t + lm_u * lm_nt). A row of up to
// 128 values (a decode head) takes one warp whatever the block: a joined launch runs with its
// largest member's block (256 threads), where the row's sum would otherwise cross 8 warps
// through shared memory and two barriers; alone, such a row's block is one warp anyway, so both
// sum in the same order. The other warps leave. LUMINAL_CUDA_WARP_ROWS=0: the block's threads
// (before session 46).
std::string four_values_opening() {
  static const bool warp_rows = env_switch_on("LUMINAL_CUDA_WARP_ROWS");
  return std::string("  if (lm_len <= 4 * (long long)blockDim.x) {\n") +
         (warp_rows ? "    const int lm_nt = lm_len <= 128 ? 32 : (int)blockDim.x;\n" : "    const int lm_nt = (int)blockDim.x;\n") +
         "    if ((int)threadIdx.x >= lm_nt) return;\n";
}

// The same for a row held in registers, four values a thread in lm_xs (zeros past the row),
// into lm_ss (declared zero before) and lm_scale; after four_values_opening.
std::string rms_scale_of_registers(double eps) {
  return "    #pragma unroll\n    for (int lm_u = 0; lm_u < 4; ++lm_u) lm_ss += lm_xs[lm_u] * lm_xs[lm_u];\n"
         "    if (lm_nt == 32)\n"
         "      for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_ss += __shfl_xor_sync(0xffffffffu, lm_ss, lm_o);\n"
         "    else\n"
         "      lm_ss = lm_block_reduce(lm_ss, [](float a, float b) { return a + b; });\n"
         "    const float lm_scale = 1.0f / sqrtf(lm_ss * lm_inv_n + " + float_lit(eps) + ");\n";
}

// A graph input no node writes in place (a weight, not a KV cache a Scatter updates): its
// values may be read before a kernel's wait on the ones before it.
bool unwritten_input(const Graph& g, NodeId id) {
  if (g.node(id).op != OpKind::Input) return false;
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Scatter && !n.inputs.empty() && n.inputs[0].src == id) return false;
  return true;
}

// Whether node `id` is an f32 linear layer with bf16 weights (a Matmul whose weight, input 1, is
// a bf16 value cast to f32 or read as bf16): on the library, its GEMM can store bf16.
bool linear_output(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return n.op == OpKind::Kernel && n.kernel == "Matmul" && n.dtype == DType::F32 && n.inputs.size() == 2 &&
         g.node(n.inputs[1].src).dtype == DType::BF16;
}

// Whether node `id` is read only as the activations of linear layers (Matmul input 0, never
// the weight): then its value may go to them as bf16 words (NodeKernels::words).
bool feeds_only_linear_layers(const Graph& g, NodeId id) {
  bool any = false;
  for (NodeId r = 0; r < g.size(); ++r) {
    const Node& n = g.node(r);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].src != id) continue;
      if (n.op != OpKind::Kernel || n.kernel != "Matmul" || i != 0 || n.inputs[1].src == id) return false;
      any = true;
    }
  }
  return any;
}

// The same for an MoE's gate/up experts (ScaledMatmul `sm`) reading the norm in order and
// broadcast over the experts ([E, m, k], stride 0 along E): x's layer gets that leading dim.
std::optional<FoldedNorm> expert_norm_prologue_of(const Graph& g, const Node& sm) {
  const NodeId src = sm.inputs[0].src;
  if (sm.inputs[1].src == src || sm.inputs[2].src == src) return std::nullopt;
  std::optional<FoldedNorm> f = folded_norm(g, src);
  const ViewLayer* rd = plain_strided(sm.inputs[0].view);
  const std::vector<Expr>& shape = g.node(src).shape;
  if (!f || !rd || rd->shape.size() != shape.size() + 1 || !rd->strides[0].is_const(0) || !rd->offset.is_const(0)) return std::nullopt;
  int64_t stride = 1;  // the norm's shape is constant past its first dim (a token's row), read in order
  for (size_t d = shape.size(); d-- > 0;) {
    if (!(rd->shape[d + 1] == shape[d])) return std::nullopt;
    const std::optional<int64_t> st = rd->strides[d + 1].as_const(), len = shape[d].as_const();
    if (!st || (*st != stride && !(len && *len == 1))) return std::nullopt;
    if (d > 0 && !len) return std::nullopt;
    stride *= len.value_or(1);
  }
  f->x.insert_dim(0, rd->shape[0], Expr(0));
  for (const std::string& d : rd->shape[0].dims())
    if (std::find(f->dims.begin(), f->dims.end(), d) == f->dims.end()) f->dims.push_back(d);
  return f;
}

// A generic matmul's opening: a warp per output (b, i, j) of A [.., m, k] x B [.., k, n], in a
// grid-stride loop left open.
std::string warp_per_output(const std::string& count_decl, const std::vector<Expr>& a, const Expr& n) {
  const size_t rank = a.size();
  return count_decl + "  const long long lm_m = " + c(a[rank - 2]) + ", lm_kk = " + c(a[rank - 1]) + ", lm_n = " + c(n) +
         ";\n  const int lm_lane = threadIdx.x & 31;\n"
         "  for (long long lm_z = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; lm_z < lm_count;"
         " lm_z += ((long long)gridDim.x * blockDim.x) >> 5) {\n"
         "    const long long lm_j = lm_z % lm_n, lm_r = lm_z / lm_n, lm_i = lm_r % lm_m, lm_b = lm_r / lm_m;\n";
}

const char* kGridLoop =
    "  for (long long lm_z = blockIdx.x * (long long)blockDim.x + threadIdx.x; lm_z < lm_count;"
    " lm_z += (long long)gridDim.x * blockDim.x) {\n";

// The opening of a one-block-per-row kernel over the input view's [outer, len, inner] split
// at `axis`: lm_at(k) is the flat index of element k of this block's row.
std::string row_opening(const std::vector<Expr>& shape, size_t axis) {
  std::ostringstream s;
  s << "  const long long lm_len = " << c(shape.at(axis)) << ", lm_inner = " << c(product_of(shape, axis + 1, shape.size()))
    << ";\n  const long long lm_row = blockIdx.x, lm_o = lm_row / lm_inner, lm_i = lm_row - lm_o * lm_inner;\n"
    << "  auto lm_at = [&](long long lm_k) { return (lm_o * lm_len + lm_k) * lm_inner + lm_i; };\n";
  return s.str();
}

Expr rows_of(const std::vector<Expr>& shape, size_t axis) { return product_of(shape, 0, axis) * product_of(shape, axis + 1, shape.size()); }

// Whether a reduction runs down columns: a short reduced axis (a constant up to 1024) that is not
// the last, under a last dim of at least 32 (an MoE's sum over its experts, [experts, rows,
// hidden]). One block per row would read its elements a row of the inner dims apart, a 32-byte
// sector for each 4-byte value (1 ms for a 512-token prefill's sum on the H200).
bool column_reduction(const std::vector<Expr>& shape, size_t axis) {
  if (axis + 1 >= shape.size()) return false;
  const std::optional<int64_t> len = shape[axis].as_const(), last = shape.back().as_const();
  return len && *len <= 1024 && last && *last >= 32;
}

// The Softmax that fused kernel `id` may compute itself (NodeKernels::softmax_fold): one over
// the last axis, f32, of an f32, bf16 or f16 value, read by some of the node's inputs. Its rows
// are short (an MoE router's experts): every block of the reader passes over the row twice, which
// over a vocabulary would cost far more than the softmax's launch.
constexpr int64_t kMaxFoldedSoftmax = 1024;
std::optional<NodeId> softmax_read_by(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op != OpKind::Kernel || (n.kernel != "Fused" && n.kernel != "FusedSum" && n.kernel != "FusedMax")) return std::nullopt;
  for (const Edge& e : n.inputs) {
    const Node& sm = g.node(e.src);
    if (sm.op != OpKind::Kernel || sm.kernel != "Softmax" || sm.dtype != DType::F32 || sm.inputs.size() != 1 || sm.shape.empty() ||
        sm.axis != sm.shape.size() - 1)
      continue;
    const std::optional<int64_t> len = sm.shape.back().as_const();
    if (!len || *len > kMaxFoldedSoftmax) continue;
    const DType t = g.node(sm.inputs[0].src).dtype;
    if (t == DType::F32 || t == DType::BF16 || t == DType::F16) return e.src;
  }
  return std::nullopt;
}

// The one node that reads any of `of` (through any number of its inputs); nullopt where none or
// several do.
std::optional<NodeId> sole_reader(const Graph& g, const std::vector<NodeId>& of) {
  std::optional<NodeId> reader;
  for (NodeId r = 0; r < g.size(); ++r)
    for (const Edge& e : g.node(r).inputs)
      if (std::find(of.begin(), of.end(), e.src) != of.end()) {
        if (reader && *reader != r) return std::nullopt;
        reader = r;
      }
  return reader;
}

// The Scatter whose update (input 2) is node `id`'s whole value, which nothing else reads: a
// key or value cache write, which `id`'s kernel may then do itself (NodeKernels::scatter_store).
std::optional<NodeId> scatter_of_update(const Graph& g, NodeId id) {
  const std::optional<NodeId> r = sole_reader(g, {id});
  if (!r) return std::nullopt;
  const Node& s = g.node(*r);
  if (s.op != OpKind::Scatter || s.inputs.size() != 3 || s.inputs[2].src != id || s.inputs[0].src == id || s.inputs[1].src == id)
    return std::nullopt;
  if (g.node(s.inputs[1].src).dtype != DType::I32) return std::nullopt;
  return r;
}

// The store of a gated product (an f32 Fused node of two inputs, input `up_input` the up half)
// at a GEMV's store: the node's program of each (gate, up) pair, written as the node writes it.
// A gated product's program (act(gate) * up) on `gate` and `up`, x0 and x1 as `up_input` says,
// at `indent`: its value in v<last>, of the program's last dtype.
std::string gated_program(const FusedProgram& prog, int up_input, const std::string& gate, const std::string& up, const std::string& indent) {
  std::ostringstream s;
  for (int i = 0; i < 2; ++i) s << indent << "const float x" << i << " = " << (i == up_input ? up : gate) << ";\n";
  if (!emit_program(s, prog, [](int k) { return "x" + std::to_string(k); }, {DType::F32, DType::F32}, "v", indent))
    throw Error("CUDA backend: cannot generate a gated product's program");
  return s.str();
}

GatedEpilogue gated_epilogue(const Graph& g, NodeId product, const Expr& half, int up_input, const std::vector<std::string>& graph_dims) {
  const FusedProgram prog = FusedProgram::decode(g.node(product).code);
  auto writer = std::make_shared<KernelWriter>(g, product, graph_dims);
  return GatedEpilogue{half, [prog, writer, up_input](const std::string& at, const std::string& gate, const std::string& up) {
                         return "{\n" + gated_program(prog, up_input, gate, up, "          ") + "          " +
                                writer->out_store(at, "v" + std::to_string(prog.instrs.size() - 1), prog.instrs.back().dtype) + "        }\n";
                       }};
}

// The gated product that is ScaledMatmul `id`'s one reader (an MoE's act(gate) * up over its
// experts' gate/up products, [E, m, 2h]): an f32 Fused node of two inputs, the first and the
// second half of the last axis, each read in order. With the half (h) and which input is up.
struct GatedExperts {
  NodeId product;
  Expr half;
  int up_input;
};
std::optional<GatedExperts> gated_experts_of(const Graph& g, NodeId id) {
  const Node& sm = g.node(id);
  if (sm.dtype != DType::F32 || sm.shape.size() < 2) return std::nullopt;
  const std::optional<NodeId> reader = sole_reader(g, {id});
  if (!reader) return std::nullopt;
  const Node& p = g.node(*reader);
  if (p.op != OpKind::Kernel || p.kernel != "Fused" || p.dtype != DType::F32 || p.inputs.size() != 2 || p.shape.size() != sm.shape.size())
    return std::nullopt;
  const size_t r = sm.shape.size();
  const std::optional<int64_t> width = sm.shape[r - 1].as_const();
  if (!width || *width % 2 != 0) return std::nullopt;
  const Expr half(*width / 2);
  for (size_t d = 0; d + 1 < r; ++d)
    if (!(p.shape[d] == sm.shape[d])) return std::nullopt;
  if (!(p.shape[r - 1] == half)) return std::nullopt;
  const std::vector<Expr> strides = ViewLayer::contiguous(sm.shape).strides;
  int gate = -1, up = -1;
  for (int i = 0; i < 2; ++i) {
    const ViewLayer* l = plain_strided(p.inputs[static_cast<size_t>(i)].view);
    if (!l || !(l->shape == p.shape) || !(l->strides == strides)) return std::nullopt;
    if (l->offset.is_const(0)) gate = i;
    else if (l->offset == half) up = i;
  }
  if (gate < 0 || up < 0) return std::nullopt;
  return GatedExperts{*reader, half, up};
}

// The ScaledMatmul (an MoE's expert products, [E, m, n]) that reduction `f` sums over its
// experts (axis 0), where the sum is all that reads it: a SumReduce, or a FusedSum whose
// prologue only loads it (its epilogue, such as the residual add, then runs at the store).
std::optional<NodeId> expert_product_of(const Graph& g, NodeId f_id) {
  const Node& f = g.node(f_id);
  const bool fused = f.op == OpKind::Kernel && f.kernel == "FusedSum";
  if (!(fused || f.op == OpKind::SumReduce) || f.axis != 0 || f.dtype != DType::F32 || f.inputs.empty()) return std::nullopt;
  const NodeId s = f.inputs[0].src;
  const Node& sn = g.node(s);
  if (sn.op != OpKind::Kernel || sn.kernel != "ScaledMatmul" || sn.dtype != DType::F32 || sn.shape.size() != 3) return std::nullopt;
  if (!f.inputs[0].view.is_contiguous() || !(f.inputs[0].view.shape() == sn.shape)) return std::nullopt;
  if (fused) {
    size_t pos = 0;
    const FusedProgram p = FusedProgram::decode(f.code, pos);
    if (p.n_inputs != 1 || p.instrs.size() != 1) return std::nullopt;
    const FusedInstr& load = p.instrs[0];
    if (load.op != static_cast<int>(OpKind::Cast) || load.a != 0 || load.dtype != DType::F32 || load.in_dtype != DType::F32) return std::nullopt;
  }
  for (NodeId r = 0; r < g.size(); ++r)
    for (size_t i = 0; i < g.node(r).inputs.size(); ++i)
      if (g.node(r).inputs[i].src == s && (r != f_id || i != 0)) return std::nullopt;
  return s;
}

// An expert sum's store of `value` at `at`, through the sum's epilogue where it has one (its
// other inputs by their loaders, after the prologue's `prologue_inputs`), the block at `indent`.
std::string expert_sum_store(const KernelWriter& w, const std::optional<FusedProgram>& epi, int prologue_inputs, const std::string& at,
                             const std::string& value, const std::string& indent) {
  if (!epi) return w.out_store(at, value, DType::F32);
  std::ostringstream s;
  std::vector<DType> dt{DType::F32};
  for (int i = 1; i < epi->n_inputs; ++i) dt.push_back(w.in_dtype(static_cast<size_t>(prologue_inputs + i - 1)));
  auto input = [&](int k) { return k == 0 ? value : "lm_ld" + std::to_string(prologue_inputs + k - 1) + "(" + at + ")"; };
  s << "{\n";
  if (!emit_program(s, *epi, input, dt, "e", indent + "  ")) throw Error("CUDA backend: cannot generate the epilogue of an expert sum");
  s << indent << "  " << w.out_store(at, "e" + std::to_string(epi->instrs.size() - 1), epi->instrs.back().dtype) << indent << "}\n";
  return s.str();
}

// The experts in one kernel (NodeKernels::experts_in_one) for sum `id` over ScaledMatmul
// `product` (the down experts): where the product's activations are, in order, the whole gated
// product of gate/up experts that nothing else reads, and both weights are bf16.
void experts_in_one_kernels(const Graph& g, NodeId id, NodeId product, const std::optional<FusedProgram>& epi, int prologue_inputs,
                            const std::vector<std::string>& graph_dims, FunctionSet& functions, NodeKernels& r) {
  const Node& dn = g.node(product);
  const NodeId p = dn.inputs[0].src;
  const Node& pn = g.node(p);
  if (pn.op != OpKind::Kernel || pn.kernel != "Fused" || pn.inputs.size() != 2 || pn.inputs[0].src != pn.inputs[1].src) return;
  const NodeId gu = pn.inputs[0].src;
  const Node& gn = g.node(gu);
  if (gn.op != OpKind::Kernel || gn.kernel != "ScaledMatmul") return;
  const std::optional<GatedExperts> ge = gated_experts_of(g, gu);
  if (!ge || ge->product != p || sole_reader(g, {p}) != std::optional<NodeId>(product)) return;
  if (!dn.inputs[0].view.is_contiguous() || !(dn.inputs[0].view.shape() == pn.shape)) return;
  if (g.node(gn.inputs[1].src).dtype != DType::BF16 || g.node(dn.inputs[1].src).dtype != DType::BF16 ||
      g.node(gn.inputs[0].src).dtype != DType::F32 || g.node(gn.inputs[2].src).dtype != DType::F32 || g.node(dn.inputs[2].src).dtype != DType::F32)
    return;
  const ViewLayer *ga = plain_strided(gn.inputs[0].view), *gb = plain_strided(gn.inputs[1].view), *gs = plain_strided(gn.inputs[2].view);
  const ViewLayer *db = plain_strided(dn.inputs[1].view), *ds = plain_strided(dn.inputs[2].view);
  const FusedProgram prog = FusedProgram::decode(pn.code);
  const int up_input = ge->up_input;
  auto gated_value = [prog, up_input](const std::string& gate, const std::string& up, const std::string& out, const std::string& in) {
    return in + "float " + out + ";\n" + in + "{\n" + gated_program(prog, up_input, gate, up, in + "  ") + in + "  " + out + " = " +
           convert("v" + std::to_string(prog.instrs.size() - 1), prog.instrs.back().dtype, DType::F32) + ";\n" + in + "}\n";
  };
  // One launch, with or without the norm fold; the executor sets its blocks (one a multiprocessor).
  auto one = [&](const ViewLayer* a, const std::optional<FoldedNorm>& fold) -> std::optional<Launch> {
    KernelWriter w(g, id, graph_dims);
    w.set_named_params({"lm_ga", "lm_gb", "lm_gs", "lm_db", "lm_ds"});
    w.set_extra_outputs(2);
    std::vector<std::string> dims = node_dims(gn);
    for (const std::string& d : node_dims(dn)) dims.push_back(d);
    if (fold) {
      for (const std::string& d : fold->dims) dims.push_back(d);
      w.set_gain_param(fold->prologue.gain);
    }
    w.set_extra_dims(dims);
    auto store = [&](const std::string& at, const std::string& value) { return expert_sum_store(w, epi, prologue_inputs, at, value, "      "); };
    ExpertsInOne x{a, gb, gs, db, ds, fold ? &fold->prologue : nullptr, gated_value, store};
    const std::optional<std::string> body = experts_in_one_body(x);
    if (!body) return std::nullopt;
    Launch l{w.finish(*body, functions, "", kBlockThreads, 1, false), Launch::Grid::Rows, Expr(1), Expr(kExpertsInOneSharedBytes)};
    l.gain_in = fold && fold->prologue.gain;
    return l;
  };
  const std::optional<Launch> plain = one(ga, std::nullopt);
  if (!plain) return;
  auto k = std::make_shared<NodeKernels>();
  k->launches.push_back(*plain);
  if (const std::optional<FoldedNorm> fold = expert_norm_prologue_of(g, gn))
    if (const std::optional<Launch> normed = one(&fold->x, fold)) {
      k->normed = std::make_shared<NodeKernels>();
      k->normed->launches.push_back(*normed);
    }
  r.experts_in_one = k;
  r.experts_gate_up = gu;
}

// The expert sum of reduction `id` over ScaledMatmul `product` (NodeKernels::expert_sum): the
// product's operands as named parameters after the reduction's inputs, the epilogue (if any)
// at each store.
void expert_sum_kernels(const Graph& g, NodeId id, NodeId product, const std::optional<FusedProgram>& epi, int prologue_inputs,
                        const std::vector<std::string>& graph_dims, FunctionSet& functions, NodeKernels& r) {
  const Node& sn = g.node(product);
  const ViewLayer *la = plain_strided(sn.inputs[0].view), *lb = plain_strided(sn.inputs[1].view), *ls = plain_strided(sn.inputs[2].view);
  if (!la || !lb || !ls || g.node(sn.inputs[0].src).dtype != DType::F32 || g.node(sn.inputs[2].src).dtype != DType::F32) return;
  KernelWriter w(g, id, graph_dims);
  w.set_named_params({"lm_xa", "lm_xb", "lm_xs"});
  w.set_extra_dims(node_dims(sn));
  auto store = [&](const std::string& at, const std::string& value) { return expert_sum_store(w, epi, prologue_inputs, at, value, "          "); };
  // Every schedule, plain or in the early form (NodeKernels::expert_sum_early); none where one
  // fails. Then the same functions on each other grid cap, expert_sum_caps() (0: the variant's
  // own): fewer blocks list the experts fewer times, and each team takes more units.
  auto schedules = [&](bool early) -> std::shared_ptr<NodeKernels> {
    std::vector<Launch> own;
    for (const ExpertSumVariant& v : kExpertSumVariants) {
      std::string before;
      auto body = expert_sum_body(la, lb, ls, g.node(sn.inputs[1].src).dtype, store, v, early ? &before : nullptr);
      if (!body) return nullptr;
      // (Their dims loaded before the wait: the H100's 8-layer MoE sums added 73.4 us a step
      // against 86.0, where every kernel's dims so loaded cost the GEMVs 26 more.)
      own.push_back({w.finish(*body, functions, before, kBlockThreads, v.min_blocks, true, true), Launch::Grid::Elements,
                     expert_sum_threads(sn.shape[1], sn.shape[2], v)});
      own.back().blocks_per_sm = v.min_blocks;
    }
    auto k = std::make_shared<NodeKernels>();
    k->launches.push_back(own[0]);
    k->alternatives.assign(own.begin() + 1, own.end());
    for (int cap : expert_sum_caps())
      for (size_t i = 0; i < own.size(); ++i)
        if (cap && cap != kExpertSumVariants[i].min_blocks) {
          k->alternatives.push_back(own[i]);
          k->alternatives.back().blocks_per_sm = cap;
        }
    return k;
  };
  r.expert_sum = schedules(false);
  if (!r.expert_sum) return;
  r.expert_product = product;
  if (expert_sums_before_wait()) r.expert_sum_early = schedules(true);
  experts_in_one_kernels(g, id, product, epi, prologue_inputs, graph_dims, functions, r);
}

// The opening of a column reduction: 32 adjacent outputs (lanes) a block, its warps splitting
// the reduced axis, so that each warp's loads are runs along the inner dims. lm_at(k) is the
// flat index of element k of this lane's row; lm_valid: the lane has a row.
std::string column_opening(const std::vector<Expr>& shape, size_t axis) {
  std::ostringstream s;
  s << "  const long long lm_len = " << c(shape.at(axis)) << ", lm_inner = " << c(product_of(shape, axis + 1, shape.size()))
    << ";\n  const long long lm_row = blockIdx.x * 32LL + (threadIdx.x & 31), lm_o = lm_row / lm_inner, lm_i = lm_row - lm_o * lm_inner;\n"
    << "  const bool lm_valid = lm_row < " << c(rows_of(shape, axis)) << ";\n"
    << "  auto lm_at = [&](long long lm_k) { return (lm_o * lm_len + lm_k) * lm_inner + lm_i; };\n";
  return s.str();
}

// A linear GEMV schedule's launch: a team of threads per unit of `count` outputs, its grid
// shaped as the schedule deals the units (Launch::spread).
Launch linear_launch(std::string function, const Expr& count, const LinearVariant& v) {
  Launch l{std::move(function), Launch::Grid::Elements, linear_threads(count, v)};
  l.spread = v.spread;
  return l;
}

}  // namespace

std::string cuda_prelude() {
  // LM_EMULATED: the CPU emulator of the tests (tests/cuda_emulator) compiles this text with g++
  // and its own header, which defines the types and every helper below that uses PTX.
  return "#ifndef LM_EMULATED\ntypedef int int32_t;\ntypedef unsigned int uint32_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned char uint8_t;\n"
         "typedef long long int64_t;\n#endif\n"
         // The CPU generator's literals, and quiet about the loaders a kernel does not call.
         "#define __builtin_inff() __int_as_float(0x7f800000)\n#define __builtin_nanf(x) __int_as_float(0x7fc00000)\n"
         "#pragma nv_diag_suppress 177\n#pragma nv_diag_suppress 550\n#ifndef INT32_MAX\n#define INT32_MAX 2147483647\n#define INT32_MIN (-2147483647 - 1)\n#endif\n" +
         Expr::c_prelude() + R"(
// Programmatic dependent launch (sm_90+): griddepcontrol.launch_dependents lets the next
// kernel start; griddepcontrol.wait returns once the kernel before has finished and its writes
// are visible. No-ops on older devices, where kernels run one after the other anyway.
#ifndef LM_EMULATED
#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void lm_grid_release() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void lm_grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#else
__device__ __forceinline__ void lm_grid_release() {}
__device__ __forceinline__ void lm_grid_wait() {}
#endif
// The generated bodies' other PTX: the launch's dynamic shared memory, an L2 prefetch, and the
// gpu-scope loads, stores and atomics of the grid barriers and last-block counters.
__device__ __forceinline__ unsigned lm_dynamic_smem_size() {
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void lm_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" :: "l"(p)); }
// `bytes` (a multiple of 16, from a 16-byte aligned address) asked of L2 by the tensor memory
// accelerator in one request: one thread can cover megabytes where line prefetches would take
// a block's issue slots.
__device__ __forceinline__ void lm_prefetch_l2_bulk(const void* p, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ unsigned lm_ld_relaxed_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned lm_ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void lm_st_release_gpu(unsigned* p, unsigned v) { asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory"); }
// atom.inc: the old value; the new one is 0 where the old was at least `limit`, else old + 1.
__device__ __forceinline__ unsigned lm_atom_inc_acq_rel_gpu(unsigned* p, unsigned limit) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(limit) : "memory");
  return old;
}
__device__ __forceinline__ unsigned lm_atom_add1_acq_rel_gpu(unsigned* p) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(p) : "memory");
  return old;
}
#endif
// D += A B on the tensor cores: m16n8k16, bf16 A (row-major fragment) and B (column-major), f32
// sums. Only the tensor-core schedules call it, and the executor offers those from sm_80.
#ifndef LM_EMULATED
__device__ __forceinline__ void lm_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
#if __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}
#endif
// f32 to bf16, rounded to nearest even (NaN stays a quiet NaN).
__device__ __forceinline__ uint16_t lm_f32_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
// Two f32 values as one word of two bf16 values (rounded to nearest even), the first in the low half.
__device__ __forceinline__ unsigned lm_pack_bf16(float x0, float x1) {
  unsigned r = 0;
#if defined(LM_EMULATED)
  r = lm_f32_bf16(x0) | (unsigned)lm_f32_bf16(x1) << 16;
#elif __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#else
  __trap();
#endif
  return r;
}
// Two f32 values as bf16 hi (rounded to nearest even) and lo (what hi leaves, rounded), each pair
// packed with the first value in the low half, as the tensor cores read (k, k + 1).
__device__ __forceinline__ void lm_split_bf16(float x0, float x1, unsigned& hi, unsigned& lo) {
  hi = lm_pack_bf16(x0, x1);
  lo = lm_pack_bf16(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
}
// Four 8x8 b16 matrices from shared memory into MMA fragments (lanes 8i..8i+7 give matrix i's
// row addresses; register i gets matrix i).
#ifndef LM_EMULATED
__device__ __forceinline__ void lm_ldmatrix_x4(unsigned* r, const void* p) {
#if __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((unsigned)__cvta_generic_to_shared(p)));
#else
  __trap();
#endif
}
// 16 bytes global -> shared without registers (sm_80+); zero-filled where `full` is false.
__device__ __forceinline__ void lm_cp_async16(void* dst, const void* src, bool full) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(full ? 16 : 0));
#else
  __trap();
#endif
}
__device__ __forceinline__ void lm_cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void lm_cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
#endif
__device__ __forceinline__ float lm_bf16_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
// Eight bf16 weights (a 16-byte load) times eight f32 values, added to acc in order.
__device__ __forceinline__ float lm_dot8(uint4 w, float4 a, float4 b, float acc) {
  acc = __fmaf_rn(a.x, __uint_as_float(w.x << 16), acc);
  acc = __fmaf_rn(a.y, __uint_as_float(w.x & 0xffff0000u), acc);
  acc = __fmaf_rn(a.z, __uint_as_float(w.y << 16), acc);
  acc = __fmaf_rn(a.w, __uint_as_float(w.y & 0xffff0000u), acc);
  acc = __fmaf_rn(b.x, __uint_as_float(w.z << 16), acc);
  acc = __fmaf_rn(b.y, __uint_as_float(w.z & 0xffff0000u), acc);
  acc = __fmaf_rn(b.z, __uint_as_float(w.w << 16), acc);
  acc = __fmaf_rn(b.w, __uint_as_float(w.w & 0xffff0000u), acc);
  return acc;
}
// One step of summing 2 * half values over a warp at once: a lane keeps half of them (the upper
// where its lane has `bit`) and adds its partner's of the same; log2 steps leave each sum in two lanes.
template <int half>
__device__ __forceinline__ void lm_halve_rows(float* part, int lane, int bit) {
  const bool upper = lane & bit;
#pragma unroll
  for (int i = 0; i < half; ++i) {
    const float recv = __shfl_xor_sync(0xffffffffu, upper ? part[i] : part[i + half], bit);
    part[i] = (upper ? part[i + half] : part[i]) + recv;
  }
}
// One-dimensional bulk copies global -> shared by the tensor memory accelerator (sm_90+),
// counted by an mbarrier in shared memory: expect (one thread, before its copies), copy, wait
// (every thread that reads them). Addresses and sizes multiples of 16 bytes.
#ifndef LM_EMULATED
__device__ __forceinline__ void lm_bulk_expect(unsigned long long* bar, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void lm_bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   (unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(bytes), "r"((unsigned)__cvta_generic_to_shared(bar))
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void lm_bulk_wait(unsigned long long* bar) {
#if __CUDA_ARCH__ >= 900
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
#else
  __trap();
#endif
}
#endif
// The generated programs' exp2 (on the CPU, a vectorisable copy of libm's): CUDA's exp2f.
__device__ __forceinline__ float lm_exp2f(float x) { return exp2f(x); }
__device__ __forceinline__ float lm_round_bf16(float f) { return lm_bf16_f32(lm_f32_bf16(f)); }
#ifndef LM_EMULATED
__device__ __forceinline__ float lm_f16_f32(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ uint16_t lm_f32_f16(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
#endif
__device__ __forceinline__ float lm_round_f16(float f) { return lm_f16_f32(lm_f32_f16(f)); }
__device__ __forceinline__ int32_t lm_f2i(float f) {
  if (f != f) return 0;
  if (f >= 2147483648.0f) return INT32_MAX;
  if (f <= -2147483648.0f) return INT32_MIN;
  return (int32_t)f;
}
__device__ __forceinline__ int32_t lm_imod(int32_t x, int32_t y) { return (y == 0 || y == -1) ? 0 : x % y; }
// Max that propagates NaN, like ReduceAcc.
__device__ __forceinline__ float lm_fmax_nan(float a, float b) { return (a != a) ? a : ((b != b || b > a) ? b : a); }
// The same in one instruction on sm_80 and newer (NaN if either is; the sign of a zero maximum
// may differ), for the tensor-core kernels' running maxima.
__device__ __forceinline__ float lm_max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800 && !defined(LM_EMULATED)
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return lm_fmax_nan(a, b);
#endif
}
// Every thread of the block gets f over all threads' values (blockDim.x a multiple of 32).
template <class T, class F>
__device__ T lm_block_reduce(T v, F f) {
  __shared__ T lm_red[32];
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // an earlier reduction's readers are done with lm_red
  if (lane == 0) lm_red[warp] = v;
  __syncthreads();
  // In warp order, as before, but unrolled: the loads go out together, not one per step.
  v = lm_red[0];
  #pragma unroll
  for (int w = 1; w < 32; ++w)
    if (w < warps) v = f(v, lm_red[w]);
  return v;
}
// The index of the largest of n f32 values (the first of equals; NaN never wins, -1 where every
// value is NaN): a decode's greedy choice over its logits, so that 4 bytes cross to the host
// instead of the vocabulary's logits. Each block takes a contiguous chunk with 16-byte loads and
// writes its best to part[block]; the last block to finish (counted in *done, which it resets)
// merges them. One block of 1024 threads took 30 us over 128256 logits: one SM's loads.
__device__ __forceinline__ void lm_argmax_keep(float& best, long long& at, float v, long long i) {
  if (i >= 0 && v == v && (at < 0 || v > best || (v == best && i < at))) best = v, at = i;
}
__device__ __forceinline__ void lm_argmax_block(float& best, long long& at) {
  __shared__ float lm_bv[32];
  __shared__ long long lm_bi[32];
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const long long i = __shfl_xor_sync(0xffffffffu, at, o);
    lm_argmax_keep(best, at, v, i);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) lm_bv[threadIdx.x >> 5] = best, lm_bi[threadIdx.x >> 5] = at;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < (int)(blockDim.x + 31) / 32; ++w) lm_argmax_keep(best, at, lm_bv[w], lm_bi[w]);
}
extern "C" __global__ void __launch_bounds__(1024) lm_argmax_f32(const float* x, long long n, long long* out, int* out32,
                                                                float* part_v, long long* part_i, unsigned* done) {
  float best = 0.0f;
  long long at = -1;
  const long long chunk = ((n + gridDim.x - 1) / gridDim.x + 3) & ~3LL;  // a multiple of 4: aligned float4s
  const long long lo = blockIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
  if ((((unsigned long long)x) & 15) == 0) {
    long long i = lo + 4 * threadIdx.x;
    for (; i + 3 < hi; i += 4 * blockDim.x) {
      const float4 v = *(const float4*)(x + i);
      lm_argmax_keep(best, at, v.x, i);
      lm_argmax_keep(best, at, v.y, i + 1);
      lm_argmax_keep(best, at, v.z, i + 2);
      lm_argmax_keep(best, at, v.w, i + 3);
    }
    for (; i < hi; ++i) lm_argmax_keep(best, at, x[i], i);  // the last few, by the thread that reached them
  } else {
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) lm_argmax_keep(best, at, x[i], i);
  }
  lm_argmax_block(best, at);
  __shared__ bool lm_last;
  if (threadIdx.x == 0) {
    part_v[blockIdx.x] = best;
    part_i[blockIdx.x] = at;
    __threadfence();
    lm_last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!lm_last) return;
  __threadfence();
  best = 0.0f;
  at = -1;
  for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x) lm_argmax_keep(best, at, ((volatile float*)part_v)[b], ((volatile long long*)part_i)[b]);
  lm_argmax_block(best, at);
  if (threadIdx.x != 0) return;
  *done = 0;
  *out = at;
  if (out32) *out32 = (int)at;
}
// Reads n 16-byte words (a scratch larger than L2) so that the schedule timed next finds its
// weight cold, as a decode step does. It lets the next kernel launch at once and is itself a
// stream over memory, like the GEMV before a GEMV in a step: the schedule's own prefetch and
// ramp overlap its tail as they would there. Reads, not writes: dirty lines would be written
// back while the timed kernel runs. `sink` is written only on an impossible sum.
extern "C" __global__ void lm_evict_read(const uint4* p, long long n, unsigned* sink) {
  lm_grid_release();
  lm_grid_wait();
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
extern "C" __global__ void lm_rows_to_bf16(uint16_t* hi, uint16_t* lo, const float* in, long long rows, long long cols, long long ld) {
  for (long long z = blockIdx.x * (long long)blockDim.x + threadIdx.x; z < rows * cols; z += (long long)gridDim.x * blockDim.x) {
    const long long r = z / cols;
    const float x = in[r * ld + (z - r * cols)];
    hi[z] = lm_f32_bf16(x);
    if (lo) lo[z] = lm_f32_bf16(x - lm_bf16_f32(hi[z]));
  }
}
)";
}

const std::string* FunctionSet::find(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return &texts[i];
  return nullptr;
}

void FunctionSet::add(const std::string& name, const std::string& text) {
  if (find(name)) return;
  names.push_back(name);
  texts.push_back(text);
}

NodeKernels emit_node_kernels(const Graph& g, NodeId id, const std::vector<std::string>& graph_dims, FunctionSet& functions,
                              const CodegenOptions& options) {
  const Node& n = g.node(id);
  KernelWriter w(g, id, graph_dims);
  NodeKernels r;
  const Expr count = product_of(n.shape, 0, n.shape.size());
  const std::string count_decl = "  const long long lm_count = " + c(count) + ";\n";
  auto elementwise = [&](const std::string& per_element) {
    std::string body = count_decl + kGridLoop + per_element + "  }\n";
    r.launches.push_back({w.finish(body, functions), Launch::Grid::Elements, count});
  };
  // The node's launch again, computing the softmax it reads (NodeKernels::softmax_fold).
  auto softmax_fold = [&](const std::function<Launch()>& again) {
    const std::optional<NodeId> sm = softmax_read_by(g, id);
    if (!sm) return;
    w.set_softmax_fold(sm);
    Launch l = again();
    w.set_softmax_fold(std::nullopt);
    l.softmax_out = true;
    r.softmax_fold = std::make_shared<NodeKernels>();
    r.softmax_fold->launches.push_back(l);
    r.softmax_node = *sm;
  };
  // One block per item of `work`, with `shared` bytes of dynamic shared memory. Launches may size
  // their grid for larger dims than this run's (a replayed CUDA graph): blocks past the work
  // return at once. A row kernel passes its row's `length` and gets blocks sized to the row
  // (Launch::row_length). `min_blocks`: as KernelWriter::finish.
  auto per_block = [&](const std::string& body, const Expr& work, const Expr& shared, const Expr& length = Expr(0), int min_blocks = 0) {
    const int max_threads = length.is_const(0) ? kBlockThreads : kRowMaxThreads;
    return Launch{w.finish("  if (blockIdx.x >= " + c(work) + ") return;\n" + body, functions, "", max_threads, min_blocks), Launch::Grid::Rows,
                  work, shared, length};
  };
  // One block per row of `length` elements.
  auto rows = [&](const std::string& body, const Expr& work, const Expr& length) { r.launches.push_back(per_block(body, work, Expr(0), length)); };

  const OpKind op = n.op;
  if (op == OpKind::Cast || op == OpKind::Output) return elementwise(w.program_at(single(OpKind::Cast, n.dtype, w.in_dtype(0), 1), "lm_z", "    ")), r;
  if (is_unary(op) || is_binary(op))
    return elementwise(w.program_at(single(op, n.dtype, w.in_dtype(0), is_binary(op) ? 2 : 1), "lm_z", "    ")), r;
  if (op == OpKind::Constant) return elementwise("    " + w.out_store("lm_z", float_lit(n.constant), DType::F32)), r;
  if (op == OpKind::Iota)
    return elementwise("    " + w.out_store("lm_z", "(int32_t)(" + n.iota_expr.to_c("lm_z") + ")", DType::I32)), r;
  if (op == OpKind::Gather) {
    const Expr data_count = product_of(w.in_shape(1), 0, w.in_shape(1).size());
    DType t = w.in_dtype(1);
    return elementwise("    const long long lm_k = (long long)lm_ld0(lm_z);\n    const " + std::string(value_type(t)) +
                       " lm_v = (lm_k >= 0 && lm_k < " + c(data_count) + ") ? lm_ld1(lm_k) : (" + value_type(t) + ")0;\n    " +
                       w.out_store("lm_z", "lm_v", t)),
           r;
  }
  if (op == OpKind::Scatter) {
    r.scatter = true;
    elementwise("    " + w.out_store("lm_z", "lm_ld0(lm_z)", w.in_dtype(0)));
    const Expr src_count = product_of(w.in_shape(2), 0, w.in_shape(2).size());
    // Updates in parallel: with repeated indices one of them wins (the reference keeps the last).
    std::string body = count_decl + "  const long long lm_src = " + c(src_count) + ";\n" +
                       "  for (long long lm_j = blockIdx.x * (long long)blockDim.x + threadIdx.x; lm_j < lm_src;"
                       " lm_j += (long long)gridDim.x * blockDim.x) {\n"
                       "    const long long lm_k = (long long)lm_ld1(lm_j);\n"
                       "    if (lm_k >= 0 && lm_k < lm_count) " + w.out_store("lm_k", "lm_ld2(lm_j)", w.in_dtype(2)) + "  }\n";
    r.launches.push_back({w.finish(body, functions), Launch::Grid::Elements, src_count});
    return r;
  }
  if (op == OpKind::SumReduce || op == OpKind::MaxReduce || (op == OpKind::Kernel && (n.kernel == "FusedSum" || n.kernel == "FusedMax"))) {
    const bool sum = op == OpKind::SumReduce || n.kernel == "FusedSum";
    std::optional<FusedProgram> pro, epi;
    DType t = n.dtype;
    if (op == OpKind::Kernel) {
      size_t pos = 0;
      pro = FusedProgram::decode(n.code, pos);
      if (pos < n.code.size()) epi = FusedProgram::decode(n.code, pos);
      t = pro->instrs.back().dtype;
    }
    Acc acc = accumulator(sum, t);
    const std::vector<Expr>& in_shape = w.in_shape(0);
    const bool columns = column_reduction(in_shape, n.axis);
    std::ostringstream s;
    // Unrolled, so each thread has several loads in flight: a decode step's rows are one block
    // each, and a load at a time left them latency-bound (4-5 us for 4096 values).
    if (columns)
      s << column_opening(in_shape, n.axis) << "  " << acc.type << " lm_acc = " << acc.init << ";\n"
        << "  #pragma unroll 4\n  for (long long lm_k = threadIdx.x >> 5; lm_valid && lm_k < lm_len; lm_k += blockDim.x >> 5) {\n";
    else
      s << row_opening(in_shape, n.axis) << "  " << acc.type << " lm_acc = " << acc.init << ";\n"
        << "  #pragma unroll 4\n  for (long long lm_k = threadIdx.x; lm_k < lm_len; lm_k += blockDim.x) {\n";
    if (pro) {
      std::vector<DType> dt;
      for (int i = 0; i < pro->n_inputs; ++i) {
        dt.push_back(w.in_dtype(static_cast<size_t>(i)));
        s << "    const " << value_type(dt.back()) << " x" << i << " = lm_ld" << i << "(lm_at(lm_k));\n";
      }
      if (!emit_program(s, *pro, [](int k) { return "x" + std::to_string(k); }, dt, "v", "    "))
        throw Error("CUDA backend: cannot generate the prologue of a fused reduction");
      s << "    lm_acc = (" << acc.combine << ")(lm_acc, (" << acc.type << ")(v" << pro->instrs.size() - 1 << "));\n";
    } else {
      s << "    lm_acc = (" << acc.combine << ")(lm_acc, (" << acc.type << ")(" << convert("lm_ld0(lm_at(lm_k))", w.in_dtype(0), t) << "));\n";
    }
    if (columns)  // the warps' partial sums of each column, in warp order
      s << "  }\n  __shared__ " << acc.type << " lm_cols[" << kBlockThreads / 32 << "][32];\n"
        << "  lm_cols[threadIdx.x >> 5][threadIdx.x & 31] = lm_acc;\n  __syncthreads();\n"
        << "  if (threadIdx.x >= 32 || !lm_valid) return;\n  lm_acc = lm_cols[0][threadIdx.x];\n"
        << "  for (int lm_w = 1; lm_w < (int)(blockDim.x >> 5); ++lm_w) lm_acc = (" << acc.combine << ")(lm_acc, lm_cols[lm_w][threadIdx.x]);\n";
    else
      s << "  }\n  lm_acc = lm_block_reduce(lm_acc, " << acc.combine << ");\n  if (threadIdx.x != 0) return;\n";
    s << "  const " << value_type(t) << " lm_r = " << acc.result(t) << ";\n";
    if (epi) {
      std::vector<DType> dt{t};
      for (int i = 1; i < epi->n_inputs; ++i) dt.push_back(w.in_dtype(static_cast<size_t>(pro->n_inputs + i - 1)));
      auto input = [&](int k) { return k == 0 ? std::string("lm_r") : "lm_ld" + std::to_string(pro->n_inputs + k - 1) + "(lm_row)"; };
      if (!emit_program(s, *epi, input, dt, "e", "  ")) throw Error("CUDA backend: cannot generate the epilogue of a fused reduction");
      s << "  " << w.out_store("lm_row", "e" + std::to_string(epi->instrs.size() - 1), epi->instrs.back().dtype);
    } else {
      s << "  " << w.out_store("lm_row", "lm_r", t);
    }
    auto launch = [&] {
      return columns ? per_block(s.str(), ceil_div(rows_of(in_shape, n.axis), Expr(32)), Expr(0))
                     : per_block(s.str(), rows_of(in_shape, n.axis), Expr(0), in_shape.at(n.axis));
    };
    r.launches.push_back(launch());
    softmax_fold(launch);
    if (auto product = expert_product_of(g, id)) expert_sum_kernels(g, id, *product, epi, pro ? pro->n_inputs : 1, graph_dims, functions, r);
    return r;
  }
  if (op != OpKind::Kernel) throw Error(std::string("CUDA backend: no kernel for op ") + op_name(op));

  const std::string& k = n.kernel;
  // A Fused or RMSNormMul node that only linear layers read also stores bf16 words (`words`).
  const bool words = n.dtype == DType::F32 && (k == "Fused" || k == "RMSNormMul") && feeds_only_linear_layers(g, id);
  if (k == "Fused") {
    const FusedProgram p = FusedProgram::decode(n.code);
    // The program over every element, as the writer's settings (words, a softmax fold) say.
    auto program_launch = [&] {
      return Launch{w.finish(count_decl + kGridLoop + w.program_at(p, "lm_z", "    ") + "  }\n", functions), Launch::Grid::Elements, count};
    };
    r.launches.push_back(program_launch());
    softmax_fold(program_launch);
    if (words) {
      w.set_words(true);
      r.words = program_launch();
      // With bf16 activations, a prefill's gate and up products may reach the gated product as
      // bf16 (the library's GEMMs round their sums once): its words read from those.
      if (options.bf16_activations) {
        std::vector<bool> narrow(n.inputs.size(), false);
        bool any = false;
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          narrow[i] = linear_output(g, n.inputs[i].src) && n.inputs[i].view.is_contiguous();
          any = any || narrow[i];
        }
        if (any) {
          w.set_narrow_inputs(narrow);
          r.words_narrow = program_launch();
          r.narrow_inputs = narrow;
          w.set_narrow_inputs({});
        }
      }
      w.set_words(false);
    }
    return r;
  }
  if (k == "Where") {
    return elementwise("    if (lm_ld0(lm_z) != 0) " + w.out_store("lm_z", "lm_ld1(lm_z)", w.in_dtype(1)) + "    else " +
                       w.out_store("lm_z", "lm_ld2(lm_z)", w.in_dtype(2))),
           r;
  }
  // A key cache's update computed here: the kernels may store it into the cache themselves.
  if (k == "Rotary" || k == "RMSNormRotary")
    if (const std::optional<NodeId> sc = scatter_of_update(g, id)) {
      w.set_scatter_store(sc);
      r.scatter_node = *sc;
    }
  auto scatter_params = [&] {
    if (r.scatter_node)
      for (Launch& l : r.launches) l.scatter_out = true;
    return r;
  };
  if (k == "Rotary") {
    const Expr d = w.in_shape(0).back();
    std::string body = "    const long long lm_dd = " + c(d) + ", lm_half = lm_dd / 2, lm_j = lm_z % lm_dd, lm_base = lm_z - lm_j;\n"
                       "    const float lm_x = (float)lm_ld0(lm_z);\n"
                       "    const float lm_rot = lm_j < lm_dd - lm_half ? -(float)lm_ld0(lm_base + lm_j + lm_half)"
                       " : (float)lm_ld0(lm_base + lm_j - (lm_dd - lm_half));\n"
                       "    const float lm_a = lm_x * (float)lm_ld1(lm_z), lm_b = lm_rot * (float)lm_ld2(lm_z);\n    " +
                       w.out_store("lm_z", "lm_a + lm_b", DType::F32);
    return elementwise(body), scatter_params();
  }
  if (k == "RMSNormRotary") {
    // A block per row, as RMSNormMul: the sum of squares, then each element's rotary from the
    // normed values (x * scale) * w, recomputed where it reads the other half's partner (they
    // are two loads from L1, where a shared row would need a barrier and a size limit).
    std::ostringstream s;
    const bool scatter = r.scatter_node.has_value();
    const char* loop = "  #pragma unroll 4\n  for (long long lm_k = threadIdx.x; lm_k < lm_len; lm_k += blockDim.x) {\n";
    s << row_opening(w.in_shape(0), n.axis) << "  const float lm_inv_n = 1.0f / (float)lm_len;\n"
      // Rows of at most four elements a thread (a decode's heads: 128 values, 32 threads): every
      // value the row needs (x, its partner, both gains, cos and sin) is loaded before the sum,
      // all in flight at once, so nothing waits on a second round of loads after it. The same
      // sums and products as the loops below, in the same order.
      << four_values_opening() << "    const long long lm_half = lm_len / 2;\n"
      << "    float lm_xs[4], lm_gs[4], lm_ps[4], lm_pg[4], lm_cs[4], lm_sn[4], lm_ss = 0.0f;\n"
      << (scatter ? "    long long lm_sks[4];\n" : "")
      << "    #pragma unroll\n"
      << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
      << "      const long long lm_k = threadIdx.x + lm_u * (long long)lm_nt;\n"
      << "      const bool lm_in = lm_k < lm_len;\n"
      << "      const long long lm_p = lm_k < lm_len - lm_half ? lm_k + lm_half : lm_k - (lm_len - lm_half);\n"
      << "      lm_xs[lm_u] = lm_in ? (float)lm_ld0(lm_at(lm_k)) : 0.0f;\n"
      << "      lm_gs[lm_u] = lm_in ? (float)lm_ld1(lm_at(lm_k)) : 0.0f;\n"
      << "      lm_ps[lm_u] = lm_in ? (float)lm_ld0(lm_at(lm_p)) : 0.0f;\n"
      << "      lm_pg[lm_u] = lm_in ? (float)lm_ld1(lm_at(lm_p)) : 0.0f;\n"
      << "      lm_cs[lm_u] = lm_in ? (float)lm_ld2(lm_at(lm_k)) : 0.0f;\n"
      << "      lm_sn[lm_u] = lm_in ? (float)lm_ld3(lm_at(lm_k)) : 0.0f;\n"
      // A key cache's row position too, where the kernel stores into the cache: loaded at the
      // store, it was one more trip to L2 after the sum, at the kernel's end.
      << (scatter ? "      lm_sks[lm_u] = lm_sdst && lm_in ? " + w.scatter_index("lm_at(lm_k)") + " : -1;\n" : std::string())
      << "    }\n"
      << rms_scale_of_registers(n.constant)
      << "    #pragma unroll\n"
      << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
      << "      const long long lm_k = threadIdx.x + lm_u * (long long)lm_nt;\n"
      << "      if (lm_k >= lm_len) continue;\n"
      << "      const float lm_pn = (lm_ps[lm_u] * lm_scale) * lm_pg[lm_u];\n"
      << "      const float lm_rot = lm_k < lm_len - lm_half ? -lm_pn : lm_pn;\n"
      << "      const float lm_a = ((lm_xs[lm_u] * lm_scale) * lm_gs[lm_u]) * lm_cs[lm_u], lm_b = lm_rot * lm_sn[lm_u];\n      "
      << w.out_store("lm_at(lm_k)", "lm_a + lm_b", DType::F32, scatter ? "lm_sks[lm_u]" : "") << "    }\n    return;\n  }\n"
      << rms_scale(loop, "(float)lm_ld0(lm_at(lm_k))", n.constant)
      << "  auto lm_xn = [&](long long lm_k) { return ((float)lm_ld0(lm_at(lm_k)) * lm_scale) * (float)lm_ld1(lm_at(lm_k)); };\n"
      << "  const long long lm_half = lm_len / 2;\n"
      << loop << "    const float lm_rot = lm_k < lm_len - lm_half ? -lm_xn(lm_k + lm_half) : lm_xn(lm_k - (lm_len - lm_half));\n"
      << "    const float lm_a = lm_xn(lm_k) * (float)lm_ld2(lm_at(lm_k)), lm_b = lm_rot * (float)lm_ld3(lm_at(lm_k));\n    "
      << w.out_store("lm_at(lm_k)", "lm_a + lm_b", DType::F32) << "  }\n";
    rows(s.str(), rows_of(w.in_shape(0), n.axis), w.in_shape(0).at(n.axis));
    return scatter_params();
  }
  if (k == "Softmax" || k == "RMSNorm" || k == "RMSNormMul" || k == "LayerNorm") {
    auto body = [&] {
      std::ostringstream s;
      s << row_opening(w.in_shape(0), n.axis) << "  const float lm_inv_n = 1.0f / (float)lm_len;\n";
      const char* loop = "  #pragma unroll 4\n  for (long long lm_k = threadIdx.x; lm_k < lm_len; lm_k += blockDim.x) {\n";
      if (k == "Softmax") {
        s << "  float lm_mx = __int_as_float((int)0xff800000u);\n" << loop << "    lm_mx = lm_fmax_nan(lm_mx, (float)lm_ld0(lm_at(lm_k)));\n  }\n"
          << "  lm_mx = lm_block_reduce(lm_mx, lm_fmax_nan);\n  const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
          << "  auto lm_e = [&](long long lm_k) { return exp2f(((float)lm_ld0(lm_at(lm_k)) + lm_mx * -1.0f) * lm_log2e); };\n"
          << "  float lm_sum = 0.0f;\n" << loop << "    lm_sum += lm_e(lm_k);\n  }\n"
          << "  lm_sum = lm_block_reduce(lm_sum, [](float a, float b) { return a + b; });\n  const float lm_rcp = 1.0f / lm_sum;\n"
          << loop << "    " << w.out_store("lm_at(lm_k)", "lm_e(lm_k) * lm_rcp", DType::F32) << "  }\n";
      } else {
        std::string x = "(float)lm_ld0(lm_at(lm_k))";
        if (k == "LayerNorm") {
          s << "  float lm_s1 = 0.0f;\n" << loop << "    lm_s1 += " << x << ";\n  }\n"
            << "  const float lm_neg_mean = (lm_block_reduce(lm_s1, [](float a, float b) { return a + b; }) * lm_inv_n) * -1.0f;\n";
          x = "(" + x + " + lm_neg_mean)";
        } else {
          s << "  const float lm_neg_mean = 0.0f;\n";
        }
        s << "  auto lm_x = [&](long long lm_k) { return " << x << "; };\n";
        if (k != "LayerNorm") {
          // Rows of at most four elements a thread (the launch sizes blocks for about four): x and
          // the gain are loaded together and kept in registers, so the store waits on no second
          // load. The same sums and products as the loops below, in the same order.
          const bool gain = k == "RMSNormMul";
          s << four_values_opening() << "    float lm_xs[4], lm_gs[4], lm_ss = 0.0f;\n"
            << "    #pragma unroll\n"
            << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
            << "      const long long lm_k = threadIdx.x + lm_u * (long long)lm_nt;\n"
            << "      lm_xs[lm_u] = lm_k < lm_len ? lm_x(lm_k) : 0.0f;\n"
            << "      lm_gs[lm_u] = " << (gain ? "lm_k < lm_len ? (float)lm_ld1(lm_at(lm_k)) : 0.0f" : "1.0f") << ";\n"
            << "    }\n"
            << rms_scale_of_registers(n.constant)
            << "    #pragma unroll\n"
            << "    for (int lm_u = 0; lm_u < 4; ++lm_u) {\n"
            << "      const long long lm_k = threadIdx.x + lm_u * (long long)lm_nt;\n"
            << "      if (lm_k < lm_len) " << w.out_store("lm_at(lm_k)", gain ? "(lm_xs[lm_u] * lm_scale) * lm_gs[lm_u]" : "lm_xs[lm_u] * lm_scale", DType::F32)
            << "    }\n    return;\n  }\n";
        }
        s << rms_scale(loop, "lm_x(lm_k)", n.constant)
          << loop << "    " << w.out_store("lm_at(lm_k)", k == "RMSNormMul" ? "(lm_x(lm_k) * lm_scale) * (float)lm_ld1(lm_at(lm_k))" : "lm_x(lm_k) * lm_scale", DType::F32) << "  }\n";
      }
      return s.str();
    };
    rows(body(), rows_of(w.in_shape(0), n.axis), w.in_shape(0).at(n.axis));
    if (words) {
      w.set_words(true);
      r.words = per_block(body(), rows_of(w.in_shape(0), n.axis), Expr(0), w.in_shape(0).at(n.axis));
      w.set_words(false);
    }
    return r;
  }
  // Products round to A's dtype, as the Mul node they replaced; sums run in f32 (i32 wraps).
  auto product = [&](DType t, const std::string& a, DType ta, const std::string& b, DType tb, const std::string& indent) {
    std::ostringstream s;
    FusedProgram p = single(OpKind::Mul, t, t, 2);
    s << indent << "const " << value_type(ta) << " x0 = " << a << ";\n" << indent << "const " << value_type(tb) << " x1 = " << b << ";\n";
    if (!emit_program(s, p, [](int k) { return "x" + std::to_string(k); }, {ta, tb}, "v", indent))
      throw Error("CUDA backend: cannot generate a matmul product");
    return s.str();
  };
  if (k == "Matmul") {
    const std::vector<Expr>& a = w.in_shape(0);
    const size_t rank = a.size();
    if (rank < 2 || w.in_shape(1).size() != rank) throw Error("CUDA backend: Matmul needs [.., m, k] and [.., k, n] of one rank");
    const DType t = w.in_dtype(0);
    const ViewLayer* la = plain_strided(n.inputs[0].view);
    const ViewLayer* lb = plain_strided(n.inputs[1].view);
    bool unbatched = true;
    for (size_t d = 0; d + 2 < rank; ++d) unbatched = unbatched && a[d].is_const(1);
    // A linear layer's f32 GEMV adds the residual lm_res at its stores where the executor passes
    // one (a decode's residual sums after the o and down projections: one launch fewer each).
    const bool residual = unbatched && n.dtype == DType::F32;
    auto store_v = [&](const std::string& at, DType from) {
      return w.out_store(at, residual ? "(lm_res ? lm_v + ((const float*)lm_res)[" + at + "] : lm_v)" : "lm_v", from);
    };
    // Weight loads before the wait (linear_weight_preload) where no kernel writes the weight.
    const bool preload = weights_before_wait() && unwritten_input(g, n.inputs[1].src);
    auto gemv = [&](const ViewLayer* a_layer, const ViewLayer* b_layer, DType a_dtype, const LinearVariant& v,
                    const NormPrologue* norm = nullptr) -> std::optional<Launch> {
      auto body = strided_linear_body(a_layer, b_layer, {a_dtype, w.in_dtype(1)}, count_decl, store_v, v, nullptr, norm, nullptr, preload);
      if (!body) return std::nullopt;
      w.set_residual_param(residual);
      w.set_gain_param(norm != nullptr);
      std::string before = linear_weight_prefetch(a_layer, b_layer, w.in_dtype(1), v, linear_prefetch_budget(g.node(n.inputs[0].src)));
      if (preload) before += linear_weight_preload(a_layer, b_layer, w.in_dtype(1), count_decl, v, norm);
      Launch l = linear_launch(w.finish(*body, functions, before), count, v);
      w.set_residual_param(false);
      w.set_gain_param(false);
      l.residual_in = residual;
      l.gain_in = norm != nullptr;
      return l;
    };
    if (auto first = gemv(la, lb, w.in_dtype(0), kLinearVariants[0])) {
      r.launches.push_back(*first);
      for (size_t v = 1; v < std::size(kLinearVariants); ++v) r.alternatives.push_back(*gemv(la, lb, w.in_dtype(0), kLinearVariants[v]));
      // The same schedules folding in the norm that gives the activations (a decode's).
      if (auto fold = unbatched ? norm_prologue_of(g, n) : std::nullopt) {
        auto normed = std::make_shared<NodeKernels>();
        w.set_extra_dims(fold->dims);
        for (size_t v = 0; v < std::size(kLinearVariants); ++v)
          if (auto l = gemv(&fold->x, lb, DType::F32, kLinearVariants[v], &fold->prologue))
            (v == 0 ? normed->launches : normed->alternatives).push_back(*l);
        const bool all_inline = normed->launches.size() == 1 && normed->alternatives.size() == r.alternatives.size();
        for (LinearVariant v : kLinearVariants) {  // and with the norm staged, where it fits
          v.staged = true;
          if (auto l = gemv(&fold->x, lb, DType::F32, v, &fold->prologue)) normed->alternatives.push_back(*l);
        }
        w.set_extra_dims({});
        if (all_inline) r.normed = normed;
      }
      // Without batch dims (a linear layer), the library may take it for many rows.
      if (unbatched)
        r.linear = LinearOperands{a[rank - 2], w.in_shape(1).back(), a[rank - 1], false, la->offset, la->strides[rank - 2],
                                  lb->offset, lb->strides[rank - 1], w.in_dtype(0), w.in_dtype(1)};
      return r;
    }
    // A linear layer whose activations arrive through a view of several layers: copy them into
    // a contiguous [m, k] scratch first (one cheap pass), then take the paths above.
    const ViewLayer scratch = ViewLayer::contiguous({a[rank - 2], a[rank - 1]});
    if (unbatched && lb && t == DType::F32) {
      std::vector<Expr> b2 = {lb->shape[rank - 2], lb->shape[rank - 1]};
      ViewLayer lb2 = ViewLayer::contiguous(b2);
      lb2.strides = {lb->strides[rank - 2], lb->strides[rank - 1]};
      lb2.offset = lb->offset;
      const std::string copy_count = "  const long long lm_count = " + c(a[rank - 2] * a[rank - 1]) + ";\n";
      if (auto first = gemv(&scratch, &lb2, DType::F32, kLinearVariants[0])) {
        r.scratch_f32 = a[rank - 2] * a[rank - 1];
        r.launches.push_back({w.finish(copy_count + kGridLoop + "    ((float*)lm_out)[lm_z] = (float)lm_ld0(lm_z);\n  }\n", functions),
                              Launch::Grid::Elements, a[rank - 2] * a[rank - 1]});
        w.set_words(true);  // the copy as the library's bf16 words (NodeKernels::words)
        r.words = Launch{w.finish(copy_count + kGridLoop + "    " + w.out_store("lm_z", "(float)lm_ld0(lm_z)", DType::F32) + "  }\n", functions),
                         Launch::Grid::Elements, a[rank - 2] * a[rank - 1]};
        w.set_words(false);
        r.launches.push_back(*first);
        for (size_t v = 1; v < std::size(kLinearVariants); ++v) r.alternatives.push_back(*gemv(&scratch, &lb2, DType::F32, kLinearVariants[v]));
        r.linear = LinearOperands{a[rank - 2], w.in_shape(1).back(), a[rank - 1], true, Expr(0), a[rank - 1],
                                  lb->offset, lb->strides[rank - 1], DType::F32, w.in_dtype(1)};
        return r;
      }
    }
    Acc acc = accumulator(true, t);
    // One warp per output: lanes stride over k, so a weight row [n, k] read transposed and A's
    // row are both read in 128-byte runs; the lanes' partial sums meet in a shuffle tree.
    std::ostringstream s;
    s << warp_per_output(count_decl, a, w.in_shape(1).back())
      << "    " << acc.type << " lm_acc = " << acc.init << ";\n"
      << "    for (long long lm_p = lm_lane; lm_p < lm_kk; lm_p += 32) {\n"
      << product(t, "lm_ld0((lm_b * lm_m + lm_i) * lm_kk + lm_p)", t, "lm_ld1((lm_b * lm_kk + lm_p) * lm_n + lm_j)", w.in_dtype(1), "      ")
      << "      lm_acc += (" << acc.type << ")v0;\n    }\n"
      << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
      << "    if (lm_lane == 0) " << w.out_store("lm_z", acc.result(t), t) << "  }\n";
    r.launches.push_back({w.finish(s.str(), functions), Launch::Grid::Elements, count * 32});
    return r;
  }
  if (k == "ScaledMatmul") {
    const std::vector<Expr>& a = w.in_shape(0);
    const size_t rank = a.size();
    if (rank < 2 || w.in_shape(1).size() != rank || w.in_shape(2).size() != rank || w.in_dtype(0) != DType::F32 || w.in_dtype(2) != DType::F32)
      throw Error("CUDA backend: ScaledMatmul needs f32 a [.., m, k], b [.., k, n] and an f32 scale shaped as a");
    auto store_v = [&](const std::string& at, DType from) { return w.out_store(at, "lm_v", from); };
    const ViewLayer* la = plain_strided(n.inputs[0].view);
    const ViewLayer* lb = plain_strided(n.inputs[1].view);
    const ViewLayer* ls = plain_strided(n.inputs[2].view);
    // The GEMV's schedules (no weight prefetch: which experts a step reads is known only then),
    // each also with a grid of 4 blocks a multiprocessor: a decode's blocks each list the chosen
    // experts before their units, and fewer blocks, each taking more units, list them less often.
    const std::vector<DType> dts = {w.in_dtype(0), w.in_dtype(1), w.in_dtype(2)};
    auto gemv = [&](const LinearVariant& v, int blocks_per_sm) -> std::optional<Launch> {
      auto body = strided_linear_body(la, lb, dts, count_decl, store_v, v, ls);
      if (!body) return std::nullopt;
      Launch l = linear_launch(w.finish(*body, functions), count, v);
      l.blocks_per_sm = blocks_per_sm;
      return l;
    };
    if (auto first = gemv(kLinearVariants[0], 0)) {
      r.launches.push_back(*first);
      for (int cap : {0, 4})
        for (size_t v = cap ? 0 : 1; v < std::size(kLinearVariants); ++v) r.alternatives.push_back(*gemv(kLinearVariants[v], cap));
      // The schedules with an even number of columns a unit again, storing the gated product
      // that is the experts' one reader (NodeKernels::gated): for a decode, whose product then
      // launches nothing (CudaExecutor::gates_experts).
      if (const std::optional<GatedExperts> ge = gated_experts_of(g, id)) {
        const GatedEpilogue epi = gated_epilogue(g, ge->product, ge->half, ge->up_input, graph_dims);
        // Its schedules with an even number of columns a unit (kLinearVariants', then
        // kGatedExpertVariants'), reading A through `x` and, with
        // `norm`, norming it as they load (no staged ones: strided_linear_body has none with a scale).
        // After them, the one-row ones again with their activations loaded early
        // (LinearVariant::early), which the tuner weighs against the plain ones. Each on every
        // grid cap of gated_expert_caps() (the same function, fewer blocks listing the experts).
        const std::vector<int>& caps = gated_expert_caps();
        std::vector<LinearVariant> gated_variants(std::begin(kLinearVariants), std::end(kLinearVariants));
        if (gated_whole_units()) gated_variants.insert(gated_variants.end(), std::begin(kGatedExpertVariants), std::end(kGatedExpertVariants));
        auto gated_schedules = [&](const ViewLayer* x, const NormPrologue* norm) {
          auto k = std::make_shared<NodeKernels>();
          for (bool early : {false, true})
            for (int cap : caps)
              for (LinearVariant v : gated_variants) {
                if (v.cols % 2 != 0 || (early && v.rows != 1)) continue;
                v.early = early;
                auto body = strided_linear_body(x, lb, dts, count_decl, store_v, v, ls, norm, &epi);
                if (!body) continue;
                // Released after the wait: an expert sum launched next may then read the scales
                // before its own (NodeKernels::expert_sum_early).
                const bool after_wait = expert_sums_before_wait();
                const std::string text = after_wait ? "  lm_grid_release();  // after the wait (expert_sum_early)\n" + *body : *body;
                Launch l = linear_launch(w.finish(text, functions, "", kBlockThreads, 0, !after_wait), count, v);
                l.blocks_per_sm = cap;
                l.gain_in = norm && norm->gain;
                (k->launches.empty() ? k->launches : k->alternatives).push_back(l);
              }
          return k;
        };
        std::shared_ptr<NodeKernels> gk = gated_schedules(la, nullptr);
        // And reading the norm that gives the experts' activations (a decode's: the router's
        // GEMV folds it too, so it launches nothing; CudaExecutor::defers_norm).
        if (const std::optional<FoldedNorm> fold = expert_norm_prologue_of(g, n); fold && !gk->launches.empty()) {
          w.set_extra_dims(fold->dims);
          w.set_gain_param(fold->prologue.gain);
          std::shared_ptr<NodeKernels> normed = gated_schedules(&fold->x, &fold->prologue);
          w.set_gain_param(false);
          w.set_extra_dims({});
          if (!normed->launches.empty()) gk->normed = normed;
        }
        if (!gk->launches.empty()) {
          r.gated = gk;
          r.gated_node = ge->product;
        }
      }
      // bf16 weights: also the tensor cores' grouped GEMM, for a prefill's many rows.
      for (const ScaledMmaTile& t : kScaledMmaTiles)
        if (auto mma = scaled_mma_body(la, lb, ls, dts, count_decl, store_v, n.dtype, t, options.bf16_activations)) {
          Launch l{w.finish(*mma, functions), Launch::Grid::Elements, scaled_mma_threads(a, w.in_shape(1).back(), t),
                   Expr(scaled_mma_shared_bytes(t))};
          l.tensor_cores = true;
          r.alternatives.push_back(l);
        }
      return r;
    }
    // Any views: one warp per output, as the Matmul's generic kernel, skipping rows scaled by 0.
    std::ostringstream s;
    s << warp_per_output(count_decl, a, w.in_shape(1).back())
      << "    const float lm_s = lm_ld2((lm_b * lm_m + lm_i) * lm_kk);\n"
      << "    float lm_acc = 0.0f;\n"
      << "    if (lm_s != 0.0f)\n"
      << "      for (long long lm_p = lm_lane; lm_p < lm_kk; lm_p += 32)\n"
      << "        lm_acc += __fmul_rn(__fmul_rn(lm_ld0((lm_b * lm_m + lm_i) * lm_kk + lm_p), lm_s), (float)lm_ld1((lm_b * lm_kk + lm_p) * lm_n + lm_j));\n"
      << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
      << "    if (lm_lane == 0) " << w.out_store("lm_z", "lm_acc", DType::F32) << "  }\n";
    r.launches.push_back({w.finish(s.str(), functions), Launch::Grid::Elements, count * 32});
    return r;
  }
  if (k == "Attention") {
    // Strided keys and values: split over slices of keys (strided_attention), or tiled for a
    // prefill. Otherwise one block per query row, its scores in shared memory (4 bytes a key).
    const std::vector<Expr>& q = w.in_shape(0);
    const size_t rank = q.size();
    const DType t = w.in_dtype(0);
    const Expr keys = w.in_shape(1).back(), seq = q[rank - 2];
    const std::vector<DType> dts = {w.in_dtype(0), w.in_dtype(1), w.in_dtype(2), w.in_dtype(3)};
    if (auto a = strided_attention(n, dts, n.dtype)) {
      const Expr rows = product_of(q, 0, rank - 1), dv = w.in_shape(2).back(), slices = ceil_div(keys, Expr(kAttentionChunk));
      const Expr blocks = product_of(q, 0, rank - 2) * ceil_div(seq, Expr(kAttentionRows)) * slices;
      r.scratch_f32 = rows * slices * (dv + 2);
      // Shared: the group's q rows, their scores in the slice, and each warp's partial rows.
      r.launches.push_back(per_block(a->partial, blocks, (Expr(kAttentionRows) * (Expr(kAttentionChunk) + q[rank - 1] + (kBlockThreads / 32) * dv)) * 4));
      r.launches.push_back({w.finish(a->combine, functions), Launch::Grid::Elements, rows * dv * 32});  // a warp per element
      if (auto once = split_attention_once(n, dts, n.dtype)) {
        w.set_extra_outputs(2);  // the scratch and the counters
        // LUMINAL_CUDA_ATTENTION_PREFETCH=0: no prefetch of the key and value rows before the wait.
        static const bool prefetch = gen::env_switch_on("LUMINAL_CUDA_ATTENTION_PREFETCH");
        const std::string before_wait = prefetch ? split_attention_prefetch(n, dts, blocks) : std::string();
        r.once = Launch{w.finish("  if (blockIdx.x >= " + c(blocks) + ") return;\n" + *once, functions, before_wait), Launch::Grid::Rows, blocks};
        if (options.attention_norms)
          if (const std::optional<AttentionNorms> f = attention_norms(g, id))
            if (const std::optional<gen::AttentionFoldCode> code = gen::attention_fold_code(g, *f))
              if (const std::optional<std::string> body = split_attention_once(n, dts, n.dtype, &*code)) {
                w.set_named_params({"lm_qx", "lm_qg", "lm_qc", "lm_qs", "lm_kx", "lm_kg", "lm_kc", "lm_ks", "lm_vu"});
                w.set_extra_outputs(4);  // the scratch, the counters, then the key and value caches
                std::vector<std::string> dims;
                for (NodeId m : {f->q_norm, f->k_norm, f->k_write, f->v_write})
                  for (const std::string& d : node_dims(g.node(m))) dims.push_back(d);
                w.set_extra_dims(dims);
                r.once_folded = Launch{w.finish("  if (blockIdx.x >= " + c(blocks) + ") return;\n" + *body, functions, before_wait), Launch::Grid::Rows, blocks};
                r.norms = *f;
                w.set_named_params({});
                w.set_extra_dims({});
              }
        w.set_extra_outputs(0);
        r.once_slices = slices;
        r.once_counters = product_of(q, 0, rank - 2) * ceil_div(seq, Expr(kAttentionRows));
        r.once_max_slices = kSplitOnceMaxSlices;
      }
      if (auto tiled = tiled_attention(n, dts, n.dtype)) {
        const Expr blocks = product_of(q, 0, rank - 2) * ceil_div(seq, Expr(kTiledRows));
        r.tiled = per_block(*tiled, blocks, tiled_attention_shared_bytes(n));
        r.tiled_rows = seq;
        r.tiled_keys = keys;
        r.tiled_min_rows = kTiledMinRows;
        if (auto mma = tiled_attention_mma(n, dts, n.dtype, options.bf16_activations)) {
          // Two blocks an SM (128 registers a thread): one block's warps compute while the
          // other's wait at a barrier or for a tile.
          w.set_extra_outputs(1);  // the pre-pass's words
          r.tiled_mma = per_block(*mma, blocks, tiled_attention_mma_shared_bytes(n, options.bf16_activations), Expr(0), 2);
          w.set_extra_outputs(0);
          r.tiled_mma->tensor_cores = true;
          r.tiled_mma_prep = per_block(*tiled_attention_mma_prep(n, dts, options.bf16_activations), tiled_attention_mma_prep_blocks(n), Expr(0));
          r.tiled_mma_prep->tensor_cores = true;
          r.tiled_mma_words = tiled_attention_mma_prep_words(n, options.bf16_activations);
        }
      }
      return r;
    }
    std::ostringstream s;
    s << "  extern __shared__ float lm_sc[];\n"
      << "  const long long lm_seq = " << c(seq) << ", lm_dk = " << c(q[rank - 1]) << ", lm_keys = " << c(keys)
      << ", lm_dv = " << c(w.in_shape(2).back()) << ";\n"
      << "  const long long lm_row = blockIdx.x, lm_b = lm_row / lm_seq;\n"
      // Scores: one warp per key, the lanes over the head dim (q's row and the key's row are
      // read in consecutive runs), a shuffle tree for the sum.
      << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_warps = blockDim.x >> 5;\n"
      << "  for (long long lm_key = lm_warp; lm_key < lm_keys; lm_key += lm_warps) {\n"
      << "    float lm_acc = 0.0f;\n    for (long long lm_p = lm_lane; lm_p < lm_dk; lm_p += 32) {\n"
      << product(t, "lm_ld0(lm_row * lm_dk + lm_p)", t, "lm_ld1((lm_b * lm_dk + lm_p) * lm_keys + lm_key)", w.in_dtype(1), "      ")
      << "      lm_acc += (float)v0;\n    }\n"
      << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
      << "    if (lm_lane != 0) continue;\n"
      << "    const float lm_scaled = " << convert("lm_acc", DType::F32, t) << " * " << float_lit(n.constant) << ";\n"
      << "    lm_sc[lm_key] = lm_ld3(lm_row * lm_keys + lm_key) != 0 ? lm_scaled : __int_as_float((int)0xff800000u);\n  }\n"
      << "  __syncthreads();\n"
      << shared_scores_softmax()
      << "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) lm_sc[lm_key] = lm_sc[lm_key] * lm_rcp;\n"
      << "  __syncthreads();\n"
      << "  for (long long lm_j = threadIdx.x; lm_j < lm_dv; lm_j += blockDim.x) {\n"
      << "    float lm_acc = 0.0f;\n    for (long long lm_key = 0; lm_key < lm_keys; ++lm_key) {\n"
      << product(DType::F32, "lm_sc[lm_key]", DType::F32, "lm_ld2((lm_b * lm_keys + lm_key) * lm_dv + lm_j)", w.in_dtype(2), "      ")
      << "      lm_acc += v0;\n    }\n    " << w.out_store("lm_row * lm_dv + lm_j", "lm_acc", DType::F32) << "  }\n";
    r.launches.push_back(per_block(s.str(), product_of(q, 0, rank - 1), keys * 4));
    return r;
  }
  throw Error("CUDA backend: no kernel for '" + k + "' (known: Fused, FusedSum, FusedMax, Matmul, ScaledMatmul, Softmax, RMSNorm, RMSNormMul, RMSNormRotary, LayerNorm, "
              "Rotary, Where, Attention)");
}

namespace {

// The node that reads a group of two linear layers of equal widths, and is all that reads them:
// an f32 Fused node of exactly their two outputs, each read whole and in order (the gated MLP's
// act(gate) * up).
std::optional<NodeId> gated_product_of(const Graph& g, const std::vector<NodeId>& members, const std::vector<Expr>& widths) {
  if (members.size() != 2 || !(widths[0] == widths[1])) return std::nullopt;
  const std::optional<NodeId> reader = sole_reader(g, members);
  if (!reader) return std::nullopt;
  const Node& p = g.node(*reader);
  if (p.op != OpKind::Kernel || p.kernel != "Fused" || p.dtype != DType::F32 || p.inputs.size() != 2 || p.inputs[0].src == p.inputs[1].src)
    return std::nullopt;
  for (const Edge& e : p.inputs)
    if (!e.view.is_contiguous() || !(e.view.shape() == g.node(e.src).shape) || !(g.node(e.src).shape == p.shape)) return std::nullopt;
  return reader;
}

}  // namespace

std::optional<NodeKernels> emit_grouped_linear(const Graph& g, const std::vector<NodeId>& members,
                                               const std::vector<std::string>& graph_dims, FunctionSet& functions) {
  if (members.size() < 2) return std::nullopt;
  const Node& first = g.node(members[0]);
  const ViewLayer* la = plain_strided(first.inputs[0].view);
  const ViewLayer* lb = plain_strided(first.inputs[1].view);
  if (!la || !lb || first.dtype != DType::F32) return std::nullopt;
  const size_t r = lb->shape.size();
  // Weights as whole row-major [n, k] inputs, so that laid end to end they are one [sum n, k].
  if (r != 2 || !lb->offset.is_const(0) || !lb->strides[0].is_const(1) || !(lb->strides[1] == lb->shape[0])) return std::nullopt;
  // Every member: the same activations, a weight of the same layout, its own n.
  std::vector<Expr> widths;
  for (NodeId id : members) {
    const Node& n = g.node(id);
    const ViewLayer* b = plain_strided(n.inputs[1].view);
    if (n.dtype != DType::F32 || !(n.inputs[0].src == first.inputs[0].src) || !(n.inputs[0].view == first.inputs[0].view) || !b ||
        b->shape.size() != r || g.node(n.inputs[1].src).dtype != g.node(first.inputs[1].src).dtype || !(b->strides == lb->strides) ||
        !(b->offset == lb->offset) || !(b->shape[r - 2] == lb->shape[r - 2]))
      return std::nullopt;
    widths.push_back(b->shape[r - 1]);
  }
  ViewLayer cat = *lb;
  Expr total = 0;
  for (const Expr& w : widths) total = total + w;
  cat.shape[r - 1] = total;
  KernelWriter w(g, members[0], graph_dims);
  w.set_extra_outputs(members.size() - 1);
  // The members' weights are one allocation where the group runs (CudaExecutor::weights_in_place).
  bool preload = weights_before_wait();
  for (NodeId id : members) preload = preload && unwritten_input(g, g.node(id).inputs[1].src);
  const Expr count = product_of(first.shape, 0, first.shape.size() - 1) * total;
  const std::string count_decl = "  const long long lm_count = " + c(count) + ";\n";
  // Element (row, j) of the concatenated output goes to the member whose columns hold j.
  auto store = [&](const std::string& at, DType) {
    std::string s = "{\n        const long long lm_zn = " + c(total) + ", lm_zr = " + at + " / lm_zn;\n        long long lm_zj = " + at +
                    " - lm_zr * lm_zn;\n";
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string wi = c(widths[i]), out = i == 0 ? "lm_out" : "lm_out" + std::to_string(i);
      s += "        if (lm_zj < " + wi + ") { ((float*)" + out + ")[lm_zr * " + wi + " + lm_zj] = lm_v; }\n        else {\n          lm_zj -= " + wi +
           ";\n";
    }
    for (size_t i = 0; i < members.size(); ++i) s += "        }\n";
    return s + "      }\n";
  };
  auto schedules = [&](const ViewLayer* a, const NormPrologue* norm, const GatedEpilogue* gated = nullptr) -> std::optional<NodeKernels> {
    NodeKernels k;
    w.set_gain_param(norm != nullptr);
    // Every schedule; with a norm, each also with the norm staged where that fits (and not
    // required: without a stage the inline one stands).
    for (int pass = 0; pass < (norm ? 2 : 1); ++pass)
      for (LinearVariant v : kLinearVariants) {
        if (gated && v.cols % 2 != 0) continue;  // a unit pairs gate's columns with up's
        v.staged = pass == 1;
        auto body = strided_linear_body(a, &cat, {DType::F32, w.in_dtype(1)}, count_decl, store, v, nullptr, norm, gated, preload);
        if (!body && v.staged) continue;
        if (!body) return std::nullopt;
        std::string before =
            linear_weight_prefetch(a, &cat, w.in_dtype(1), v, linear_prefetch_budget(g.node(first.inputs[0].src)), gated ? &gated->half : nullptr);
        if (preload) before += linear_weight_preload(a, &cat, w.in_dtype(1), count_decl, v, norm, gated);
        Launch l = linear_launch(w.finish(*body, functions, before), count, v);
        l.gain_in = norm != nullptr;
        (k.launches.empty() ? k.launches : k.alternatives).push_back(l);
      }
    w.set_gain_param(false);
    return k;
  };
  if (w.in_dtype(0) != DType::F32) return std::nullopt;
  // The gated product that reads the two members alone, where there is one.
  const std::optional<NodeId> product = gated_product_of(g, members, widths);
  std::optional<GatedEpilogue> gated;
  if (product) gated = gated_epilogue(g, *product, widths[0], g.node(*product).inputs[0].src == members[0] ? 1 : 0, graph_dims);
  std::optional<NodeKernels> k = schedules(la, nullptr);
  if (!k) return std::nullopt;
  auto with_gated = [&](NodeKernels& into, const ViewLayer* a, const NormPrologue* norm) {
    if (!gated) return;
    if (auto gk = schedules(a, norm, &*gated); gk && !gk->launches.empty()) {
      into.gated = std::make_shared<NodeKernels>(std::move(*gk));
      into.gated_node = *product;
    }
  };
  with_gated(*k, la, nullptr);
  // The same folding in the norm that gives the activations (a decode's q/k/v and gate/up).
  if (auto fold = norm_prologue_of(g, first)) {
    w.set_extra_dims(fold->dims);
    if (auto normed = schedules(&fold->x, &fold->prologue)) {
      k->normed = std::make_shared<NodeKernels>(std::move(*normed));
      with_gated(*k->normed, &fold->x, &fold->prologue);
    }
    w.set_extra_dims({});
  }
  return k;
}

}  // namespace luminal::cuda
