// Index values evaluated at compile time (index_values.h).
#include "backends/cuda/index_values.h"

#include "graph/fused_program.h"
#include "runtime/kernels.h"
#include "runtime/scalar_ops.h"

namespace luminal::cuda {

std::optional<double> index_value_at(const Graph& g, NodeId id, int64_t q, const DimMap& dims, int depth) {
  const Node& n = g.node(id);
  if (n.op == OpKind::Iota) return convert_value(static_cast<double>(n.iota_expr.eval(dims, q)), n.dtype);
  if (n.op == OpKind::Constant) return convert_value(n.constant, n.dtype);
  const bool fused = n.op == OpKind::Kernel && n.kernel == "Fused" && !n.code.empty();
  const bool cheap = n.op == OpKind::Cast || n.op == OpKind::Add || n.op == OpKind::Mul || n.op == OpKind::Mod || n.op == OpKind::LessThan;
  if ((!cheap && !fused) || depth >= kMaxIndexDepth || n.inputs.empty()) return std::nullopt;
  auto input = [&](size_t i) -> std::optional<double> {
    const IndexExprs ix = n.inputs[i].view.flat_index();
    if (!ix.valid.is_const(1)) return std::nullopt;
    return index_value_at(g, n.inputs[i].src, ix.index.eval(dims, q), dims, depth + 1);
  };
  if (fused) {
    size_t pos = 0;
    const FusedProgram p = FusedProgram::decode(n.code, pos);
    if (pos != n.code.size() || p.n_inputs != static_cast<int>(n.inputs.size())) return std::nullopt;
    std::vector<double> in;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::optional<double> x = input(i);
      if (!x) return std::nullopt;
      in.push_back(*x);
    }
    return convert_value(eval_fused(p, [&](int i) { return in[static_cast<size_t>(i)]; }), n.dtype);
  }
  double v[2] = {0, 0};
  for (size_t i = 0; i < n.inputs.size() && i < 2; ++i) {
    const std::optional<double> x = input(i);
    if (!x) return std::nullopt;
    v[i] = *x;
  }
  if (n.op == OpKind::Cast) return convert_value(v[0], n.dtype);
  return convert_value(binary_op(n.op, g.node(n.inputs[0].src).dtype, v[0], v[1]), n.dtype);
}

}  // namespace luminal::cuda
