#include "backends/cuda/cuda_codegen_parts.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "runtime/buffer.h"
#include "backends/cpu/fused_codegen.h"

namespace luminal::cuda::gen {

using namespace luminal::cpu::codegen;

std::string float_lit(float f) {
  if (f != f) return "__int_as_float(0x7fc00000)";
  if (f == __builtin_inff()) return "__int_as_float(0x7f800000)";
  if (f == -__builtin_inff()) return "__int_as_float((int)0xff800000u)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));  // hex: exact
  return std::string("(float)") + buf;
}

std::string value_lit(double v, DType t) {
  double c = convert_value(v, t);
  if (is_int(t)) return "(int32_t)(" + std::to_string(static_cast<int64_t>(c)) + "LL)";
  return float_lit(static_cast<float>(c));
}

std::string Acc::result(DType t) const {
  if (is_int(t)) return t == DType::Bool ? "(int32_t)(lm_acc != 0)" : "(int32_t)lm_acc";
  return convert("lm_acc", DType::F32, t);
}

Acc accumulator(bool sum, DType t) {
  if (sum && !is_int(t)) return {"float", "0.0f", "[](float a, float b) { return a + b; }"};
  if (sum) return {"unsigned int", "0u", "[](unsigned int a, unsigned int b) { return a + b; }"};
  if (!is_int(t)) return {"float", "__int_as_float((int)0xff800000u)", "lm_fmax_nan"};
  return {"int", t == DType::I32 ? "INT32_MIN" : "0", "[](int a, int b) { return a > b ? a : b; }"};
}

std::string c(const Expr& e) { return "(" + e.to_c("lm_q") + ")"; }

Expr product_of(const std::vector<Expr>& shape, size_t from, size_t to) {
  Expr p = 1;
  for (size_t d = from; d < to && d < shape.size(); ++d) p = p * shape[d];
  return p;
}

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

const ViewLayer* plain_layer(const View& v) { return v.layers().size() == 1 ? &v.layers()[0] : nullptr; }
const ViewLayer* plain_strided(const View& v) {
  const ViewLayer* l = plain_layer(v);
  return l && !l->masked() ? l : nullptr;
}

std::string shared_scores_softmax() {
  return "  float lm_mx = __int_as_float((int)0xff800000u);\n"
         "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) lm_mx = lm_fmax_nan(lm_mx, lm_sc[lm_key]);\n"
         "  lm_mx = lm_block_reduce(lm_mx, lm_fmax_nan);\n  const float lm_log2e = " + float_lit(1.4426950408889634f) + ";\n"
         "  float lm_sum = 0.0f;\n"
         "  for (long long lm_key = threadIdx.x; lm_key < lm_keys; lm_key += blockDim.x) {\n"
         "    const float lm_e = exp2f((lm_sc[lm_key] + lm_mx * -1.0f) * lm_log2e);\n    lm_sc[lm_key] = lm_e;\n    lm_sum += lm_e;\n  }\n"
         "  lm_sum = lm_block_reduce(lm_sum, [](float a, float b) { return a + b; });\n  const float lm_rcp = 1.0f / lm_sum;\n";
}

std::string batch_offsets(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const std::string& in) {
  const size_t r = a->shape.size();
  std::string s = in + "{ long long lm_rem = lm_b;\n";
  for (size_t d = r - 2; d-- > 0;)
    s += in + "  { const long long lm_c = lm_rem % " + c(a->shape[d]) + "; lm_rem /= " + c(a->shape[d]) + "; lm_ao += lm_c * " + c(a->strides[d]) +
         "; lm_bo += lm_c * " + c(b->strides[d]) + ";" + (scale ? " lm_so += lm_c * " + c(scale->strides[d]) + ";" : "") + " }\n";
  return s + in + "}\n";
}

bool multiple_of(const Expr& e, int64_t n) {
  const std::optional<int64_t> v = e.as_const();
  return v && *v % n == 0;
}

bool env_switch_on(const char* name) {
  const char* e = std::getenv(name);
  return !(e && std::string(e) == "0");
}

bool env_switch_set(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) == "1";
}

std::string dims_before_wait(const std::vector<std::string>& dims) {
  static const bool on = env_switch_on("LUMINAL_CUDA_DIMS_BEFORE_WAIT");
  if (!on || dims.empty()) return "";
  std::string any;
  for (const std::string& d : dims) any += (any.empty() ? "" : " | ") + d;
  return "  if ((" + any + ") < 0) __trap();  // the dims loaded before the wait\n";
}

bool one_token_groups() {
  static const bool on = env_switch_on("LUMINAL_CUDA_ONE_TOKEN_GROUPS");
  return on;
}

std::string last_block_count(const std::string& counter, const std::string& last, bool release) {
  if (release)
    return "  __syncthreads();\n"
           "  if (threadIdx.x == 0) {\n"
           "    const unsigned lm_prev = lm_atom_add1_acq_rel_gpu(" + counter + ");\n"
           "    lm_last = lm_prev == (unsigned)(" + last + ");\n"
           "    if (lm_last) *(" + counter + ") = 0u;  // ready for the next launch\n  }\n"
           "  __syncthreads();\n"
           "  if (!lm_last) return;\n";
  return "  __threadfence();\n  __syncthreads();\n"
         "  if (threadIdx.x == 0) {\n"
         "    lm_last = atomicAdd(" + counter + ", 1u) == (unsigned)(" + last + ");\n"
         "    if (lm_last) *(" + counter + ") = 0u;  // ready for the next launch\n  }\n"
         "  __syncthreads();\n"
         "  if (!lm_last) return;\n"
         "  __threadfence();\n";
}

std::string grid_barrier(const std::string& sync) {
  return "  __syncthreads();\n"
         "  if (threadIdx.x == 0) {\n"
         "    const unsigned lm_gen = lm_ld_relaxed_gpu(" + sync + " + 1);\n"
         "    const unsigned lm_old = lm_atom_inc_acq_rel_gpu(" + sync + ", gridDim.x - 1);\n"
         "    if (lm_old == gridDim.x - 1) lm_st_release_gpu(" + sync + " + 1, lm_gen + 1);\n"
         "    else while (lm_ld_acquire_gpu(" + sync + " + 1) == lm_gen) {}\n"
         "  }\n  __syncthreads();\n";
}

// The read is the caller's to check.
std::optional<FoldedNorm> folded_norm(const Graph& g, NodeId id) {
  const Node& p = g.node(id);
  if (p.op != OpKind::Kernel || (p.kernel != "RMSNormMul" && p.kernel != "RMSNorm") || p.dtype != DType::F32 || p.shape.empty() ||
      p.axis + 1 != p.shape.size())
    return std::nullopt;
  const ViewLayer* x = plain_strided(p.inputs[0].view);
  if (!x || g.node(p.inputs[0].src).dtype != DType::F32 || !x->strides.back().is_const(1) || !(x->shape == p.shape)) return std::nullopt;
  std::vector<Expr> used = {x->offset};
  used.insert(used.end(), x->strides.begin(), x->strides.end());
  NormPrologue pro;
  pro.eps = p.constant;
  pro.gain = p.kernel == "RMSNormMul";
  if (pro.gain) {
    const ViewLayer* gl = plain_strided(p.inputs[1].view);
    pro.gain_dtype = g.node(p.inputs[1].src).dtype;
    if (!gl || !gl->strides.back().is_const(1)) return std::nullopt;
    for (size_t d = 0; d + 1 < gl->strides.size(); ++d)
      if (!gl->strides[d].is_const(0) && !gl->shape[d].is_const(1)) return std::nullopt;
    pro.gain_offset = gl->offset;
    used.push_back(gl->offset);
  }
  std::set<std::string> dims;
  for (const Expr& e : used)
    for (const std::string& d : e.dims()) dims.insert(d);
  return FoldedNorm{*x, pro, {dims.begin(), dims.end()}};
}

std::optional<FoldedNorm> norm_prologue_of(const Graph& g, const Node& mm) {
  const Node& p = g.node(mm.inputs[0].src);
  const View& read = mm.inputs[0].view;
  if (mm.inputs[1].src == mm.inputs[0].src || !read.is_contiguous() || !(read.shape() == p.shape)) return std::nullopt;
  return folded_norm(g, mm.inputs[0].src);
}


}  // namespace luminal::cuda::gen
