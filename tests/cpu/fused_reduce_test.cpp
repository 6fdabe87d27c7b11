// FusedSum / FusedMax on the CPU backend against the reference kernel: a prologue program over
// strided and broadcast inputs, with and without an epilogue.
#include "backends/cpu/fused_reduce.h"

#include <limits>

#include "graph/fused_program.h"
#include "kernel_compare.h"

namespace luminal::cpu::testing {
namespace {

FusedInstr op(OpKind k, int a, int b = -1) {
  FusedInstr i;
  i.op = static_cast<int>(k);
  i.a = a;
  i.b = b;
  return i;
}

FusedInstr constant(float v) {
  FusedInstr i;
  i.value = v;
  return i;
}

// prologue(x, y) = exp2(x * 0.5) + y * y; epilogue(r, z) = sqrt(r) * z, or recip(r + z)
std::vector<int64_t> code(bool epilogue, bool recip) {
  FusedProgram p;
  p.n_inputs = 2;
  p.instrs = {constant(0.5f), op(OpKind::Mul, 0, 2), op(OpKind::Exp2, 3), op(OpKind::Mul, 1, 1), op(OpKind::Add, 4, 5)};
  std::vector<int64_t> c = p.encode();
  if (!epilogue) return c;
  FusedProgram e;
  e.n_inputs = 2;
  if (recip) e.instrs = {op(OpKind::Add, 0, 1), op(OpKind::Recip, 2)};
  else e.instrs = {op(OpKind::Sqrt, 0), op(OpKind::Mul, 2, 1)};
  std::vector<int64_t> ec = e.encode();
  c.insert(c.end(), ec.begin(), ec.end());
  return c;
}

void check(const std::string& kernel, int64_t rows, int64_t len, bool epilogue, bool recip) {
  uint32_t seed = static_cast<uint32_t>(rows * 100 + len);
  // x transposed, y one row broadcast over the rows, z read with an offset.
  KernelInput x{random_f32({len, rows}, seed), View::contiguous(exprs({len, rows})).permute({1, 0})};
  KernelInput y{random_f32({1, len}, seed + 1), View::contiguous(exprs({1, len})).expand(0, Expr(rows))};
  std::vector<KernelInput> in = {x, y};
  if (epilogue) in.push_back({random_f32({rows + 3}, seed + 2, 0.5f, 2), View::contiguous({Expr(rows + 3)}).slice(0, Expr(2), Expr(rows + 2))});
  compare(kernel_node(kernel, 1, 0, code(epilogue, recip)), in, {rows}, {4e-6, 1e-7});
}

TEST(FusedReduce, MatchesReference) {
  for (const char* k : {"FusedSum", "FusedMax"})
    for (auto [rows, len] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 17}, {17, 129}, {600, 33}, {2, 1000}})
      for (bool epi : {false, true}) check(k, rows, len, epi, rows % 2 == 1);
}

TEST(FusedReduce, MaxPropagatesNaN) {
  Buffer x = random_f32({3, 20}, 5);
  x.set(25, std::nan(""));
  x.set(59, std::numeric_limits<float>::infinity());
  compare(kernel_node("FusedMax", 1, 0, code(false, false)), {whole(x), whole(random_f32({3, 20}, 6))}, {3}, {0, 0});
}

TEST(FusedReduce, FallsBackForOtherOpsAndAxes) {
  FusedProgram p;
  p.n_inputs = 1;
  p.instrs = {constant(0), op(OpKind::LessThan, 0, 1)};
  p.instrs[1].dtype = DType::Bool;
  compare(kernel_node("FusedSum", 1, 0, p.encode()), {whole(random_f32({3, 4}, 1))}, {3}, {0, 0}, false);
  compare(kernel_node("FusedSum", 0, 0, code(false, false)), {whole(random_f32({3, 4}, 1)), whole(random_f32({3, 4}, 2))}, {4},
          {0, 0}, false);
}

}  // namespace
}  // namespace luminal::cpu::testing
