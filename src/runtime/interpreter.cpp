#include "runtime/interpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "runtime/kernels.h"
#include "runtime/scalar_ops.h"
#include "runtime/reader.h"
#include "symbolic/expr_program.h"

namespace luminal {

Interpreter::Interpreter(Graph graph) : graph_(std::move(graph)) {}

void Interpreter::set_input(const std::string& name, Buffer data) {
  NodeId id = graph_.find_input(name);
  const Node& n = graph_.node(id);
  if (data.shape().size() != n.shape.size())
    throw Error("input '" + name + "': expected shape " + to_string(n.shape) + " (rank " + std::to_string(n.shape.size()) +
                "), got " + data.shape_string());
  // Taken as is when the dtype already matches: a weight is never held twice while loading.
  inputs_[id] = data.dtype() == n.dtype ? std::move(data) : data.cast(n.dtype);
  invariants_.input_changed(id);
}

void Interpreter::set_dim(const std::string& name, int64_t value) {
  if (value < 0) throw Error("dim '" + name + "': a dynamic dim cannot be negative (got " + std::to_string(value) + ")");
  explicit_dims_[name] = value;
}

void Interpreter::bind_dims() {
  for (NodeId id : graph_.inputs())
    if (!inputs_.count(id)) {
      const std::string& name = graph_.node(id).name;
      throw Error("input '" + name + "' was not set: call set_input(\"" + name + "\", buffer)");
    }
  dims_ = explicit_dims_;
  // Bare dims in input shapes take their value from the buffers.
  for (auto& [id, buf] : inputs_) {
    const Node& n = graph_.node(id);
    for (size_t d = 0; d < n.shape.size(); ++d)
      if (n.shape[d].kind() == ExprKind::Var && !dims_.count(n.shape[d].name())) dims_[n.shape[d].name()] = buf.shape()[d];
  }
  if (!graph_dims_) graph_dims_ = graph_.dims();  // walks every expression of the graph
  for (const std::string& d : *graph_dims_)
    if (!dims_.count(d))
      throw Error("dynamic dim '" + d + "' is not bound: call set_dim(\"" + d +
                  "\", value) or set an input whose shape has it as a dimension");
  for (NodeId id : graph_.inputs()) {
    const Node& n = graph_.node(id);
    auto it = inputs_.find(id);
    if (it == inputs_.end()) throw Error("input '" + n.name + "' was not set: call set_input(\"" + n.name + "\", buffer)");
    std::vector<int64_t> want = concrete(n.shape);
    if (want != it->second.shape())
      throw Error("input '" + n.name + "': shape mismatch: declared " + to_string(n.shape) + " = " + shape_string(want) +
                  " with the bound dims, but the buffer has shape " + it->second.shape_string());
  }
}

std::vector<int64_t> Interpreter::concrete(const std::vector<Expr>& shape) const {
  std::vector<int64_t> r;
  for (const Expr& e : shape) r.push_back(e.eval(dims_));
  return r;
}

Reader::Reader(const Buffer& src, const View& view, const DimMap& dims) : Reader(src, view, view.flat_index(), dims) {}

Reader::Reader(const Buffer& src, const View& view, const IndexExprs& e, const DimMap& dims)
    : src_(src), pad_(convert_value(view.pad_value(), src.dtype())), always_valid_(!view.has_mask()), contiguous_(false) {
  // A mask that covers the whole shape once dims are bound (a slice to past+seq of a cache of
  // fixed length) masks nothing: the view is plain strided after all.
  auto mask_is_full = [&](const ViewLayer& l) {
    for (size_t d = 0; d < l.shape.size(); ++d)
      if (l.mask_lo[d].eval(dims) > 0 || l.mask_hi[d].eval(dims) < l.shape[d].eval(dims)) return false;
    return true;
  };
  auto strided_of = [&](const ViewLayer& l) {
    Strided s;
    s.offset = l.offset.eval(dims);
    for (const Expr& st : l.strides) s.strides.push_back(st.eval(dims));
    return s;
  };
  auto shape_of = [&](const ViewLayer& l) {
    std::vector<int64_t> r;
    for (const Expr& e : l.shape) r.push_back(e.eval(dims));
    return r;
  };
  const std::vector<ViewLayer>& layers = view.layers();
  if (layers.size() == 1 && (!view.has_mask() || mask_is_full(layers[0]))) {
    always_valid_ = true;
    strided_ = strided_of(layers[0]);
    flat_ = Flat{shape_of(layers[0]), *strided_};
    // Contiguous with these dims (checked on integers: View::is_contiguous proves it for all dims
    // symbolically, which interns expressions, too slow for every kernel call of a decode step).
    contiguous_ = strided_->offset == 0;
    int64_t stride = 1;
    for (size_t d = flat_->shape.size(); d-- > 0;) {
      if (flat_->shape[d] != 1 && strided_->strides[d] != stride) contiguous_ = false;
      stride *= flat_->shape[d];
    }
    return;  // no index programs: building them (substituting dims) costs more than small kernels
  }
  index_ = ExprProgram(e.index, dims);
  valid_ = ExprProgram(e.valid, dims);
  if (layers.size() == 1) {
    Masked m{Flat{shape_of(layers[0]), strided_of(layers[0])}, {}, {}};
    for (size_t d = 0; d < layers[0].shape.size(); ++d) {
      m.lo.push_back(layers[0].mask_lo[d].eval(dims));
      m.hi.push_back(layers[0].mask_hi[d].eval(dims));
    }
    masked_ = std::move(m);
    return;
  }
  // A reshape on top of a strided layer: flat order passes straight through plain layers.
  auto plain = [&](const ViewLayer& l) {
    if (l.offset.eval(dims) != 0 || !mask_is_full(l)) return false;
    std::vector<int64_t> shape = shape_of(l);
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] != 1 && l.strides[d].eval(dims) != stride) return false;
      stride *= shape[d];
    }
    return true;
  };
  if (!mask_is_full(layers[0])) return;
  bool middle_plain = true;  // the layers between the bottom and the top
  for (size_t i = 1; i + 1 < layers.size(); ++i) middle_plain = middle_plain && plain(layers[i]);
  if (!middle_plain) return;
  Flat bottom{shape_of(layers[0]), strided_of(layers[0])};
  // A strided top layer (a broadcast, a permute) over the reshaped elements of the bottom one.
  if (mask_is_full(layers.back())) stacked_ = Stacked{bottom, strided_of(layers.back())};
  if (plain(layers.back())) flat_ = std::move(bottom);
}

Buffer Interpreter::eval(NodeId id, const Node& n, const std::vector<const Buffer*>& in) {
  std::vector<int64_t> shape = concrete(n.shape);
  Buffer out = Buffer::overwritten(n.dtype, shape, take_storage(n.dtype, shape));
  const int64_t count = static_cast<int64_t>(out.numel());
  auto reader = [&](size_t k) { return Reader(*in[k], n.inputs[k].view, index_exprs(id, k), dims_); };
  last_native_ = false;
  // Kernels, and elementwise primitives and Gather (an embedding lookup) when a backend may run
  // them natively, see every input through a reader: the backend's hook runs them, or kernels
  // fall back to the reference.
  const bool elementwise = n.op == OpKind::Cast || is_unary(n.op) || is_binary(n.op);
  if (n.op == OpKind::Kernel || (hook_ && (elementwise || n.op == OpKind::Gather))) {
    std::vector<Reader> readers;
    std::vector<std::vector<int64_t>> shapes;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      readers.push_back(reader(k));
      shapes.push_back(concrete(n.inputs[k].view.shape()));
    }
    if (hook_) last_native_ = hook_(n, readers, shapes, out);
    if (last_native_) return out;
    if (n.op == OpKind::Kernel) {
      run_reference_kernel(n, readers, shapes, out);
      return out;
    }
  }
  switch (n.op) {
    case OpKind::Input: LM_ASSERT(false, "inputs are not evaluated");
    case OpKind::Constant: out.set(0, n.constant); break;
    case OpKind::Iota: {
      // Without dims the program never changes: built once (building substitutes and interns).
      if (iota_programs_.size() < graph_.size()) iota_programs_.resize(graph_.size());
      std::optional<ExprProgram>& cached = iota_programs_[id];
      ExprProgram p = cached ? *cached : ExprProgram(n.iota_expr, dims_);
      if (!cached && n.iota_expr.dims().empty()) cached = p;
      int32_t* o = reinterpret_cast<int32_t*>(out.bytes());
      for (int64_t i = 0; i < count; ++i) o[i] = static_cast<int32_t>(p(i));
      break;
    }
    case OpKind::Output: {
      if (n.inputs[0].view.is_contiguous() && in[0]->dtype() == out.dtype()) {  // the usual case: a copy
        std::memcpy(out.bytes(), in[0]->bytes(), out.nbytes());
        break;
      }
      Reader r = reader(0);
      for (int64_t i = 0; i < count; ++i) out.set(i, r(i));
      break;
    }
    case OpKind::Cast: {
      Reader r = reader(0);
      for (int64_t i = 0; i < count; ++i) out.set(i, convert_value(r(i), n.dtype));
      break;
    }
    case OpKind::Exp2: case OpKind::Log2: case OpKind::Sin: case OpKind::Sqrt: case OpKind::Recip: {
      Reader r = reader(0);
      for (int64_t i = 0; i < count; ++i) out.set(i, unary_op(n.op, static_cast<float>(r(i))));
      break;
    }
    case OpKind::Add: case OpKind::Mul: case OpKind::Mod: case OpKind::LessThan: {
      Reader a = reader(0), b = reader(1);
      DType t = graph_.node(n.inputs[0].src).dtype;
      for (int64_t i = 0; i < count; ++i) out.set(i, binary_op(n.op, t, a(i), b(i)));
      break;
    }
    case OpKind::SumReduce: case OpKind::MaxReduce: {
      Reader r = reader(0);
      std::vector<int64_t> shape = concrete(n.inputs[0].view.shape());
      int64_t len = shape[n.axis], inner = 1;
      for (size_t d = n.axis + 1; d < shape.size(); ++d) inner *= shape[d];
      for (int64_t o = 0; o < count; ++o) {
        int64_t base = (o / inner) * len * inner + o % inner;
        ReduceAcc acc(n.op == OpKind::SumReduce, n.dtype);
        for (int64_t k = 0; k < len; ++k) acc.add(r(base + k * inner));
        out.set(o, acc.result());
      }
      break;
    }
    case OpKind::Gather: {
      Reader idx = reader(0), data = reader(1);
      int64_t data_count = 1;
      for (int64_t d : concrete(n.inputs[1].view.shape())) data_count *= d;
      for (int64_t i = 0; i < count; ++i) {
        int64_t k = static_cast<int64_t>(idx(i));
        out.set(i, (k >= 0 && k < data_count) ? data(k) : 0.0);
      }
      break;
    }
    case OpKind::Kernel: LM_ASSERT(false, "kernels run above");
    case OpKind::Scatter: {
      Reader dest = reader(0), idx = reader(1), src = reader(2);
      for (int64_t i = 0; i < count; ++i) out.set(i, dest(i));
      int64_t src_count = 1;
      for (int64_t d : concrete(n.inputs[2].view.shape())) src_count *= d;
      for (int64_t j = 0; j < src_count; ++j) {
        int64_t k = static_cast<int64_t>(idx(j));
        if (k >= 0 && k < count) out.set(k, src(j));
      }
      break;
    }
  }
  return out;
}

// Liveness-based reuse: an intermediate's memory goes back to a free list after its last reader
// and the next node of at most that size takes it, so steady-state runs allocate (and page-fault)
// nothing new.
void Interpreter::free_buffer(std::vector<std::optional<Buffer>>& live, NodeId id) {
  if (!live[id]) return;
  Storage bytes = live[id]->release();
  live[id].reset();
  if (bytes.capacity() > 0) free_storage_.emplace(bytes.capacity(), std::move(bytes));
}

Storage Interpreter::take_storage(DType dtype, const std::vector<int64_t>& shape) {
  size_t want = dtype_size(dtype);
  for (int64_t d : shape) want *= static_cast<size_t>(std::max<int64_t>(0, d));
  auto it = free_storage_.lower_bound(want);
  // Take a block that fits without wasting more than half of it.
  if (it == free_storage_.end() || it->first > 2 * want + 4096) return {};
  Storage bytes = std::move(it->second);
  free_storage_.erase(it);
  return bytes;
}

// A view's index expressions depend only on the view, so they are built once per edge, not on
// every run (building interns expressions, which dominated small decode steps).
const IndexExprs& Interpreter::index_exprs(NodeId node, size_t input) {
  if (index_exprs_.size() < graph_.size()) index_exprs_.resize(graph_.size());
  std::vector<std::optional<IndexExprs>>& per = index_exprs_[node];
  if (per.size() <= input) per.resize(graph_.node(node).inputs.size());
  if (!per[input]) per[input] = graph_.node(node).inputs[input].view.flat_index();
  return *per[input];
}

void Interpreter::run() {
  outputs_.clear();  // a failed run leaves no stale results behind
  auto run_start = std::chrono::steady_clock::now();
  double node_ms = 0;
  bind_dims();
  // The order and the reader counts depend only on the graph: computed on the first run.
  if (order_.empty()) {
    order_ = graph_.topo_order();
    readers_.assign(graph_.size(), 0);
    for (NodeId id : order_)
      for (const Edge& e : graph_.node(id).inputs) ++readers_[e.src];
    invariants_.analyse(graph_, order_);
  }
  const std::vector<NodeId>& order = order_;
  // Free each intermediate after its last consumer has run.
  std::vector<int> uses = readers_;
  std::vector<std::optional<Buffer>> live(graph_.size());  // by node id: a lookup per edge
  std::map<NodeId, NodeId> in_place;  // a Scatter that updated this input's buffer
  // One profile line per label: calls and milliseconds since t0, also kept out of the runner's.
  auto record = [&](const std::string& label, std::chrono::steady_clock::time_point t0) {
    ProfileEntry& p = profile_[label];
    p.label = label;
    ++p.calls;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    p.ms += ms;
    node_ms += ms;
  };
  auto buffer_of = [&](NodeId src) -> Buffer& {
    if (auto a = in_place.find(src); a != in_place.end()) return inputs_.at(a->second);
    if (graph_.node(src).op == OpKind::Input) return inputs_.at(src);
    LM_ASSERT(live[src].has_value(), "node " + std::to_string(src) + " read before it ran or after it was freed");
    return *live[src];
  };
  for (NodeId id : order) {
    const Node& n = graph_.node(id);
    if (n.op == OpKind::Input) continue;
    if (scatter_in_place(n, uses)) {
      auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      scatter_into(id, n, inputs_.at(n.inputs[0].src), buffer_of(n.inputs[1].src), buffer_of(n.inputs[2].src));
      if (profiling_) record("Scatter (in place)", t0);  // a KV cache write: its own line
      in_place[id] = n.inputs[0].src;
      invariants_.input_changed(n.inputs[0].src);
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (--uses[n.inputs[k].src] == 0) free_buffer(live, n.inputs[k].src);
      continue;
    }
    std::optional<Buffer> kept = invariants_.invariant(id) ? invariants_.reuse(id) : std::nullopt;
    if (kept) {
      for (const Edge& e : n.inputs)
        if (--uses[e.src] == 0) free_buffer(live, e.src);
      live[id] = std::move(*kept);
      continue;
    }
    std::vector<const Buffer*> in;
    for (const Edge& e : n.inputs) in.push_back(&buffer_of(e.src));
    auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    Buffer result = eval(id, n, in);
    if (invariants_.invariant(id)) result = invariants_.keep(id, std::move(result));
    if (profiling_) {
      std::string what = n.op == OpKind::Kernel ? n.kernel : op_name(n.op);
      record(last_native_ ? "native " + what : n.op == OpKind::Kernel ? "reference " + what : what, t0);
    }
    for (const Edge& e : n.inputs)
      if (--uses[e.src] == 0) free_buffer(live, e.src);
    if (n.op == OpKind::Output) outputs_[n.name] = std::move(result);
    else live[id] = std::move(result);
  }
  if (profiling_) {  // what the runner itself costs: scheduling, buffers
    ProfileEntry& p = profile_["(runner)"];
    p.label = "(runner)";
    ++p.calls;
    p.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run_start).count() - node_ms;
  }
}

// A Scatter into an Input that nothing else reads, through a plain contiguous view, writes into
// the input's buffer: that is how a KV cache persists across runs without a copy per step.
bool Interpreter::scatter_in_place(const Node& n, const std::vector<int>& uses) const {
  return n.op == OpKind::Scatter && uses[n.inputs[0].src] == 1 && scatter_can_update_input(graph_, n);
}

void Interpreter::scatter_into(NodeId id, const Node& n, Buffer& dest, const Buffer& idx_buf, const Buffer& src_buf) {
  Reader idx(idx_buf, n.inputs[1].view, index_exprs(id, 1), dims_), src(src_buf, n.inputs[2].view, index_exprs(id, 2), dims_);
  int64_t count = static_cast<int64_t>(dest.numel()), src_count = 1;
  for (int64_t d : concrete(n.inputs[2].view.shape())) src_count *= d;
  // The usual KV-cache write: i32 indices and values of the cache's dtype through strided
  // views, copied element by element without converting through double.
  if (idx.flat() && src.flat() && idx_buf.dtype() == DType::I32 && src_buf.dtype() == dest.dtype()) {
    const size_t es = dtype_size(dest.dtype());
    const int32_t* ip = reinterpret_cast<const int32_t*>(idx_buf.bytes());
    const uint8_t* sp = src_buf.bytes();
    uint8_t* dp = dest.bytes();
    const Reader::Flat &fi = *idx.flat(), &fs = *src.flat();
    // Runs along both views' rows: a KV write's row of one token lands on consecutive slots, so
    // a run whose indices count up by one is one copy (element by element, the cursors and
    // copies took 9 ns an element: 66 ms of a Qwen3-0.6B-shaped 128-token prefill).
    const int64_t run = fi.shape.empty() || fs.shape.empty() ? 1 : std::gcd(fi.shape.back(), fs.shape.back());
    const int64_t is = fi.shape.empty() ? 0 : fi.layout.strides.back(), ss = fs.shape.empty() ? 0 : fs.layout.strides.back();
    FlatCursor ci(fi), cs(fs);
    for (int64_t j = 0; j < src_count; j += run, ci.skip(run), cs.skip(run)) {
      const int32_t* ir = ip + ci.index();
      const uint8_t* sr = sp + static_cast<size_t>(cs.index()) * es;
      const int64_t k0 = ir[0];
      bool consecutive = is == 1 && ss == 1 && k0 >= 0 && k0 + run <= count;
      for (int64_t t = 1; consecutive && t < run; ++t) consecutive = ir[t] == k0 + t;
      if (consecutive) {
        std::memcpy(dp + static_cast<size_t>(k0) * es, sr, static_cast<size_t>(run) * es);
        continue;
      }
      for (int64_t t = 0; t < run; ++t) {
        const int64_t k = ir[t * is];
        if (k >= 0 && k < count) std::memcpy(dp + static_cast<size_t>(k) * es, sr + static_cast<size_t>(t * ss) * es, es);
      }
    }
    return;
  }
  for (int64_t j = 0; j < src_count; ++j) {
    int64_t k = static_cast<int64_t>(idx(j));
    if (k >= 0 && k < count) dest.set(static_cast<size_t>(k), src(j));
  }
}

std::vector<Interpreter::ProfileEntry> Interpreter::profile() const { return slowest_first(profile_); }

std::vector<Interpreter::ProfileEntry> slowest_first(const std::map<std::string, Interpreter::ProfileEntry>& by_label) {
  std::vector<Interpreter::ProfileEntry> r;
  for (const auto& [label, p] : by_label) r.push_back(p);
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
  return r;
}

const Buffer& Interpreter::output(const std::string& name) const {
  auto it = outputs_.find(name);
  if (it == outputs_.end()) {
    graph_.find_output(name);  // throws, listing the outputs, if the name is wrong
    throw Error("output '" + name + "' has not been computed yet: call run() first");
  }
  return it->second;
}

Buffer Interpreter::read_output(const std::string& name, DType as) const { return output(name).cast(as); }

Buffer Interpreter::take_output(const std::string& name) {
  output(name);  // throws for an unknown or not yet computed output
  auto it = outputs_.find(name);
  Buffer b = it->second.borrowed() ? Buffer(it->second) : std::move(it->second);  // a copy owns its bytes
  outputs_.erase(it);
  return b;
}

template <class T>
static constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else static_assert(sizeof(T) == 0, "output_as supports float, int32_t and bool");
}

template <class T>
std::vector<T> Interpreter::output_as(const std::string& name) const {
  const Buffer& b = output(name);
  if (b.dtype() != dtype_of<T>())
    throw Error("output '" + name + "' is " + dtype_name(b.dtype()) + ", not " + dtype_name(dtype_of<T>()) +
                "; use read_output(name, dtype) to convert");
  std::vector<T> r(b.numel());
  for (size_t i = 0; i < b.numel(); ++i) r[i] = static_cast<T>(b.get(i));
  return r;
}

template std::vector<float> Interpreter::output_as<float>(const std::string&) const;
template std::vector<int32_t> Interpreter::output_as<int32_t>(const std::string&) const;
template std::vector<bool> Interpreter::output_as<bool>(const std::string&) const;

}  // namespace luminal
