#include "backends/cuda/cuda_codegen.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "backends/cpu/fused_codegen.h"
#include "core/cache_paths.h"
#include "core/error.h"
#include "graph/fused_program.h"
#include "runtime/buffer.h"

namespace luminal::cuda {

namespace {

using namespace luminal::cpu::codegen;
using cpu::emit_program;

std::string float_lit(float f) {
  if (f != f) return "__int_as_float(0x7fc00000)";
  if (f == __builtin_inff()) return "__int_as_float(0x7f800000)";
  if (f == -__builtin_inff()) return "__int_as_float((int)0xff800000u)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));  // hex: exact
  return std::string("(float)") + buf;
}

// A literal of value type `t` (float or int32_t) holding v, converted as Cast would.
std::string value_lit(double v, DType t) {
  double c = convert_value(v, t);
  if (is_int(t)) return "(int32_t)(" + std::to_string(static_cast<int64_t>(c)) + "LL)";
  return float_lit(static_cast<float>(c));
}

std::string c(const Expr& e) { return "(" + e.to_c("lm_q") + ")"; }

Expr product_of(const std::vector<Expr>& shape, size_t from, size_t to) {
  Expr p = 1;
  for (size_t d = from; d < to && d < shape.size(); ++d) p = p * shape[d];
  return p;
}

// A one-instruction program: what a primitive elementwise node computes, so that it goes
// through the same emitter (and rounding) as fused kernels.
FusedProgram single(OpKind op, DType out, DType in0, int n_inputs) {
  FusedProgram p;
  p.n_inputs = n_inputs;
  FusedInstr i;
  i.op = static_cast<int>(op);
  i.dtype = out;
  i.in_dtype = in0;
  i.a = 0;
  i.b = n_inputs > 1 ? 1 : -1;
  p.instrs.push_back(i);
  return p;
}

class KernelWriter {
 public:
  KernelWriter(const Graph& g, NodeId id) : g_(g), n_(g.node(id)), dims_(node_dims(g.node(id))) {
    if (dims_.size() > static_cast<size_t>(kMaxKernelDims))
      throw Error("CUDA backend: node " + std::to_string(id) + " uses " + std::to_string(dims_.size()) +
                  " dynamic dims; generated kernels take at most " + std::to_string(kMaxKernelDims));
    for (const Edge& e : n_.inputs) in_dtypes_.push_back(g.node(e.src).dtype);
  }

  const std::vector<std::string>& dims() const { return dims_; }
  DType in_dtype(size_t i) const { return in_dtypes_[i]; }
  const std::vector<Expr>& in_shape(size_t i) const { return n_.inputs[i].view.shape(); }

  // The function's opening: dims as locals, one loader lambda per input (lm_ld<i>(flat index)
  // gives the value through the view, the pad value where the view's mask says so).
  std::string preamble() const {
    std::ostringstream s;
    for (size_t i = 0; i < dims_.size(); ++i) s << "  const long long " << dims_[i] << " = lm_d.v[" << i << "];\n";
    for (size_t i = 0; i < n_.inputs.size(); ++i) {
      const View& v = n_.inputs[i].view;
      IndexExprs ix = v.flat_index();
      DType t = in_dtypes_[i];
      s << "  auto lm_ld" << i << " = [&](long long lm_q) -> " << value_type(t) << " {\n";
      if (!ix.valid.is_const(1)) s << "    if (!" << c(ix.valid) << ") return " << value_lit(v.pad_value(), t) << ";\n";
      s << "    return " << load(t, "((const " + std::string(storage_type(t)) + "*)lm_in" + std::to_string(i) + ")[" + c(ix.index) + "]")
        << ";\n  };\n";
    }
    return s.str();
  }

  // The whole function around `body`, named by a hash of its text; added to `source` once.
  std::string finish(const std::string& body, std::string& source, std::vector<std::string>& defined) const {
    std::ostringstream params;
    params << "(char* __restrict__ lm_out";
    for (size_t i = 0; i < n_.inputs.size(); ++i) params << ", const char* __restrict__ lm_in" << i;
    params << ", LmDims lm_d)";
    std::string text = params.str() + " {\n" + preamble() + body + "}\n";
    std::string name = "lm_" + hash_key(text);
    if (std::find(defined.begin(), defined.end(), name) == defined.end()) {
      defined.push_back(name);
      source += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlockThreads) + ") " + name + text + "\n";
    }
    return name;
  }

  std::string out_store(const std::string& at, const std::string& value, DType from) const {
    return "((" + std::string(storage_type(n_.dtype)) + "*)lm_out)[" + at + "] = " + store(n_.dtype, convert(value, from, n_.dtype)) + ";\n";
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
  std::vector<std::string> dims_;
  std::vector<DType> in_dtypes_;
};

const char* kGridLoop =
    "  for (long long lm_z = blockIdx.x * (long long)blockDim.x + threadIdx.x; lm_z < lm_count;"
    " lm_z += (long long)gridDim.x * blockDim.x) {\n";

// The accumulator of SumReduce / MaxReduce in dtype t, as ReduceAcc keeps it: f32 sums and
// maxima, i32 sums wrapping (unsigned), i32/bool maxima.
struct Acc {
  std::string type, init, combine;  // combine: a lambda (a, b) -> acc
  std::string result(DType t) const {
    if (is_int(t)) return t == DType::Bool ? "(int32_t)(lm_acc != 0)" : "(int32_t)lm_acc";
    return convert("lm_acc", DType::F32, t);
  }
};

Acc accumulator(bool sum, DType t) {
  if (sum && !is_int(t)) return {"float", "0.0f", "[](float a, float b) { return a + b; }"};
  if (sum) return {"unsigned int", "0u", "[](unsigned int a, unsigned int b) { return a + b; }"};
  if (!is_int(t)) return {"float", "__int_as_float((int)0xff800000u)", "lm_fmax_nan"};
  return {"int", t == DType::I32 ? "INT32_MIN" : "0", "[](int a, int b) { return a > b ? a : b; }"};
}

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

// A view of one strided layer: element (c_0, .., c_r-1) sits at offset + sum c_d * stride_d
// (where its mask, if any, lets it through). plain_strided: one such layer without a mask.
const ViewLayer* plain_layer(const View& v) { return v.layers().size() == 1 ? &v.layers()[0] : nullptr; }
const ViewLayer* plain_strided(const View& v) {
  const ViewLayer* l = plain_layer(v);
  return l && !l->masked() ? l : nullptr;
}

// Matmul C[b, i, j] = sum_p A[b, i, p] * B[b, p, j] where both operands are plain strided, A is
// f32 with unit stride along k and B (f32 or bf16) has unit stride along k too: a linear layer,
// B = Wᵀ of a row-major [n, k] weight. One warp per output column j and group of up to four rows
// of A: each lane loads 16 bytes of W's row at a time (8 bf16 or 4 f32) and the matching A
// values, so the weight streams through in full 128-byte lines, read once per group of rows.
// Sums use FMA and a shuffle tree (float rounding, not the reference's order).
std::optional<std::string> strided_linear_body(const ViewLayer* a, const ViewLayer* b, const std::vector<DType>& dt,
                                               const std::string& count_decl,
                                               const std::function<std::string(const std::string&, DType)>& out_store) {
  const size_t r = a ? a->shape.size() : 0;
  if (!a || !b || r < 2 || b->shape.size() != r || dt[0] != DType::F32 || (dt[1] != DType::F32 && dt[1] != DType::BF16)) return std::nullopt;
  if (!a->strides[r - 1].is_const(1) || !b->strides[r - 2].is_const(1)) return std::nullopt;
  const bool bf16 = dt[1] == DType::BF16;
  const int per = bf16 ? 8 : 4;  // W values per 16-byte load
  std::ostringstream s;
  s << count_decl << "  const long long lm_m = " << c(a->shape[r - 2]) << ", lm_kk = " << c(a->shape[r - 1]) << ", lm_n = " << c(b->shape[r - 1])
    << ";\n  const long long lm_groups = (lm_m + 3) / 4, lm_warps = lm_count / lm_m * lm_groups;\n"
    << "  const int lm_lane = threadIdx.x & 31;\n"
    << "  for (long long lm_w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; lm_w < lm_warps;"
       " lm_w += ((long long)gridDim.x * blockDim.x) >> 5) {\n"
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
    << "    long long lm_p0 = 0;\n"
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
  // Four loads in flight per lane before their products: decode is a stream over W, and one
  // outstanding 16-byte load per lane leaves the memory system idle between them.
  s << "      long long lm_p = lm_lane * " << per << ";\n"
    << "      for (; lm_p + 3 * " << step << " + " << per << " <= lm_kk; lm_p += 4 * " << step << ") {\n";
  for (int u = 0; u < 4; ++u)
    s << "        const " << vec << " lm_r" << u << " = __ldg((const " << vec << "*)(lm_B + lm_p + " << u << " * " << step << "));\n";
  for (int u = 0; u < 4; ++u) s << chunk("lm_r" + std::to_string(u), "lm_p + " + std::to_string(u) + " * " + step);
  s << "      }\n"
    << "      for (; lm_p + " << per << " <= lm_kk; lm_p += " << step << ") {\n"
    << "        const " << vec << " lm_r0 = __ldg((const " << vec << "*)(lm_B + lm_p));\n"
    << chunk("lm_r0", "lm_p") << "      }\n"
    << "      lm_p0 = lm_kk;\n    }\n"
    // Unaligned rows: one element per lane per step.
    << "    for (long long lm_p = lm_p0 + lm_lane; lm_p < lm_kk; lm_p += 32) {\n"
    << "      const float lm_wv = " << (bf16 ? "lm_bf16_f32(lm_B[lm_p])" : "lm_B[lm_p]") << ";\n"
    << "      for (int lm_i = 0; lm_i < 4; ++lm_i)\n"
    << "        if (lm_i < lm_rows) lm_acc[lm_i] = __fmaf_rn(lm_A[lm_i * lm_as + lm_p], lm_wv, lm_acc[lm_i]);\n    }\n"
    << "    for (int lm_i = 0; lm_i < 4; ++lm_i) {\n"
    << "      float lm_v = lm_acc[lm_i];\n"
    << "      for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_v += __shfl_xor_sync(0xffffffffu, lm_v, lm_o);\n"
    << "      if (lm_lane == 0 && lm_i < lm_rows) { const long long lm_z = (lm_b * lm_m + lm_g * 4 + lm_i) * lm_n + lm_j; "
    << out_store("lm_z", DType::F32) << "      }\n    }\n  }\n";
  return s.str();
}

// Attention whose keys and values are one strided layer each (the KV cache sliced to the cached
// length; a mask may limit the key and batch dims, never the head dim): one block per query
// row. q's row goes to shared memory once (through its loader: grouped-query views merge dims
// that one stride cannot express); each warp takes a key, its lanes over the head dim, reading
// the key's row in consecutive runs; the softmax stays in shared memory; each thread then takes
// an output column, reading the values' rows in consecutive runs. Addresses come from the
// strides, computed once per key, not through the general index expressions.
std::optional<std::string> strided_attention_body(const Node& n, const std::vector<DType>& dt, DType out_dtype) {
  const ViewLayer* k = plain_layer(n.inputs[1].view);
  const ViewLayer* v = plain_layer(n.inputs[2].view);
  const size_t r = n.inputs[0].view.rank();
  if (!k || !v || r < 2 || k->shape.size() != r || v->shape.size() != r) return std::nullopt;
  if (k->dim_masked(r - 2) || v->dim_masked(r - 1)) return std::nullopt;
  if (is_int(dt[0]) || is_int(dt[1]) || is_int(dt[2])) return std::nullopt;
  const DType t = dt[0];
  auto valid = [&](const ViewLayer& l, size_t skip, const std::string& key_coord, size_t key_dim) {
    std::string cond = "true";
    for (size_t d = 0; d < r; ++d) {
      if (d == skip || !l.dim_masked(d)) continue;
      std::string x = d == key_dim ? key_coord : "lm_bc[" + std::to_string(d) + "]";
      cond += " && " + x + " >= " + c(l.mask_lo[d]) + " && " + x + " < " + c(l.mask_hi[d]);
    }
    return cond;
  };
  auto base = [&](const ViewLayer& l, const std::string& key_coord, size_t key_dim, size_t skip) {
    std::string b = c(l.offset);
    for (size_t d = 0; d < r; ++d) {
      if (d == skip) continue;
      std::string x = d == key_dim ? key_coord : "lm_bc[" + std::to_string(d) + "]";
      b += " + " + x + " * " + c(l.strides[d]);
    }
    return b;
  };
  const std::string ks = storage_type(dt[1]), vs = storage_type(dt[2]);
  std::ostringstream s;
  s << "  extern __shared__ float lm_sh[];\n"
    << "  const long long lm_seq = " << c(n.inputs[0].view.shape()[r - 2]) << ", lm_dk = " << c(n.inputs[0].view.shape()[r - 1])
    << ", lm_keys = " << c(k->shape[r - 1]) << ", lm_dv = " << c(v->shape[r - 1]) << ";\n"
    << "  float* lm_q = lm_sh;\n  float* lm_sc = lm_sh + lm_dk;\n"
    << "  const long long lm_row = blockIdx.x, lm_b = lm_row / lm_seq;\n"
    << "  long long lm_bc[" << r << "] = {};\n"
    << "  { long long lm_rem = lm_b;\n"
    << "    for (int lm_d = " << static_cast<long>(r) - 3 << "; lm_d >= 0; --lm_d) { const long long lm_sz = lm_shape_of(lm_d); lm_bc[lm_d] = lm_rem % lm_sz; lm_rem /= lm_sz; } }\n"
    << "  for (long long lm_p = threadIdx.x; lm_p < lm_dk; lm_p += blockDim.x) lm_q[lm_p] = (float)lm_ld0(lm_row * lm_dk + lm_p);\n"
    << "  __syncthreads();\n"
    << "  const int lm_lane = threadIdx.x & 31, lm_warp = threadIdx.x >> 5, lm_warps = blockDim.x >> 5;\n"
    << "  const " << ks << "* lm_K = (const " << ks << "*)lm_in1;\n  const " << vs << "* lm_V = (const " << vs << "*)lm_in2;\n"
    << "  const long long lm_ksp = " << c(k->strides[r - 2]) << ", lm_vsj = " << c(v->strides[r - 1]) << ";\n"
    // A masked key's score is -inf whatever its row holds: its row is not read (half the
    // keys of a causal prefill).
    << "  for (long long lm_key = lm_warp; lm_key < lm_keys; lm_key += lm_warps) {\n"
    << "    if (lm_ld3(lm_row * lm_keys + lm_key) == 0) {\n"
    << "      if (lm_lane == 0) lm_sc[lm_key] = __int_as_float((int)0xff800000u);\n      continue;\n    }\n"
    << "    const bool lm_ok = " << valid(*k, r - 2, "lm_key", r - 1) << ";\n"
    << "    const long long lm_kb = " << base(*k, "lm_key", r - 1, r - 2) << ";\n"
    << "    float lm_acc = 0.0f;\n"
    << "    for (long long lm_p = lm_lane; lm_p < lm_dk; lm_p += 32) {\n"
    << "      const float lm_kv = lm_ok ? " << load(dt[1], "lm_K[lm_kb + lm_p * lm_ksp]") << " : " << value_lit(n.inputs[1].view.pad_value(), dt[1]) << ";\n"
    << "      lm_acc = __fmaf_rn(" << convert("lm_q[lm_p]", DType::F32, t) << ", lm_kv, lm_acc);\n    }\n"
    << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
    << "    if (lm_lane != 0) continue;\n"
    << "    const float lm_scaled = " << convert("lm_acc", DType::F32, t) << " * " << float_lit(n.constant) << ";\n"
    << "    lm_sc[lm_key] = lm_scaled;\n  }\n"
    << "  __syncthreads();\n"
    << "  float lm_mx = __int_as_float((int)0xff800000u);\n"
    << "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) lm_mx = lm_fmax_nan(lm_mx, lm_sc[lm_key]);\n"
    << "  lm_mx = lm_block_reduce(lm_mx, lm_fmax_nan);\n  const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
    << "  float lm_sum = 0.0f;\n"
    << "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) {\n"
    << "    const float lm_e = exp2f((lm_sc[lm_key] + lm_mx * -1.0f) * lm_log2e);\n    lm_sc[lm_key] = lm_e;\n    lm_sum += lm_e;\n  }\n"
    << "  lm_sum = lm_block_reduce(lm_sum, [](float a, float b) { return a + b; });\n  const float lm_rcp = 1.0f / lm_sum;\n"
    << "  __syncthreads();\n"
    // Values: each warp takes every warps-th key and its lanes four consecutive output columns
    // each (a warp reads a value row's 128 columns in one run); masked keys (probability 0)
    // are skipped; the warps' partial rows meet in shared memory.
    << "  float* lm_part = lm_sc + lm_keys;\n"
    << "  for (long long lm_j0 = 0; lm_j0 < lm_dv; lm_j0 += 128) {\n"
    << "    float lm_a[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
    << "    for (long long lm_key = lm_warp; lm_key < lm_keys; lm_key += lm_warps) {\n"
    << "      const float lm_pr = lm_sc[lm_key] * lm_rcp;\n"
    << "      if (lm_pr == 0.0f) continue;\n"
    << "      const bool lm_ok = " << valid(*v, r - 1, "lm_key", r - 2) << ";\n"
    << "      const long long lm_vb = " << base(*v, "lm_key", r - 2, r - 1) << ";\n"
    << "      for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "        const long long lm_j = lm_j0 + lm_lane * 4 + lm_e;\n"
    << "        if (lm_j >= lm_dv) break;\n"
    << "        const float lm_vv = lm_ok ? " << load(dt[2], "lm_V[lm_vb + lm_j * lm_vsj]") << " : "
    << value_lit(n.inputs[2].view.pad_value(), dt[2]) << ";\n"
    << "        lm_a[lm_e] = __fmaf_rn(lm_pr, lm_vv, lm_a[lm_e]);\n      }\n    }\n"
    << "    for (int lm_e = 0; lm_e < 4; ++lm_e) {\n"
    << "      const long long lm_j = lm_j0 + lm_lane * 4 + lm_e;\n"
    << "      if (lm_j < lm_dv) lm_part[lm_warp * lm_dv + lm_j] = lm_a[lm_e];\n    }\n  }\n"
    << "  __syncthreads();\n"
    << "  for (long long lm_j = threadIdx.x; lm_j < lm_dv; lm_j += blockDim.x) {\n"
    << "    float lm_acc = 0.0f;\n    for (int lm_w = 0; lm_w < lm_warps; ++lm_w) lm_acc += lm_part[lm_w * lm_dv + lm_j];\n"
    << "    ((" << storage_type(out_dtype) << "*)lm_out)[lm_row * lm_dv + lm_j] = " << store(out_dtype, convert("lm_acc", DType::F32, out_dtype)) << ";\n  }\n";
  // The batch dims' sizes, for splitting the batch index into coordinates.
  std::string shape_fn = "  auto lm_shape_of = [&](int lm_d) -> long long {\n    switch (lm_d) {\n";
  for (size_t d = 0; d + 2 < r; ++d) shape_fn += "      case " + std::to_string(d) + ": return " + c(k->shape[d]) + ";\n";
  shape_fn += "      default: return 1;\n    }\n  };\n";
  return shape_fn + s.str();
}

}  // namespace

std::string cuda_prelude() {
  return "typedef int int32_t;\ntypedef unsigned int uint32_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned char uint8_t;\n"
         "typedef long long int64_t;\n"
         // The CPU generator's literals, and quiet about the loaders a kernel does not call.
         "#define __builtin_inff() __int_as_float(0x7f800000)\n#define __builtin_nanf(x) __int_as_float(0x7fc00000)\n"
         "#pragma nv_diag_suppress 177\n#pragma nv_diag_suppress 550\n#define INT32_MAX 2147483647\n#define INT32_MIN (-2147483647 - 1)\n" +
         Expr::c_prelude() + "struct LmDims { long long v[" + std::to_string(kMaxKernelDims) + "]; };\n" + R"(
__device__ __forceinline__ float lm_bf16_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ uint16_t lm_f32_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
__device__ __forceinline__ float lm_round_bf16(float f) { return lm_bf16_f32(lm_f32_bf16(f)); }
__device__ __forceinline__ float lm_f16_f32(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ uint16_t lm_f32_f16(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
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
// Every thread of the block gets f over all threads' values (blockDim.x a multiple of 32).
template <class T, class F>
__device__ T lm_block_reduce(T v, F f) {
  __shared__ T lm_red[32];
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // an earlier reduction's readers are done with lm_red
  if (lane == 0) lm_red[warp] = v;
  __syncthreads();
  v = lm_red[0];
  for (int w = 1; w < warps; ++w) v = f(v, lm_red[w]);
  return v;
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

NodeKernels emit_node_kernels(const Graph& g, NodeId id, std::string& source, std::vector<std::string>& defined) {
  const Node& n = g.node(id);
  KernelWriter w(g, id);
  NodeKernels r;
  r.dims = w.dims();
  const Expr count = product_of(n.shape, 0, n.shape.size());
  const std::string count_decl = "  const long long lm_count = " + c(count) + ";\n";
  auto elementwise = [&](const std::string& per_element) {
    std::string body = count_decl + kGridLoop + per_element + "  }\n";
    r.launches.push_back({w.finish(body, source, defined), Launch::Grid::Elements, count});
  };
  auto rows = [&](const std::string& body, const Expr& work, const Expr& shared = Expr(0)) {
    r.launches.push_back({w.finish(body, source, defined), Launch::Grid::Rows, work, shared});
  };

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
    r.launches.push_back({w.finish(body, source, defined), Launch::Grid::Elements, src_count});
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
    std::ostringstream s;
    s << row_opening(w.in_shape(0), n.axis) << "  " << acc.type << " lm_acc = " << acc.init << ";\n"
      << "  for (long long lm_k = threadIdx.x; lm_k < lm_len; lm_k += blockDim.x) {\n";
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
    s << "  }\n  lm_acc = lm_block_reduce(lm_acc, " << acc.combine << ");\n  if (threadIdx.x != 0) return;\n"
      << "  const " << value_type(t) << " lm_r = " << acc.result(t) << ";\n";
    if (epi) {
      std::vector<DType> dt{t};
      for (int i = 1; i < epi->n_inputs; ++i) dt.push_back(w.in_dtype(static_cast<size_t>(pro->n_inputs + i - 1)));
      auto input = [&](int k) { return k == 0 ? std::string("lm_r") : "lm_ld" + std::to_string(pro->n_inputs + k - 1) + "(lm_row)"; };
      if (!emit_program(s, *epi, input, dt, "e", "  ")) throw Error("CUDA backend: cannot generate the epilogue of a fused reduction");
      s << "  " << w.out_store("lm_row", "e" + std::to_string(epi->instrs.size() - 1), epi->instrs.back().dtype);
    } else {
      s << "  " << w.out_store("lm_row", "lm_r", t);
    }
    rows(s.str(), rows_of(w.in_shape(0), n.axis));
    return r;
  }
  if (op != OpKind::Kernel) throw Error(std::string("CUDA backend: no kernel for op ") + op_name(op));

  const std::string& k = n.kernel;
  if (k == "Fused") return elementwise(w.program_at(FusedProgram::decode(n.code), "lm_z", "    ")), r;
  if (k == "Where") {
    return elementwise("    if (lm_ld0(lm_z) != 0) " + w.out_store("lm_z", "lm_ld1(lm_z)", w.in_dtype(1)) + "    else " +
                       w.out_store("lm_z", "lm_ld2(lm_z)", w.in_dtype(2))),
           r;
  }
  if (k == "Rotary") {
    const Expr d = w.in_shape(0).back();
    std::string body = "    const long long lm_dd = " + c(d) + ", lm_half = lm_dd / 2, lm_j = lm_z % lm_dd, lm_base = lm_z - lm_j;\n"
                       "    const float lm_x = (float)lm_ld0(lm_z);\n"
                       "    const float lm_rot = lm_j < lm_dd - lm_half ? -(float)lm_ld0(lm_base + lm_j + lm_half)"
                       " : (float)lm_ld0(lm_base + lm_j - (lm_dd - lm_half));\n"
                       "    const float lm_a = lm_x * (float)lm_ld1(lm_z), lm_b = lm_rot * (float)lm_ld2(lm_z);\n    " +
                       w.out_store("lm_z", "lm_a + lm_b", DType::F32);
    return elementwise(body), r;
  }
  if (k == "Softmax" || k == "RMSNorm" || k == "LayerNorm") {
    std::ostringstream s;
    s << row_opening(w.in_shape(0), n.axis) << "  const float lm_inv_n = 1.0f / (float)lm_len;\n";
    const char* loop = "  for (long long lm_k = threadIdx.x; lm_k < lm_len; lm_k += blockDim.x) {\n";
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
      s << "  auto lm_x = [&](long long lm_k) { return " << x << "; };\n"
        << "  float lm_ss = 0.0f;\n" << loop << "    const float lm_v = lm_x(lm_k);\n    lm_ss += lm_v * lm_v;\n  }\n"
        << "  lm_ss = lm_block_reduce(lm_ss, [](float a, float b) { return a + b; });\n"
        << "  const float lm_scale = 1.0f / sqrtf(lm_ss * lm_inv_n + " << float_lit(n.constant) << ");\n"
        << loop << "    " << w.out_store("lm_at(lm_k)", "lm_x(lm_k) * lm_scale", DType::F32) << "  }\n";
    }
    rows(s.str(), rows_of(w.in_shape(0), n.axis));
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
    auto store_v = [&](const std::string& at, DType from) { return w.out_store(at, "lm_v", from); };
    const ViewLayer* la = plain_strided(n.inputs[0].view);
    const ViewLayer* lb = plain_strided(n.inputs[1].view);
    bool unbatched = true;
    for (size_t d = 0; d + 2 < rank; ++d) unbatched = unbatched && a[d].is_const(1);
    if (auto body = strided_linear_body(la, lb, {w.in_dtype(0), w.in_dtype(1)}, count_decl, store_v)) {
      r.launches.push_back({w.finish(*body, source, defined), Launch::Grid::Elements, count * 32});
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
      auto body = strided_linear_body(&scratch, &lb2, {DType::F32, w.in_dtype(1)}, count_decl, store_v);
      if (body) {
        r.scratch_f32 = a[rank - 2] * a[rank - 1];
        r.launches.push_back({w.finish(copy_count + kGridLoop + "    ((float*)lm_out)[lm_z] = (float)lm_ld0(lm_z);\n  }\n", source, defined),
                              Launch::Grid::Elements, a[rank - 2] * a[rank - 1]});
        r.launches.push_back({w.finish(*body, source, defined), Launch::Grid::Elements, count * 32});
        r.linear = LinearOperands{a[rank - 2], w.in_shape(1).back(), a[rank - 1], true, Expr(0), a[rank - 1],
                                  lb->offset, lb->strides[rank - 1], DType::F32, w.in_dtype(1)};
        return r;
      }
    }
    Acc acc = accumulator(true, t);
    // One warp per output: lanes stride over k, so a weight row [n, k] read transposed and A's
    // row are both read in 128-byte runs; the lanes' partial sums meet in a shuffle tree.
    std::ostringstream s;
    s << count_decl << "  const long long lm_m = " << c(a[rank - 2]) << ", lm_kk = " << c(a[rank - 1]) << ", lm_n = " << c(w.in_shape(1).back())
      << ";\n  const int lm_lane = threadIdx.x & 31;\n"
      << "  for (long long lm_z = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; lm_z < lm_count;"
         " lm_z += ((long long)gridDim.x * blockDim.x) >> 5) {\n"
      << "    const long long lm_j = lm_z % lm_n, lm_r = lm_z / lm_n, lm_i = lm_r % lm_m, lm_b = lm_r / lm_m;\n"
      << "    " << acc.type << " lm_acc = " << acc.init << ";\n"
      << "    for (long long lm_p = lm_lane; lm_p < lm_kk; lm_p += 32) {\n"
      << product(t, "lm_ld0((lm_b * lm_m + lm_i) * lm_kk + lm_p)", t, "lm_ld1((lm_b * lm_kk + lm_p) * lm_n + lm_j)", w.in_dtype(1), "      ")
      << "      lm_acc += (" << acc.type << ")v0;\n    }\n"
      << "    for (int lm_o = 16; lm_o > 0; lm_o >>= 1) lm_acc += __shfl_xor_sync(0xffffffffu, lm_acc, lm_o);\n"
      << "    if (lm_lane == 0) " << w.out_store("lm_z", acc.result(t), t) << "  }\n";
    r.launches.push_back({w.finish(s.str(), source, defined), Launch::Grid::Elements, count * 32});
    return r;
  }
  if (k == "Attention") {
    // One block per query row: its scores live in shared memory (4 bytes per key). Decode has
    // few rows (one per head): splitting the keys over blocks is the next step.
    const std::vector<Expr>& q = w.in_shape(0);
    const size_t rank = q.size();
    const DType t = w.in_dtype(0);
    const Expr keys = w.in_shape(1).back(), seq = q[rank - 2];
    if (auto body = strided_attention_body(n, {w.in_dtype(0), w.in_dtype(1), w.in_dtype(2), w.in_dtype(3)}, n.dtype)) {
      // Shared: q's row, the scores, and each warp's partial output row.
      rows(*body, product_of(q, 0, rank - 1), (keys + q[rank - 1] + (kBlockThreads / 32) * w.in_shape(2).back()) * 4);
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
      << "  float lm_mx = __int_as_float((int)0xff800000u);\n"
      << "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) lm_mx = lm_fmax_nan(lm_mx, lm_sc[lm_key]);\n"
      << "  lm_mx = lm_block_reduce(lm_mx, lm_fmax_nan);\n  const float lm_log2e = " << float_lit(1.4426950408889634f) << ";\n"
      << "  float lm_sum = 0.0f;\n"
      << "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) {\n"
      << "    const float lm_e = exp2f((lm_sc[lm_key] + lm_mx * -1.0f) * lm_log2e);\n    lm_sc[lm_key] = lm_e;\n    lm_sum += lm_e;\n  }\n"
      << "  lm_sum = lm_block_reduce(lm_sum, [](float a, float b) { return a + b; });\n  const float lm_rcp = 1.0f / lm_sum;\n"
      << "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) lm_sc[lm_key] = lm_sc[lm_key] * lm_rcp;\n"
      << "  __syncthreads();\n"
      << "  for (long long lm_j = threadIdx.x; lm_j < lm_dv; lm_j += blockDim.x) {\n"
      << "    float lm_acc = 0.0f;\n    for (long long lm_key = 0; lm_key < lm_keys; ++lm_key) {\n"
      << product(DType::F32, "lm_sc[lm_key]", DType::F32, "lm_ld2((lm_b * lm_keys + lm_key) * lm_dv + lm_j)", w.in_dtype(2), "      ")
      << "      lm_acc += v0;\n    }\n    " << w.out_store("lm_row * lm_dv + lm_j", "lm_acc", DType::F32) << "  }\n";
    rows(s.str(), product_of(q, 0, rank - 1), keys * 4);
    return r;
  }
  throw Error("CUDA backend: no kernel for '" + k + "' (known: Fused, FusedSum, FusedMax, Matmul, Softmax, RMSNorm, LayerNorm, "
              "Rotary, Where, Attention)");
}

}  // namespace luminal::cuda
