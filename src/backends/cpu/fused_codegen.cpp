#include "backends/cpu/fused_codegen.h"

#include <sstream>

#include "backends/cpu/fused_exp2.h"

namespace luminal::cpu {

namespace codegen {

// Values live as float (f32, f16, bf16: already rounded to their precision) or int32_t (i32;
// bool as 0/1).
bool is_int(DType t) { return t == DType::I32 || t == DType::Bool; }
const char* value_type(DType t) { return is_int(t) ? "int32_t" : "float"; }

const char* storage_type(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F16: case DType::BF16: return "uint16_t";
    case DType::I32: return "int32_t";
    case DType::Bool: return "uint8_t";
  }
  return "?";
}

// `v`, a value of dtype `from`, converted to dtype `to` as core/dtype and convert_value do.
std::string convert(const std::string& v, DType from, DType to) {
  if (from == to) return v;
  switch (to) {
    case DType::F32: return is_int(from) ? "(float)(" + v + ")" : v;
    case DType::F16: return "lm_round_f16((float)(" + v + "))";
    case DType::BF16: return "lm_round_bf16((float)(" + v + "))";
    case DType::I32: return is_int(from) ? v : "lm_f2i(" + v + ")";
    case DType::Bool: return "(int32_t)((" + v + ") != 0)";
  }
  return v;
}

std::string load(DType t, const std::string& ptr_elem) {
  switch (t) {
    case DType::F32: case DType::I32: return ptr_elem;
    case DType::BF16: return "lm_bf16_f32(" + ptr_elem + ")";
    case DType::F16: return "lm_f16_f32(" + ptr_elem + ")";
    case DType::Bool: return "(int32_t)(" + ptr_elem + " != 0)";
  }
  return ptr_elem;
}

std::string store(DType t, const std::string& v) {
  switch (t) {
    case DType::F32: case DType::I32: return v;
    case DType::BF16: return "lm_f32_bf16(" + v + ")";
    case DType::F16: return "lm_f32_f16(" + v + ")";
    case DType::Bool: return "(uint8_t)(" + v + " != 0)";
  }
  return v;
}

}  // namespace codegen

namespace {

using namespace codegen;

std::string float_literal(float f) {
  if (f != f) return "__builtin_nanf(\"\")";
  if (f == __builtin_inff()) return "__builtin_inff()";
  if (f == -__builtin_inff()) return "(-__builtin_inff())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));  // hex: exact
  return std::string("(float)") + buf;
}

// One instruction's expression over operands `a` and `b` (already values of their dtypes).
std::optional<std::string> instr_expr(const FusedInstr& in, const std::string& a, DType ta, const std::string& b, DType tb) {
  OpKind op = static_cast<OpKind>(in.op);
  if (op == OpKind::Cast) return convert(a, ta, in.dtype);
  if (is_unary(op)) {
    if (is_int(ta)) return std::nullopt;
    std::string x = "(float)(" + a + ")";
    switch (op) {
      case OpKind::Exp2: return "lm_exp2f(" + x + ")";
      case OpKind::Log2: return "log2f(" + x + ")";
      case OpKind::Sin: return "sinf(" + x + ")";
      case OpKind::Sqrt: return "sqrtf(" + x + ")";
      case OpKind::Recip: return "(1.0f / " + x + ")";
      default: return std::nullopt;
    }
  }
  if (!is_binary(op)) return std::nullopt;
  // The right operand takes the left's dtype (the instruction's in_dtype).
  DType t = in.in_dtype;
  std::string x = convert(a, ta, t), y = convert(b, tb, t);
  if (op == OpKind::LessThan) return "(int32_t)(" + x + " < " + y + ")";
  if (!is_int(t)) {
    if (op == OpKind::Add) return "(" + x + " + " + y + ")";
    if (op == OpKind::Mul) return "(" + x + " * " + y + ")";
    if (op == OpKind::Mod) return "fmodf(" + x + ", " + y + ")";
  } else if (t == DType::I32) {
    if (op == OpKind::Add) return "(int32_t)((uint32_t)(" + x + ") + (uint32_t)(" + y + "))";
    if (op == OpKind::Mul) return "(int32_t)((uint32_t)(" + x + ") * (uint32_t)(" + y + "))";
    if (op == OpKind::Mod) return "lm_imod(" + x + ", " + y + ")";
  } else {
    if (op == OpKind::Add) return "(int32_t)((" + x + ") || (" + y + "))";
    if (op == OpKind::Mul) return "(int32_t)((" + x + ") && (" + y + "))";
  }
  return std::nullopt;
}

}  // namespace

using namespace codegen;

bool emit_program(std::ostream& s, const FusedProgram& p, const std::function<std::string(int)>& input,
                  const std::vector<DType>& input_dtypes, const std::string& prefix, const std::string& indent) {
  const int n_in = p.n_inputs;
  if (static_cast<int>(input_dtypes.size()) != n_in || p.instrs.empty()) return false;
  auto operand = [&](int k) { return k < n_in ? input(k) : prefix + std::to_string(k - n_in); };
  auto operand_dtype = [&](int k) {
    return k < n_in ? input_dtypes[static_cast<size_t>(k)] : p.instrs[static_cast<size_t>(k - n_in)].dtype;
  };
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const FusedInstr& in = p.instrs[k];
    std::string expr;
    if (in.op == FusedInstr::kConst) {
      expr = convert(float_literal(in.value), DType::F32, in.dtype);
    } else {
      OpKind op = static_cast<OpKind>(in.op);
      bool binary = is_binary(op);
      if (in.a < 0 || in.a >= n_in + static_cast<int>(k) || (binary && (in.b < 0 || in.b >= n_in + static_cast<int>(k))))
        return false;
      auto e = instr_expr(in, operand(in.a), operand_dtype(in.a), binary ? operand(in.b) : "", binary ? operand_dtype(in.b) : DType::F32);
      if (!e) return false;
      // The result rounds to the instruction's dtype, as the unfused node would store it
      // (float math runs in f32 whatever the operands' precision).
      DType produced = op == OpKind::Cast ? in.dtype
                       : op == OpKind::LessThan ? DType::Bool
                       : is_unary(op) || !is_int(in.in_dtype) ? DType::F32
                                                              : in.in_dtype;
      expr = convert(*e, produced, in.dtype);
    }
    s << indent << "const " << value_type(in.dtype) << " " << prefix << k << " = " << expr << ";\n";
  }
  return true;
}

void emit_input_bases(std::ostream& s, const std::vector<DType>& dtypes, const std::vector<InnerStride>& classes,
                      const std::string& index, const std::string& from_dim, bool skip_axis, const std::string& along) {
  const int n_in = static_cast<int>(dtypes.size());
  for (int i = 0; i < n_in; ++i) s << "    int64_t b" << i << " = off[" << i << "];\n";
  s << "    for (int64_t d = " << from_dim << ", rem = " << index << "; d >= 0; --d) {\n";
  if (skip_axis) s << "      if (d == axis) continue;\n";
  s << "      int64_t c = rem % shape[d];\n      rem /= shape[d];\n";
  for (int i = 0; i < n_in; ++i) s << "      b" << i << " += c * st[" << i << " * rank + d];\n";
  s << "    }\n";
  for (int i = 0; i < n_in; ++i) {
    DType t = dtypes[static_cast<size_t>(i)];
    s << "    const " << storage_type(t) << "* __restrict p" << i << " = (const " << storage_type(t) << "*)in[" << i
      << "] + b" << i << ";\n";
    if (static_cast<size_t>(i) >= classes.size()) continue;
    if (classes[static_cast<size_t>(i)] == InnerStride::Zero)
      s << "    const " << value_type(t) << " x" << i << " = " << load(t, "p" + std::to_string(i) + "[0]") << ";\n";
    if (classes[static_cast<size_t>(i)] == InnerStride::Any)
      s << "    const int64_t s" << i << " = st[" << i << " * rank + " << along << "];\n";
  }
}

void emit_input_loads(std::ostream& s, const std::vector<DType>& dtypes, const std::vector<InnerStride>& classes,
                      const std::string& at, const std::string& indent) {
  for (size_t i = 0; i < classes.size(); ++i) {
    const DType t = dtypes[i];
    const std::string pi = "p" + std::to_string(i);
    if (classes[i] == InnerStride::One)
      s << indent << "const " << value_type(t) << " x" << i << " = " << load(t, pi + "[" + at + "]") << ";\n";
    else if (classes[i] == InnerStride::Any)
      s << indent << "const " << value_type(t) << " x" << i << " = " << load(t, pi + "[(" + at + ") * s" + std::to_string(i) + "]")
        << ";\n";
  }
}

std::string fused_kernel_prelude() {
  return R"(#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __cplusplus
#define LM_KERNEL extern "C"
#else
#define LM_KERNEL
#endif
static inline float lm_bf16_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t lm_f32_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float lm_round_bf16(float f) { return lm_bf16_f32(lm_f32_bf16(f)); }
static inline float lm_f16_f32(uint16_t h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline uint16_t lm_f32_f16(float f) { _Float16 x = (_Float16)f; uint16_t h; memcpy(&h, &x, 2); return h; }
static inline float lm_round_f16(float f) { return (float)(_Float16)f; }
static inline int32_t lm_f2i(float f) {
  if (f != f) return 0;
  if (f >= 2147483648.0f) return INT32_MAX;
  if (f <= -2147483648.0f) return INT32_MIN;
  return (int32_t)f;
}
static inline int32_t lm_imod(int32_t x, int32_t y) { return (y == 0 || y == -1) ? 0 : x % y; }
)" + exp2_source();
}

std::optional<std::string> fused_kernel_source(const FusedSignature& sig, const std::string& name) {
  const FusedProgram& p = sig.program;
  const int n_in = p.n_inputs;
  if (static_cast<int>(sig.input_dtypes.size()) != n_in || static_cast<int>(sig.inner.size()) != n_in) return std::nullopt;
  std::ostringstream s;
  s << "LM_KERNEL void " << name
    << "(const void* const* in, const int64_t* off, const int64_t* st, void* out, const int64_t* shape, int64_t rank,"
       " int64_t r0, int64_t r1, int64_t j0, int64_t j1) {\n"
    << "  const int64_t inner = shape[rank - 1];\n"
    << "  for (int64_t r = r0; r < r1; ++r) {\n";
  emit_input_bases(s, sig.input_dtypes, sig.inner, "r", "rank - 2", false, "rank - 1");
  s << "    " << storage_type(sig.out_dtype) << "* __restrict o = (" << storage_type(sig.out_dtype) << "*)out + r * inner;\n"
    << "    for (int64_t j = j0; j < j1; ++j) {\n";
  emit_input_loads(s, sig.input_dtypes, sig.inner, "j", "      ");
  if (!emit_program(s, p, [](int k) { return "x" + std::to_string(k); }, sig.input_dtypes, "v", "      ")) return std::nullopt;
  DType last = p.instrs.back().dtype;
  s << "      o[j] = " << store(sig.out_dtype, convert("v" + std::to_string(p.instrs.size() - 1), last, sig.out_dtype))
    << ";\n    }\n  }\n}\n";
  return s.str();
}

}  // namespace luminal::cpu
