#pragma once
// Source for a fused elementwise kernel (C that is also valid C++; jit_module compiles it as C,
// whose front end starts faster): the program's instructions become one loop body
// over the output's last axis, so the compiler keeps every intermediate in registers and
// vectorises what it can. Rounding follows the reference exactly (each instruction's result is
// rounded to its dtype; no contraction into fused multiply-adds), so generated kernels agree
// with the interpreter bit for bit.
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "graph/fused_program.h"

namespace luminal::cpu {

// How an input advances along the output's last axis, fixed when the source is generated so
// the loop can be vectorised: contiguous (stride 1), broadcast (stride 0, loaded once per
// row) or any other stride (read from the arguments at run time).
enum class InnerStride { One, Zero, Any };

struct FusedSignature {
  FusedProgram program;
  std::vector<DType> input_dtypes;
  std::vector<InnerStride> inner;  // per input
  DType out_dtype = DType::F32;
};

// The kernel's C ABI. `st` holds each input's strides ([input][rank]) and `off` its offsets,
// in elements; rows are the flat index over all axes but the last. Computes output rows
// [r0, r1), columns [j0, j1) of each.
using FusedKernelFn = void (*)(const void* const* in, const int64_t* off, const int64_t* st, void* out,
                               const int64_t* shape, int64_t rank, int64_t r0, int64_t r1, int64_t j0, int64_t j1);

// The function's source, defining `extern "C"` function `name`; nullopt if the program uses an
// op/dtype combination the generator does not cover (the node then runs elsewhere).
std::optional<std::string> fused_kernel_source(const FusedSignature& sig, const std::string& name);

// Helpers every generated translation unit starts with (conversions that round like core/dtype).
std::string fused_kernel_prelude();

// Writes one `const T <prefix>k = ...;` line per instruction of `p`, rounding as the reference
// does; input slot k is the expression input(k), a value of input_dtypes[k]. False if the
// program uses something the generator does not cover.
bool emit_program(std::ostream& s, const FusedProgram& p, const std::function<std::string(int)>& input,
                  const std::vector<DType>& input_dtypes, const std::string& prefix, const std::string& indent);

// Per row (or per output) of a generated kernel, for every input i: its base offset b<i> at flat
// index `index` over dims `from_dim` down to 0 (skipping `axis` when `skip_axis`), its pointer
// p<i>, and, for the inputs `classes` covers, by their stride class along axis `along`: the
// value x<i> loaded once (stride 0) or the stride s<i> (any).
void emit_input_bases(std::ostream& s, const std::vector<DType>& dtypes, const std::vector<InnerStride>& classes,
                      const std::string& index, const std::string& from_dim, bool skip_axis, const std::string& along);

// Inside the loop along that axis, at position `at`: the value x<i> of every input `classes`
// covers whose stride there is 1 or any (stride-0 ones were loaded by emit_input_bases).
void emit_input_loads(std::ostream& s, const std::vector<DType>& dtypes, const std::vector<InnerStride>& classes,
                      const std::string& at, const std::string& indent);

// Pieces of generated C++ the kernel generators share.
namespace codegen {
bool is_int(DType t);
const char* value_type(DType t);    // how a value of t lives in registers: float or int32_t
const char* storage_type(DType t);  // how t is stored in memory
std::string convert(const std::string& v, DType from, DType to);  // rounds like convert_value
std::string load(DType t, const std::string& ptr_elem);           // stored -> value
std::string store(DType t, const std::string& v);                 // value -> stored
}  // namespace codegen

}  // namespace luminal::cpu
