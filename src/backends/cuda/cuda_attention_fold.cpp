// Recognising the decode attention that computes its q norms and cache writes (cuda_attention_fold.h).
#include "backends/cuda/cuda_attention_fold.h"

#include <vector>

#include "backends/cuda/index_values.h"

namespace luminal::cuda {

namespace {

// The nodes that read `id` (each once, however many of its inputs do).
std::vector<NodeId> readers_of(const Graph& g, NodeId id) {
  std::vector<NodeId> out;
  for (NodeId r = 0; r < g.size(); ++r)
    for (const Edge& e : g.node(r).inputs)
      if (e.src == id) {
        out.push_back(r);
        break;
      }
  return out;
}

// An f32 RMSNormRotary over rows of `len` values (its last axis) read only by `reader`.
bool norm_rotary_for(const Graph& g, NodeId id, int64_t len, NodeId reader) {
  const Node& n = g.node(id);
  if (n.op != OpKind::Kernel || n.kernel != "RMSNormRotary" || n.dtype != DType::F32 || n.inputs.size() != 4 || n.shape.empty() ||
      n.axis + 1 != n.shape.size() || !n.shape.back().is_const(len) || len % 2 != 0)
    return false;
  const std::vector<NodeId> r = readers_of(g, id);
  return r.size() == 1 && r[0] == reader;
}

// The address attention `a` reads for batch coordinates `batch`, key `key` and element `p` of
// its input `input` (1: keys, laid out [batch.., p, key]; 2: values, [batch.., key, p]), from its
// one strided layer; nullopt where the layer's mask hides it.
std::optional<int64_t> kv_address(const Node& a, size_t input, const std::vector<int64_t>& batch, int64_t key, int64_t p, const DimMap& dims) {
  const std::vector<ViewLayer>& layers = a.inputs[input].view.layers();
  if (layers.size() != 1) return std::nullopt;
  const ViewLayer& l = layers[0];
  const size_t r = l.shape.size();
  std::vector<int64_t> at = batch;
  at.push_back(input == 1 ? p : key);
  at.push_back(input == 1 ? key : p);
  if (at.size() != r) return std::nullopt;
  int64_t address = l.offset.eval(dims);
  for (size_t d = 0; d < r; ++d) {
    if (at[d] < l.mask_lo[d].eval(dims) || at[d] >= l.mask_hi[d].eval(dims) || at[d] >= l.shape[d].eval(dims)) return std::nullopt;
    address += at[d] * l.strides[d].eval(dims);
  }
  return address;
}

// Every element (b.., s, p) of Scatter `w`'s update goes where attention `a` reads batch b..'s
// key number keys - S + s, element p, through its input `input`, at these dims.
bool writes_the_new_rows(const Graph& g, const Node& a, size_t input, const Node& w, const DimMap& dims) {
  const std::vector<Expr>& shape = w.inputs[2].view.shape();
  const size_t r = shape.size();
  if (r != a.inputs[input].view.rank() || r < 3) return false;
  std::vector<int64_t> size(r);
  for (size_t d = 0; d < r; ++d) size[d] = shape[d].eval(dims);
  const int64_t S = size[r - 2], keys = a.inputs[input].view.shape()[input == 1 ? r - 1 : r - 2].eval(dims);
  const IndexExprs index = w.inputs[1].view.flat_index();
  if (!index.valid.is_const(1)) return false;
  int64_t count = 1;
  for (int64_t s : size) count *= s;
  if (count <= 0 || count > (1 << 16) || S < 1 || keys < S) return false;
  for (int64_t u = 0; u < count; ++u) {
    std::vector<int64_t> at(r);
    int64_t rest = u;
    for (size_t d = r; d-- > 0;) {
      at[d] = rest % size[d];
      rest /= size[d];
    }
    const std::optional<double> to = index_value_at(g, w.inputs[1].src, index.index.eval(dims, u), dims);
    const std::vector<int64_t> batch(at.begin(), at.end() - 2);
    const std::optional<int64_t> want = kv_address(a, input, batch, keys - S + at[r - 2], at[r - 1], dims);
    if (!to || !want || *to != static_cast<double>(*want)) return false;
  }
  return true;
}

}  // namespace

std::optional<AttentionNorms> attention_norms(const Graph& g, NodeId id) {
  const Node& a = g.node(id);
  if (a.op != OpKind::Kernel || a.kernel != "Attention" || a.inputs.size() != 4) return std::nullopt;
  const size_t r = a.inputs[0].view.rank();
  if (r < 3) return std::nullopt;
  const std::optional<int64_t> dk = a.inputs[0].view.shape()[r - 1].as_const();
  if (!dk) return std::nullopt;
  AttentionNorms f;
  f.q_norm = a.inputs[0].src;
  f.k_write = a.inputs[1].src;
  f.v_write = a.inputs[2].src;
  const Node& kw = g.node(f.k_write);
  const Node& vw = g.node(f.v_write);
  if (kw.op != OpKind::Scatter || vw.op != OpKind::Scatter || kw.inputs.size() != 3 || vw.inputs.size() != 3 || f.k_write == f.v_write)
    return std::nullopt;
  for (const Node* w : {&kw, &vw})
    if (g.node(w->inputs[0].src).op != OpKind::Input || w->dtype != DType::F32 || g.node(w->inputs[2].src).dtype != DType::F32 ||
        g.node(w->inputs[1].src).dtype != DType::I32)
      return std::nullopt;
  f.k_norm = kw.inputs[2].src;
  if (!norm_rotary_for(g, f.q_norm, *dk, id) || !norm_rotary_for(g, f.k_norm, *dk, f.k_write)) return std::nullopt;
  for (NodeId w : {f.k_write, f.v_write}) {
    const std::vector<NodeId> rs = readers_of(g, w);
    if (rs.size() != 1 || rs[0] != id) return std::nullopt;
  }
  const std::vector<Expr>& update = kw.inputs[2].view.shape();
  if (update.size() != r || !(vw.inputs[2].view.shape() == update) || !update[r - 1].is_const(*dk)) return std::nullopt;
  f.tokens = update[r - 2];
  // The updates' batch dims are the attention's: every batch entry gets its new rows.
  for (size_t d = 0; d + 2 < r; ++d)
    if (!(update[d] == a.inputs[1].view.shape()[d]) || !(update[d] == a.inputs[2].view.shape()[d])) return std::nullopt;
  // One token: the dim S names (or S itself) is 1; every other dim at several values.
  const Expr& S = f.tokens;
  if (S.kind() != ExprKind::Var && !S.is_const(1)) return std::nullopt;
  for (int64_t v : {0, 1, 3, 6}) {
    DimMap dims;
    for (const std::string& d : g.dims()) dims[d] = v;
    if (S.kind() == ExprKind::Var) dims[S.name()] = 1;
    try {
      if (!writes_the_new_rows(g, a, 1, kw, dims) || !writes_the_new_rows(g, a, 2, vw, dims)) return std::nullopt;
    } catch (const std::exception&) {  // an expression that does not evaluate at these dims
      return std::nullopt;
    }
  }
  return f;
}

}  // namespace luminal::cuda
