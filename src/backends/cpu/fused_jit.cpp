#include "backends/cpu/fused_jit.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "backends/cpu/fused_reduce_codegen.h"
#include "backends/cpu/thread_pool.h"
#include "core/cache_paths.h"
#include "runtime/flat_read.h"

namespace luminal::cpu {

namespace {

// The stride class an edge's view has along `axis`: that of its top layer's stride (one
// strided layer, or a strided top over a reshape). A masked view may be copied to contiguous
// memory first, where only the last axis keeps stride 1, so it gets One there or else Any.
InnerStride stride_class(const View& v, size_t axis) {
  if (v.rank() == 0) return InnerStride::Zero;
  const ViewLayer& top = v.layers().back();
  if (axis >= top.strides.size()) return InnerStride::Any;
  const Expr& s = top.strides[axis];
  const bool one = s.is_const() && s.value() == 1;
  if (v.has_mask()) return one && axis + 1 == v.rank() ? InnerStride::One : InnerStride::Any;
  if (!s.is_const()) return InnerStride::Any;
  return one ? InnerStride::One : s.value() == 0 ? InnerStride::Zero : InnerStride::Any;
}

InnerStride inner_stride_of(const View& v) { return stride_class(v, v.rank() == 0 ? 0 : v.rank() - 1); }

// Where a kernel reads an input whose view is not one strided layer: a copy of its elements.
// A stacked view (Reader::Stacked) copies only the elements below its top layer and is read
// through the top layer's strides; any other view is copied in full and read contiguously.
struct Operand {
  const void* ptr;
  int64_t offset;
  std::vector<int64_t> strides;  // over `shape`
};

Operand copy_operand(const Reader& r, const std::vector<int64_t>& shape, std::vector<Buffer>& copies) {
  if (const auto& st = r.stacked(); st && st->top.strides.size() == shape.size() && stacked_in_bounds(r)) {
    if (Buffer below = copy_below_top(r); below.numel() > 0) {
      Buffer& c = copies.emplace_back(std::move(below));
      return {c.bytes(), st->top.offset, st->top.strides};
    }
  }
  Buffer& c = copies.emplace_back(r.dtype(), shape);
  if (const auto& m = r.masked(); m && m->layout.shape == shape && !shape.empty()) {  // a pad, rotate_half's halves
    Buffer pad(r.dtype(), std::vector<int64_t>{1});
    pad.set(0, r.pad());
    copy_masked(*m, r.buffer().bytes(), dtype_size(r.dtype()), pad.bytes(), c.bytes());
  } else {
    for (size_t z = 0; z < c.numel(); ++z) c.set(z, r(static_cast<int64_t>(z)));
  }
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return {c.bytes(), 0, strides};
}

// An input read as a kernel wants it over `want`: in place when the reader is one strided
// layer over that shape (`read` is the shape the reader sees), else a copy (copy_operand).
Operand operand_of(const Reader& r, const std::vector<int64_t>& read, const std::vector<int64_t>& want, std::vector<Buffer>& copies) {
  if (r.strided() && read == want && r.strided()->strides.size() == want.size())
    return {r.buffer().bytes(), r.strided()->offset, r.strided()->strides};
  return copy_operand(r, want, copies);
}

bool matches(InnerStride want, int64_t stride) {
  return want == InnerStride::Any || (want == InnerStride::One && stride == 1) || (want == InnerStride::Zero && stride == 0);
}

std::optional<FusedProgram> single_op_program(const Graph& g, const Node& n) {
  if (n.op != OpKind::Cast && !is_unary(n.op) && !is_binary(n.op)) return std::nullopt;
  FusedProgram p;
  p.n_inputs = static_cast<int>(n.inputs.size());
  FusedInstr in;
  in.op = static_cast<int>(n.op);
  in.dtype = n.dtype;
  in.in_dtype = g.node(n.inputs[0].src).dtype;
  in.a = 0;
  in.b = n.inputs.size() > 1 ? 1 : -1;
  p.instrs.push_back(in);
  return p;
}

std::string class_letter(InnerStride s) { return s == InnerStride::One ? "1" : s == InnerStride::Zero ? "0" : "n"; }

struct NodeKernel {
  std::string name;  // a hash of what decides the code
  bool reduce = false;
  FusedSignature sig;          // elementwise
  FusedReduceSignature rsig;   // reduce
  const std::vector<InnerStride>& strides() const { return reduce ? rsig.along : sig.inner; }
  std::optional<std::string> source() const { return reduce ? fused_reduce_source(rsig, name) : fused_kernel_source(sig, name); }
};

std::string key_of(const std::vector<int64_t>& code, const std::vector<DType>& dtypes, const std::vector<InnerStride>& strides,
                   DType out) {
  std::string key;
  for (int64_t w : code) key += std::to_string(w) + ",";
  for (size_t i = 0; i < dtypes.size(); ++i)
    key += dtype_name(dtypes[i]) + (i < strides.size() ? class_letter(strides[i]) : "e") + ",";
  return key + dtype_name(out);
}

std::optional<NodeKernel> reduce_kernel(const Graph& plan, const Node& n) {
  NodeKernel k;
  k.reduce = true;
  FusedReduceSignature& sig = k.rsig;
  sig.is_sum = n.kernel == "FusedSum";
  try {
    size_t pos = 0;
    sig.prologue = FusedProgram::decode(n.code, pos);
    if (pos < n.code.size()) sig.epilogue = FusedProgram::decode(n.code, pos);
  } catch (const Error&) {
    return std::nullopt;
  }
  const size_t n_pro = static_cast<size_t>(sig.prologue.n_inputs);
  const size_t n_epi = sig.epilogue ? static_cast<size_t>(sig.epilogue->n_inputs - 1) : 0;
  if (n_pro + n_epi != n.inputs.size() || n_pro == 0) return std::nullopt;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    sig.input_dtypes.push_back(plan.node(n.inputs[i].src).dtype);
    if (i < n_pro) sig.along.push_back(stride_class(n.inputs[i].view, n.axis));
  }
  sig.out_dtype = n.dtype;
  k.name = "lm_reduce_" + hash_key((sig.is_sum ? "sum:" : "max:") + key_of(n.code, sig.input_dtypes, sig.along, n.dtype));
  return k;
}

// The generated kernel a node runs on, if it is elementwise work or a fused reduction the
// generator covers. Kernels are named by a hash of what decides their code, so identical
// kernels share one function and a library reused across plans (the search's candidates)
// compiles only new ones.
std::optional<NodeKernel> node_kernel(const Graph& plan, const Node& n) {
  if (n.op == OpKind::Kernel && (n.kernel == "FusedSum" || n.kernel == "FusedMax")) return reduce_kernel(plan, n);
  NodeKernel k;
  FusedSignature& sig = k.sig;
  if (n.op == OpKind::Kernel && n.kernel == "Fused") {
    try {
      sig.program = FusedProgram::decode(n.code);
    } catch (const Error&) {
      return std::nullopt;
    }
  } else if (auto p = single_op_program(plan, n)) {
    sig.program = *p;  // a lone elementwise primitive: a program of one instruction
  } else {
    return std::nullopt;
  }
  if (static_cast<size_t>(sig.program.n_inputs) != n.inputs.size()) return std::nullopt;
  for (const Edge& e : n.inputs) {
    sig.input_dtypes.push_back(plan.node(e.src).dtype);
    sig.inner.push_back(inner_stride_of(e.view));
  }
  sig.out_dtype = n.dtype;
  k.name = "lm_fused_" + hash_key(key_of(sig.program.encode(), sig.input_dtypes, sig.inner, n.dtype));
  return k;
}

using NodeKernels = std::vector<std::pair<const Node*, NodeKernel>>;

// Elements per thread below which a split costs more than it saves. A program that calls the
// math library per element (exp2, log2, sin: a gated MLP's silu) runs about ten times slower
// per element than plain arithmetic, so it splits eight times sooner: decode's [1, 3072] silu·up
// went from 44–53 to 28–32 µs per call (Qwen3-0.6B, 2 threads, `bench --profile` with a
// temporary per-shape label).
int64_t min_chunk_of(const NodeKernel& k) {
  if (k.reduce) return 8192;
  for (const FusedInstr& in : k.sig.program.instrs)
    if (in.op == static_cast<int>(OpKind::Exp2) || in.op == static_cast<int>(OpKind::Log2) || in.op == static_cast<int>(OpKind::Sin))
      return 1024;
  return 8192;
}

// The plan's nodes that have a generated kernel, each with it.
NodeKernels plan_kernels(const Graph& plan) {
  NodeKernels r;
  for (NodeId id = 0; id < plan.size(); ++id)
    if (std::optional<NodeKernel> k = node_kernel(plan, plan.node(id))) r.emplace_back(&plan.node(id), std::move(*k));
  return r;
}

// Sources of the kernels that `lib` lacks and the generator can write.
void collect_missing(const NodeKernels& kernels, const KernelLibrary& lib, std::map<std::string, std::string>& missing) {
  for (const auto& [node, k] : kernels) {
    if (lib.find(k.name) || missing.count(k.name)) continue;
    if (std::optional<std::string> body = k.source()) missing[k.name] = *body;
  }
}

}  // namespace

void* KernelLibrary::find(const std::string& key) const {
  auto it = fns_.find(key);
  return it == fns_.end() ? nullptr : it->second;
}

std::string KernelLibrary::add_for(const std::vector<const Graph*>& plans, const std::string& cache_dir, int jobs) {
  std::map<std::string, std::string> missing;
  for (const Graph* p : plans) collect_missing(plan_kernels(*p), *this, missing);
  return add(missing, cache_dir, jobs);
}

std::string KernelLibrary::add(const std::map<std::string, std::string>& missing, const std::string& cache_dir, int jobs) {
  if (missing.empty()) return "";
  // Split into `jobs` modules compiled side by side: one compiler process uses one core.
  const size_t parts = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(1, jobs)), missing.size() / 4 + 1));
  std::vector<std::vector<std::pair<std::string, std::string>>> chunks(parts);
  size_t i = 0;
  for (auto& kv : missing) chunks[i++ % parts].push_back(kv);
  std::vector<std::unique_ptr<JitModule>> loaded(parts);
  std::vector<std::string> why(parts);
  auto build = [&](size_t c) {
    std::string source = fused_kernel_prelude();
    for (const auto& [name, body] : chunks[c]) source += body;
    loaded[c] = JitModule::load(source, cache_dir, &why[c]);
  };
  std::vector<std::thread> threads;
  for (size_t c = 1; c < parts; ++c) threads.emplace_back(build, c);
  build(0);
  for (std::thread& t : threads) t.join();
  for (size_t c = 0; c < parts; ++c) {
    if (!loaded[c]) return why[c];
    for (const auto& [name, body] : chunks[c])
      if (void* f = loaded[c]->symbol(name)) fns_[name] = f;
    modules_.push_back(std::move(loaded[c]));
  }
  return "";
}

void FusedJit::prepare(const Graph& plan, const std::string& cache_dir) {
  by_node_.clear();
  if (!library_) library_ = std::make_shared<KernelLibrary>();
  auto t0 = std::chrono::steady_clock::now();
  const size_t modules_before = library_->modules();
  const NodeKernels kernels = plan_kernels(plan);
  std::map<std::string, std::string> missing;
  collect_missing(kernels, *library_, missing);
  std::string why = library_->add(missing, cache_dir, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  if (!why.empty()) {
    status_ = "generated kernels unavailable (" + why + "); elementwise nodes run on the kernel interpreter";
    return;
  }
  std::map<std::string, bool> distinct;
  for (const auto& [node, k] : kernels)
    if (void* f = library_->find(k.name)) {
      by_node_[node] = Bound{f, k.reduce, k.strides(), min_chunk_of(k)};
      distinct[k.name] = true;
    }
  if (by_node_.empty()) {
    status_ = "no elementwise kernels to generate";
    return;
  }
  const size_t added = library_->modules() - modules_before;
  std::string how = added == 0 ? "all already loaded"
                               : std::string(library_->last_from_cache() ? "loaded from " : "compiled into ") +
                                     std::to_string(added) + " module(s) like " + library_->last_path();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  status_ = std::to_string(distinct.size()) + " generated kernels for " + std::to_string(by_node_.size()) + " elementwise nodes, " +
            how + " in " + std::to_string(static_cast<int64_t>(ms)) + " ms";
}

bool FusedJit::run(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                   ThreadPool& pool) const {
  auto it = by_node_.find(&n);
  if (it == by_node_.end()) return false;
  const Bound& b = it->second;
  if (b.reduce) return run_reduce(n, b, in, shapes, out, pool);
  std::vector<int64_t> shape = out.shape();
  if (shape.empty()) shape = {1};
  const size_t rank = shape.size(), n_in = in.size();
  std::vector<const void*> ptrs(n_in);
  std::vector<int64_t> off(n_in), st(n_in * rank);
  std::vector<Buffer> copies;  // inputs whose view is not plain strided (copy_operand)
  copies.reserve(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const Reader& r = in[i];
    Operand op = operand_of(r, shapes[i], shapes[i], copies);
    if (op.strides.size() != rank && !(op.strides.empty() && out.shape().empty())) return false;
    if (!matches(b.inner[i], op.strides.empty() ? 0 : op.strides.back())) return false;
    ptrs[i] = op.ptr;
    off[i] = op.offset;
    for (size_t d = 0; d < rank; ++d) st[i * rank + d] = op.strides.empty() ? 0 : op.strides[d];
  }
  // Merge an axis into the next when every input steps through both as one (the output is
  // contiguous): longer inner loops, fewer row starts.
  for (size_t d = rank - 1; d-- > 0;) {
    bool mergeable = true;
    for (size_t i = 0; i < n_in && mergeable; ++i)
      mergeable = st[i * rank + d] == st[i * rank + d + 1] * shape[d + 1];
    if (!mergeable) continue;
    shape[d + 1] *= shape[d];
    shape[d] = 1;
  }
  // Axes of length 1 that merging left behind are harmless: they contribute no offset.
  const int64_t inner = shape.back(), rows = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, inner);
  if (out.numel() == 0) return true;
  auto call = [&](int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
    reinterpret_cast<FusedKernelFn>(b.fn)(ptrs.data(), off.data(), st.data(), out.bytes(), shape.data(),
                                          static_cast<int64_t>(rank), r0, r1, j0, j1);
  };
  const int64_t total = rows * inner, min_chunk = b.min_chunk;
  if (total < 2 * min_chunk || pool.size() == 1) {
    call(0, rows, 0, inner);
  } else if (rows >= pool.size()) {
    pool.parallel_for(rows, [&](int64_t r0, int64_t r1) { call(r0, r1, 0, inner); }, std::max<int64_t>(1, min_chunk / inner));
  } else {
    pool.parallel_for(inner, [&](int64_t j0, int64_t j1) { call(0, rows, j0, j1); }, std::max<int64_t>(1, min_chunk / rows));
  }
  return true;
}

bool FusedJit::run_reduce(const Node& n, const Bound& b, const std::vector<Reader>& in,
                          const std::vector<std::vector<int64_t>>& shapes, Buffer& out, ThreadPool& pool) const {
  const std::vector<int64_t>& domain = shapes.at(0);
  const size_t rank = domain.size(), axis = n.axis, n_in = in.size(), n_pro = b.inner.size();
  if (axis >= rank) return false;
  std::vector<int64_t> out_shape;  // the domain without the reduced axis
  for (size_t d = 0; d < rank; ++d)
    if (d != axis) out_shape.push_back(domain[d]);
  int64_t n_out = 1;
  for (int64_t d : out_shape) n_out *= d;
  if (static_cast<int64_t>(out.numel()) != n_out) return false;
  std::vector<const void*> ptrs(n_in);
  std::vector<int64_t> off(n_in), st(n_in * rank);
  std::vector<Buffer> copies;  // inputs whose view is not plain strided (copy_operand)
  copies.reserve(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const Reader& r = in[i];
    const bool pro = i < n_pro;
    // The shape input i is read over: the domain (prologue) or the outputs (epilogue).
    const std::vector<int64_t>& own = pro ? domain : out_shape;
    if (shapes[i] != own) {
      if (pro) return false;
      int64_t count = 1;  // an epilogue input of another rank with the outputs' count: read flat
      for (int64_t d : shapes[i]) count *= d;
      if (count != n_out) return false;
    }
    Operand op = operand_of(r, shapes[i], own, copies);
    if (op.strides.size() != own.size() || (pro && !matches(b.inner[i], op.strides[axis]))) return false;
    ptrs[i] = op.ptr;
    off[i] = op.offset;
    int64_t* s_out = &st[i * rank];
    if (pro) std::copy(op.strides.begin(), op.strides.end(), s_out);
    else for (size_t d = 0, k = 0; d < rank; ++d) s_out[d] = d == axis ? 0 : op.strides[k++];
  }
  if (n_out == 0) return true;
  auto fn = reinterpret_cast<FusedReduceFn>(b.fn);
  auto call = [&](int64_t o0, int64_t o1) {
    fn(ptrs.data(), off.data(), st.data(), out.bytes(), domain.data(), static_cast<int64_t>(rank), static_cast<int64_t>(axis), o0, o1);
  };
  const int64_t len = std::max<int64_t>(1, domain[axis]), min_chunk = b.min_chunk;
  if (n_out * len < 2 * min_chunk || n_out == 1 || pool.size() == 1) call(0, n_out);
  else pool.parallel_for(n_out, call, std::max<int64_t>(1, min_chunk / len));
  return true;
}

}  // namespace luminal::cpu
