#include "backends/cpu/fused_reduce_codegen.h"

#include <sstream>

namespace luminal::cpu {

using namespace codegen;

namespace {

// Loads of the prologue inputs at position `j` on the reduced axis, then the prologue itself;
// its result is v<last>.
bool emit_prologue(std::ostringstream& s, const FusedReduceSignature& sig, const std::string& j, const std::string& indent) {
  const FusedProgram& p = sig.prologue;
  emit_input_loads(s, sig.input_dtypes, sig.along, j, indent);
  std::vector<DType> dtypes(sig.input_dtypes.begin(), sig.input_dtypes.begin() + p.n_inputs);
  return emit_program(s, p, [](int k) { return "x" + std::to_string(k); }, dtypes, "v", indent);
}

}  // namespace

std::optional<std::string> fused_reduce_source(const FusedReduceSignature& sig, const std::string& name) {
  const FusedProgram& p = sig.prologue;
  const int n_pro = p.n_inputs;
  const int n_epi = sig.epilogue ? sig.epilogue->n_inputs - 1 : 0;
  if (p.instrs.empty() || n_pro < 1 || n_epi < 0 || static_cast<int>(sig.along.size()) != n_pro ||
      static_cast<int>(sig.input_dtypes.size()) != n_pro + n_epi)
    return std::nullopt;
  const DType t = p.instrs.back().dtype;  // the reduction runs in the prologue's result dtype
  const std::string last = "v" + std::to_string(p.instrs.size() - 1);
  std::ostringstream s;
  s << "LM_KERNEL void " << name
    << "(const void* const* in, const int64_t* off, const int64_t* st, void* out, const int64_t* shape, int64_t rank,"
       " int64_t axis, int64_t o0, int64_t o1) {\n"
    << "  const int64_t len = shape[axis];\n"
    << "  " << storage_type(sig.out_dtype) << "* __restrict optr = (" << storage_type(sig.out_dtype) << "*)out;\n"
    << "  for (int64_t oi = o0; oi < o1; ++oi) {\n";
  emit_input_bases(s, sig.input_dtypes, sig.along, "oi", "rank - 1", true, "axis");
  if (sig.is_sum && !is_int(t)) {
    // Eight partial sums: the lanes are independent, so the compiler vectorises the loop
    // without reassociating anything it was not told to.
    s << "    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};\n"
      << "    int64_t k = 0;\n"
      << "    for (; k + 8 <= len; k += 8) {\n"
      << "      float lane[8];\n"
      << "      for (int q = 0; q < 8; ++q) {\n";
    if (!emit_prologue(s, sig, "k + q", "        ")) return std::nullopt;
    s << "        lane[q] = (float)" << last << ";\n"
      << "      }\n"
      << "      for (int q = 0; q < 8; ++q) acc[q] += lane[q];\n"
      << "    }\n"
      << "    float tail = 0.0f;\n"
      << "    for (; k < len; ++k) {\n";
    if (!emit_prologue(s, sig, "k", "      ")) return std::nullopt;
    s << "      tail += (float)" << last << ";\n"
      << "    }\n"
      << "    const float sum = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;\n"
      << "    const " << value_type(t) << " red = " << convert("sum", DType::F32, t) << ";\n";
  } else if (sig.is_sum) {
    // Integer sums wrap, as the reference's do.
    s << "    uint32_t acc = 0;\n"
      << "    for (int64_t k = 0; k < len; ++k) {\n";
    if (!emit_prologue(s, sig, "k", "      ")) return std::nullopt;
    s << "      acc += (uint32_t)(int32_t)" << last << ";\n"
      << "    }\n"
      << "    const " << value_type(t) << " red = " << convert("(int32_t)acc", DType::I32, t) << ";\n";
  } else {
    const char* init = !is_int(t) ? "(-__builtin_inff())" : t == DType::I32 ? "INT32_MIN" : "0";
    s << "    " << value_type(t) << " red = " << init << ";\n"
      << "    for (int64_t k = 0; k < len; ++k) {\n";
    if (!emit_prologue(s, sig, "k", "      ")) return std::nullopt;
    if (!is_int(t)) s << "      if (" << last << " != " << last << ") { red = " << last << "; break; }  // NaN sticks\n";
    s << "      if (" << last << " > red) red = " << last << ";\n"
      << "    }\n";
  }
  std::string result = "red";
  DType result_t = t;
  if (sig.epilogue) {
    std::vector<DType> dtypes{t};
    for (int i = 0; i < n_epi; ++i) {
      DType ti = sig.input_dtypes[static_cast<size_t>(n_pro + i)];
      dtypes.push_back(ti);
      s << "    const " << value_type(ti) << " y" << i + 1 << " = " << load(ti, "p" + std::to_string(n_pro + i) + "[0]") << ";\n";
    }
    auto input = [](int k) { return k == 0 ? std::string("red") : "y" + std::to_string(k); };
    if (!emit_program(s, *sig.epilogue, input, dtypes, "e", "    ")) return std::nullopt;
    result = "e" + std::to_string(sig.epilogue->instrs.size() - 1);
    result_t = sig.epilogue->instrs.back().dtype;
  }
  s << "    optr[oi] = " << store(sig.out_dtype, convert(result, result_t, sig.out_dtype)) << ";\n  }\n}\n";
  return s.str();
}

}  // namespace luminal::cpu
