// Recognising top-k ranks (cuda_top_ranks.h) by evaluating what a count computes.
#include "backends/cuda/cuda_top_ranks.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "backends/cuda/index_values.h"
#include "core/error.h"
#include "graph/fused_program.h"
#include "runtime/buffer.h"
#include "runtime/kernels.h"
#include "runtime/scalar_ops.h"

namespace luminal::cuda {

namespace {

// The largest E (a small group's values a token) and k (a round is an argmax over a warp).
constexpr int64_t kMaxValues = 1024, kMaxRounds = 32;

// Whether the program reads inputs a and b (floats) only as operands of f32 comparisons with
// each other or with an infinite constant: its value then depends on them only through their
// order type (which is NaN, -inf, finite or +inf, and how they compare).
bool compares_only(const FusedProgram& p, int a, int b) {
  auto is_value = [&](int o) { return o == a || o == b; };
  auto is_infinite = [&](int o) {
    if (o < p.n_inputs) return false;
    const FusedInstr& c = p.instrs[static_cast<size_t>(o - p.n_inputs)];
    return c.op == FusedInstr::kConst && c.dtype == DType::F32 && std::isinf(c.value);
  };
  for (const FusedInstr& in : p.instrs) {
    if (in.op == FusedInstr::kConst) continue;
    const bool left = is_value(in.a), right = in.b >= 0 && is_value(in.b);
    if (!left && !right) continue;
    if (static_cast<OpKind>(in.op) != OpKind::LessThan || in.in_dtype != DType::F32 || in.b < 0) return false;
    const int other = left ? in.b : in.a;
    if (!is_value(other) && !is_infinite(other)) return false;
  }
  return true;
}

// `other` comes before `mine` in top-k order (`lower`: other's index is below mine's).
bool before(double mine, double other, bool lower) {
  if (std::isnan(mine) || std::isnan(other)) return false;
  return other > mine || (other == mine && lower);
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

// What the proof below reads of node `id`, as text: identical layers give identical keys, so a
// model's 48 routings are proven once (the E² evaluations took 25 ms each).
void describe(const Graph& g, NodeId id, int depth, std::ostream& s) {
  const Node& n = g.node(id);
  uint32_t bits = 0;
  std::memcpy(&bits, &n.constant, sizeof bits);
  s << "(" << static_cast<int>(n.op) << " " << static_cast<int>(n.dtype) << " " << n.kernel << " " << n.axis << " " << bits << " "
    << n.iota_expr.to_string();
  for (const Expr& e : n.shape) s << " " << e.to_string();
  for (int64_t c : n.code) s << " " << c;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Edge& e = n.inputs[i];
    const IndexExprs ix = e.view.flat_index();
    s << " [" << ix.index.to_string() << " | " << ix.valid.to_string() << " | ";
    for (const Expr& d : e.view.shape()) s << d.to_string() << ",";
    size_t first = 0;  // the first input reading the same node
    while (n.inputs[first].src != e.src) ++first;
    s << " <- " << first << " " << static_cast<int>(g.node(e.src).dtype) << "]";
    if (depth > 0 && g.node(e.src).dtype != DType::F32) describe(g, e.src, depth - 1, s);
  }
  s << ")";
}

// The proof (cuda_top_ranks.h) for a FusedSum of three inputs.
std::optional<TopRanks> prove_top_ranks(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.shape.empty() || n.code.empty()) return std::nullopt;
  const std::vector<Expr>& in_shape = n.inputs[0].view.shape();
  const size_t r = in_shape.size();
  if (r < 3 || n.axis + 1 != r) return std::nullopt;
  const std::optional<int64_t> e_rows = in_shape[r - 2].as_const(), e_len = in_shape[r - 1].as_const();
  if (!e_rows || !e_len || *e_rows != *e_len || *e_len < 2 || *e_len > kMaxValues) return std::nullopt;
  for (size_t d = 1; d + 2 < r; ++d)
    if (!in_shape[d].is_const(1)) return std::nullopt;
  const int64_t E = *e_len;
  // One token: the first dim (a Var, or 1) bound to 1; any other dim leaves it unrecognised.
  DimMap dims;
  const Expr& token = n.shape[0];
  if (token.kind() == ExprKind::Var) dims[token.name()] = 1;
  else if (!token.is_const(1)) return std::nullopt;

  size_t pos = 0;
  const FusedProgram pro = FusedProgram::decode(n.code, pos);
  if (pos >= n.code.size() || pro.n_inputs != 3) return std::nullopt;
  const FusedProgram epi = FusedProgram::decode(n.code, pos);
  const DType t = pro.instrs.back().dtype;
  if (epi.n_inputs != 1 || (t != DType::F32 && t != DType::I32)) return std::nullopt;

  // Two f32 inputs from one node (the values) and an index value (the tie-break).
  std::vector<size_t> floats;
  size_t mask = 3;
  for (size_t i = 0; i < 3; ++i) {
    const DType d = g.node(n.inputs[i].src).dtype;
    if (d == DType::F32) floats.push_back(i);
    else mask = i;
    if (!n.inputs[i].view.flat_index().valid.is_const(1)) return std::nullopt;
  }
  if (floats.size() != 2 || mask == 3 || n.inputs[floats[0]].src != n.inputs[floats[1]].src) return std::nullopt;
  if (!compares_only(pro, static_cast<int>(floats[0]), static_cast<int>(floats[1]))) return std::nullopt;

  try {
    const IndexExprs ia = n.inputs[floats[0]].view.flat_index(), ib = n.inputs[floats[1]].view.flat_index(),
                     im = n.inputs[mask].view.flat_index();
    // Which float input is a row's own value: its index is the same along the row.
    size_t mine = floats[0], other = floats[1];
    if (ia.index.eval(dims, 0) != ia.index.eval(dims, 1)) std::swap(mine, other);
    const Expr& xm = mine == floats[0] ? ia.index : ib.index;
    const Expr& xo = mine == floats[0] ? ib.index : ia.index;
    std::vector<int64_t> at(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) at[static_cast<size_t>(e)] = xm.eval(dims, e * E);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t k = 0; k < E; ++k) {
        const int64_t q = e * E + k;
        if (xm.eval(dims, q) != at[static_cast<size_t>(e)] || xo.eval(dims, q) != at[static_cast<size_t>(k)]) return std::nullopt;
        const std::optional<double> m = index_value_at(g, n.inputs[mask].src, im.index.eval(dims, q), dims);
        if (!m || *m != (k < e ? 1.0 : 0.0)) return std::nullopt;
      }
    // The prologue against the predicate at a value of every order type (and the tie-break).
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const double reps[] = {nan, -inf, -1.0, 1.0, inf};
    for (double x : reps)
      for (double y : reps)
        for (bool lower : {false, true}) {
          const double v = eval_fused(pro, [&](int i) {
            const size_t u = static_cast<size_t>(i);
            return u == mine ? x : u == other ? y : (lower ? 1.0 : 0.0);
          });
          if (!same_value(v, before(x, y, lower) ? 1.0 : 0.0)) return std::nullopt;
        }
    // The epilogue at every count: constant from some k on.
    std::vector<double> out(static_cast<size_t>(E));
    for (int64_t c = 0; c < E; ++c) out[static_cast<size_t>(c)] = eval_fused(epi, [&](int) { return convert_value(static_cast<double>(c), t); });
    int64_t k = E - 1;
    while (k > 0 && same_value(out[static_cast<size_t>(k - 1)], out[static_cast<size_t>(E - 1)])) --k;
    if (k > kMaxRounds) return std::nullopt;
    return TopRanks{E, k, mine};
  } catch (const Error&) {  // an unbound dim, a division by zero: not this form
    return std::nullopt;
  }
}

}  // namespace

std::optional<TopRanks> top_ranks_of(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op != OpKind::Kernel || n.kernel != "FusedSum" || n.inputs.size() != 3) return std::nullopt;
  std::ostringstream key;
  describe(g, id, kMaxIndexDepth + 1, key);
  static std::mutex mu;
  static std::map<std::string, std::optional<TopRanks>> proven;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = proven.find(key.str()); it != proven.end()) return it->second;
  }
  const std::optional<TopRanks> r = prove_top_ranks(g, id);
  std::lock_guard<std::mutex> lock(mu);
  proven[key.str()] = r;
  return r;
}

}  // namespace luminal::cuda
